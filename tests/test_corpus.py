"""Training corpora: the packaged wiki-offline default and its held-out split, text/BEIR files, wiki1m / msmarco
from a data folder (their absence is an error naming the source), sentence splitting."""

from __future__ import annotations

import gzip
import json

import pytest

from bench.data.errors import DataError, DatasetMissingError
from bench.data.corpus import load_corpus, load_wiki_offline, wiki_offline_file
from bench.data.sentences import first_and_rest, regex_split, split_sentences


@pytest.fixture(scope="module")
def wiki():
    try:
        wiki_offline_file()
    except DataError as exc:
        pytest.skip(str(exc))
    return load_wiki_offline("train"), load_wiki_offline("heldout")


def test_wiki_offline_default_corpus_and_disjoint_heldout_split(wiki):
    train, heldout = wiki
    assert train.name == "wiki-offline" and len(train.texts) > 9000
    assert 300 < len(heldout.texts) < 800  # ~5% of ~10k articles
    assert not set(train.texts) & set(heldout.texts)  # never trained on what `heldout` evaluates
    assert train.files == [str(wiki_offline_file())] and "CC BY-SA" in train.licence
    assert all(t == " ".join(t.split()) and t for t in train.texts[:200])
    assert load_corpus(limit=5).texts == train.texts[:5]


def test_heldout_suite_pairs_come_from_heldout_articles(wiki):
    from bench.evaluate.suites.heldout import known_item_pairs

    _, heldout = wiki
    ids, queries, docs = known_item_pairs(limit=20)
    assert len(ids) == len(queries) == len(docs) == 20
    for q, d in zip(queries, docs):  # query: the LAST sentence (the first names the subject: a trivial task)
        assert any(t.startswith(d) and t.endswith(q) and not t.startswith(q) for t in heldout.texts)


def test_heldout_suite_scores_with_a_model(wiki, tiny_model_dir):
    from bench.encode.encoder import Encoder
    from bench.evaluate.suites import EvalContext, parse_suites

    (suite, attacked), = parse_suites("heldout@elong")
    model = Encoder.load(str(tiny_model_dir), max_len=64, use_cache=False, show_progress=False)
    ctx = EvalContext(attacked=attacked, elong=["2"], limit=12)
    records = suite.evaluate(model, suite.datasets()[0], ctx)
    by = {(r.variant, r.metric): r for r in records}
    # recall@100 is not reported: one relevant document among a few hundred is always in the top 100
    assert set(by) == {(v, m) for v in ("clean", "elong-2") for m in ("ndcg_at_10", "mrr_at_10")}
    assert all(0.0 <= r.value <= 100.0 and r.n == 12 for r in records)
    assert by[("clean", "ndcg_at_10")].items is not None and len(by[("clean", "ndcg_at_10")].items.values) == 12



def test_heldout_suite_scores_bm25_like_a_retrieval_suite(wiki):
    from bench.evaluate.lexical import BM25Model
    from bench.evaluate.suites import EvalContext, parse_suites

    (suite, attacked), = parse_suites("heldout@elong")
    ctx = EvalContext(attacked=attacked, elong=["2"], limit=12)
    by = {(r.variant, r.metric): r.value for r in suite.evaluate(BM25Model(max_len=64), suite.datasets()[0], ctx)}
    assert by[("clean", "ndcg_at_10")] > 50  # a last sentence shares words with the rest of its own article

def test_text_and_beir_file_corpora(tmp_path):
    lines = tmp_path / "c.txt"
    lines.write_text("first  text here\n\n  second text\nthird\n")
    c = load_corpus(str(lines))
    assert c.texts == ["first text here", "second text", "third"] and c.files == [str(lines)]
    assert load_corpus(str(lines), limit=2).texts == ["first text here", "second text"]

    gz = tmp_path / "c.txt.gz"
    with gzip.open(gz, "wt") as fh:
        fh.write("a b\nc d\n")
    assert load_corpus(str(gz)).texts == ["a b", "c d"]

    beir = tmp_path / "beir" / "x"
    beir.mkdir(parents=True)
    rows = [{"_id": "1", "title": "T1", "text": "Doc one. Second sentence."}, {"_id": "2", "title": "Only title", "text": ""}]
    (beir / "corpus.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert load_corpus(str(beir)).texts == ["Doc one. Second sentence.", "Only title"]
    assert load_corpus(str(beir / "corpus.jsonl"), limit=1).texts == ["Doc one. Second sentence."]


def test_bad_corpus_specs_are_clear_errors(tmp_path):
    with pytest.raises(DataError, match="neither a known corpus"):
        load_corpus(str(tmp_path / "nope.txt"))
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    with pytest.raises(DataError, match="holds no text"):
        load_corpus(str(empty))
    (tmp_path / "folder").mkdir()
    with pytest.raises(DataError, match="no corpus.jsonl"):
        load_corpus(str(tmp_path / "folder"))
    with pytest.raises(DataError, match="positive"):
        load_corpus(str(empty), limit=0)


@pytest.mark.parametrize("name, url", [
    ("wiki1m", "https://huggingface.co/datasets/princeton-nlp/datasets-for-simcse/resolve/main/wiki1m_for_simcse.txt"),
    ("msmarco", "https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/msmarco.zip"),
])
def test_public_training_corpora_missing_offline_name_their_source(name, url, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no ./data or ../shared/data holding them
    (tmp_path / "data").mkdir()  # a data folder that exists but lacks the corpus (a missing folder is its own error)
    with pytest.raises(DatasetMissingError) as err:
        load_corpus(name, data_dir=str(tmp_path / "data"))
    assert url in str(err.value) and name in str(err.value)


def test_public_training_corpora_found_in_a_data_folder(tmp_path, monkeypatch):
    from bench.data.catalog import status

    monkeypatch.chdir(tmp_path)
    data = tmp_path / "data"
    (data / "corpora").mkdir(parents=True)
    (data / "corpora" / "wiki1m_for_simcse.txt").write_text("YMCA in South Australia\nAnother sentence.\n")
    (data / "beir" / "msmarco").mkdir(parents=True)
    with gzip.open(data / "beir" / "msmarco" / "corpus.jsonl.gz", "wt") as fh:
        fh.write(json.dumps({"_id": "0", "title": "", "text": "The presence of communication. It matters."}) + "\n")
    wiki1m = load_corpus("wiki1m", data_dir=str(data))
    assert wiki1m.name == "wiki1m" and wiki1m.texts == ["YMCA in South Australia", "Another sentence."]
    assert "SimCSE" in wiki1m.source
    msmarco = load_corpus("msmarco", data_dir=str(data))
    assert msmarco.name == "msmarco" and msmarco.texts == ["The presence of communication. It matters."]
    found = {info.name: (info.kind, path) for info, path in status(str(data))}
    assert found["wiki1m"][0] == "corpus" and found["wiki1m"][1] is not None and found["msmarco"][1] is not None


def test_sentence_splitting():
    text = "Dr. Smith went to Washington. He arrived at 5 p.m. on Monday!  Was it late? Yes."
    assert split_sentences(text) == ["Dr. Smith went to Washington.", "He arrived at 5 p.m. on Monday!", "Was it late?", "Yes."]
    assert first_and_rest(text) == ("Dr. Smith went to Washington.", "He arrived at 5 p.m. on Monday! Was it late? Yes.")
    assert split_sentences("") == [] and first_and_rest("   ") == ("", "")
    assert regex_split("One. Two! Three? four") == ["One.", "Two!", "Three? four"]


# ------------------------------------------------------------------ in-domain: an evaluation set's own texts
def _beir_folder(root, name="tiny"):
    folder = root / "beir" / name
    (folder / "qrels").mkdir(parents=True)
    docs = [{"_id": f"d{i}", "title": f"Title {i}", "text": f"Body of document {i}."} for i in range(3)]
    docs.append({"_id": "d3", "title": "Only a title", "text": ""})
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    # Neither may be read: a reader that touched them would fail (not UTF-8, not JSON, not a qrels table).
    (folder / "queries.jsonl").write_bytes(b"\xff\xfe not json at all\n")
    (folder / "qrels" / "test.tsv").write_bytes(b"\xff garbage\tqrels\n")
    return folder


def test_beir_corpus_reads_documents_only(tmp_path, monkeypatch):
    """--corpus beir:NAME: title + text of each document (as evaluation encodes them); the only file opened is
    corpus.jsonl, so corrupt queries and qrels go unnoticed, and the corpus names its dataset."""
    import bench.data.lines as readers

    folder = _beir_folder(tmp_path)
    opened = []
    real_open = readers._open_binary
    monkeypatch.setattr(readers, "_open_binary", lambda p: opened.append(str(p)) or real_open(p))
    corpus = load_corpus("beir:tiny", data_dir=str(tmp_path))
    assert corpus.texts == ["Title 0 Body of document 0.", "Title 1 Body of document 1.",
                            "Title 2 Body of document 2.", "Only a title"]  # fmt: skip
    assert corpus.dataset == ("beir", "tiny") and corpus.name == "beir:tiny"
    assert opened == [str(folder / "corpus.jsonl")] and corpus.files == opened
    assert load_corpus("beir:tiny", data_dir=str(tmp_path), limit=2).texts == corpus.texts[:2]


def test_knn_corpus_reads_texts_never_labels(tmp_path):
    """--corpus knn:NAME: the text of every line; a label that is missing, null or odd is never looked at."""
    path = tmp_path / "knn" / "toy_test.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text('{"text": "first text", "label": null}\n{"text": "second  text"}\n{"text": "third", "label": {"x": 1}}\n')
    corpus = load_corpus("knn:toy", data_dir=str(tmp_path))
    assert corpus.texts == ["first text", "second text", "third"] and corpus.dataset == ("labelled", "toy")


def test_in_domain_datasets_match_kind_and_name(tmp_path):
    from bench.data.catalog import find
    from bench.data.corpus import in_domain_datasets

    _beir_folder(tmp_path, "tiny")
    _beir_folder(tmp_path, "other")
    corpus = load_corpus("beir:tiny", data_dir=str(tmp_path))
    located = [find(n, str(tmp_path), kind="beir") for n in ("tiny", "other")]
    assert in_domain_datasets(corpus, located) == ["tiny"]
    assert in_domain_datasets(load_corpus(str(tmp_path / "beir" / "tiny")), located) == []  # a file corpus: no claim


def test_missing_in_domain_corpus_is_a_clear_error(tmp_path):
    with pytest.raises(DatasetMissingError, match="nosuch"):
        load_corpus("beir:nosuch", data_dir=str(tmp_path))
    with pytest.raises(DataError, match="not a beir"):
        _ = (tmp_path / "knn").mkdir() or (tmp_path / "knn" / "agnews_test.jsonl").write_text('{"text": "a"}\n')
        load_corpus("beir:agnews", data_dir=str(tmp_path))


def test_a_corpus_files_digest_is_noted_and_forgotten_when_the_file_changes(tmp_path, monkeypatch):
    """A file corpus carries the SHA-256 of its bytes; the load notes it so a sweep knows it without reading the
    file; an edit of the same size with the modification time put back makes it unknown again (a write moves the
    change time); the packaged wiki-offline has none."""
    import hashlib
    import os

    from bench.data.corpus import known_corpus_digest

    monkeypatch.setenv("LENBENCH_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "c.txt"
    path.write_text("one text\nanother text\n")
    corpus = load_corpus(str(path))
    assert corpus.digest == hashlib.sha256(path.read_bytes()).hexdigest()
    assert known_corpus_digest(str(path)) == corpus.digest
    before = path.stat()
    path.write_text("one text\nanother tent\n")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert known_corpus_digest(str(path)) is None
    assert load_corpus(str(path)).digest == known_corpus_digest(str(path)) != corpus.digest
    assert known_corpus_digest("wiki-offline") is None
