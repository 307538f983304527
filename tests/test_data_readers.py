import gzip
import json
import re

import pytest

from bench.data import DataError, DatasetMissingError, locate, read_beir, read_labelled, read_sts
from tests.conftest import write_sts


def make_beir(root, corpus, queries, qrels, gz=False):
    root.mkdir(parents=True, exist_ok=True)
    (root / "qrels").mkdir(exist_ok=True)

    def write(path, text):
        if gz:
            with gzip.open(f"{path}.gz", "wt", encoding="utf-8") as fh:
                fh.write(text)
        else:
            path.write_text(text)

    write(root / "corpus.jsonl", "\n".join(json.dumps(d) for d in corpus) + "\n")
    write(root / "queries.jsonl", "\n".join(json.dumps(q) for q in queries) + "\n")
    (root / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{s}\n" for q, d, s in qrels)
    )
    return root


CORPUS = [{"_id": "d1", "title": "Cats", "text": "cats purr."}, {"_id": "d2", "title": "", "text": "dogs bark."}]
QUERIES = [{"_id": "q1", "text": "what purrs"}, {"_id": "q2", "text": "unjudged query"}]


@pytest.mark.parametrize("gz", [False, True])
def test_read_beir_plain_and_gz(tmp_path, gz):
    data = read_beir(make_beir(tmp_path / "toy", CORPUS, QUERIES, [("q1", "d1", 1)], gz=gz))
    assert data.doc_text("d1") == "Cats cats purr." and data.doc_text("d2") == "dogs bark."
    assert data.queries == {"q1": "what purrs"}  # only judged queries are evaluated
    assert data.qrels == {"q1": {"d1": 1}}


def test_qrels_naming_unknown_doc_is_kept_counted_and_named_once(tmp_path, caplog):
    root = make_beir(tmp_path / "toy", CORPUS, QUERIES, [("q1", "d1", 1), ("q1", "nope", 1)])
    data = read_beir(root)
    assert data.qrels["q1"] == {"d1": 1, "nope": 1} and data.anomalies == {"qrels_unknown_docs": 1}
    assert re.search(r"test\.tsv: 1 judgement\(s\) name documents that are not in corpus\.jsonl \('nope' \(line 3\)\)",
                     caplog.text)


def test_corrupt_jsonl_line_is_named(tmp_path):
    root = make_beir(tmp_path / "toy", CORPUS, QUERIES, [("q1", "d1", 1)])
    with open(root / "corpus.jsonl", "a") as fh:
        fh.write('{"_id": "d3", "text": \n')
    with pytest.raises(DataError, match=r"corpus\.jsonl:3: not valid JSON"):
        read_beir(root)


def test_empty_corpus_is_an_error(tmp_path):
    root = make_beir(tmp_path / "toy", [], QUERIES, [])
    with pytest.raises(DataError, match="corpus of 'toy' is empty"):
        read_beir(root)


def test_read_sts_and_split_filter(tmp_path):
    path = tmp_path / "x.tsv"
    path.write_text("sentence1\tsentence2\tscore\tsplit\na\tb\t1.0\ttrain\nc\td\t2.5\ttest\n")
    assert read_sts(path).scores == [1.0, 2.5]
    only_test = read_sts(path, split="test")
    assert only_test.sentences1 == ["c"] and only_test.scores == [2.5]


def test_read_sts_bad_score_names_line(tmp_path):
    path = write_sts(tmp_path / "x.tsv", [("a", "b", 1.0), ("c", "d", "high")])
    with pytest.raises(DataError, match=r"x\.tsv:3: score 'high'"):
        read_sts(path)


def test_read_labelled(tmp_path):
    path = tmp_path / "l.jsonl"
    path.write_text('{"text": "a", "label": "x"}\n\n{"text": "b", "label": "2"}\n')
    data = read_labelled(path)
    assert data.texts == ["a", "b"] and data.labels == ["x", "2"]
    path.write_text('{"text": "a", "label": 2}\n{"text": "b", "label": 2.0}\n{"text": "c", "label": 3}\n')
    assert read_labelled(path).labels == ["2", "2", "3"]  # 2 and 2.0 are one JSON number: one class


@pytest.mark.parametrize("lines, message", [
    (['{"text": "a", "label": 1}', '{"text": "b", "label": 1}', '{"text": "c", "label": "1"}'],
     "l.jsonl:3: 'label' \"1\" is a string but line 1's label is a number; give every label the same type"),
    (['{"text": "a", "label": "x"}', '{"text": "b", "label": true}'],
     "l.jsonl:2: 'label' true is a boolean but line 1's label is a string"),
    (['{"text": "a", "label": ["x"]}'], "l.jsonl:1: 'label' is a list; give every text one label"),
])  # fmt: skip
def test_mixed_label_types_are_refused_with_the_line(tmp_path, lines, message):
    path = tmp_path / "l.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError) as err:
        read_labelled(path)
    assert message in str(err.value)
    path.write_text('{"text": "a"}\n')
    with pytest.raises(DataError, match=r"l\.jsonl:1: missing field\(s\) \['label'\]"):
        read_labelled(path)


def test_missing_dataset_error_names_dataset_folders_and_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "nowhere").mkdir()  # a data folder without the dataset (a folder that does not exist is refused)
    with pytest.raises(DatasetMissingError) as err:
        locate("scifact", tmp_path / "nowhere")
    msg = str(err.value)
    assert "'scifact'" in msg and str(tmp_path / "nowhere") in msg
    assert "beir/scifact/corpus.jsonl" in msg and "beir/scifact/qrels/test.tsv" in msg


def test_locate_finds_files_under_data_dir(tmp_path):
    write_sts(tmp_path / "sts" / "stsb-test.tsv", [("a", "b", 1.0)])
    assert locate("stsb", tmp_path) == tmp_path / "sts" / "stsb-test.tsv"


# ------------------------------------------------------------------ lazy corpus (issue 10: corpora of millions)
LAZY_CORPUS = [
    {"_id": "d1", "title": "Cats", "text": "cats purr."},
    {"_id": "d2", "title": None, "text": "dogs bark, ünïcode ✓."},
    {"_id": "d3", "text": "no title field"},
    {"_id": "d1", "title": "Cats again", "text": "the last record of a repeated id wins."},
    {"_id": 7, "title": "", "text": "a numeric id"},
]


def test_lazy_corpus_reads_what_the_eager_reader_holds(tmp_path):
    from bench.data.lazy_corpus import LazyCorpus

    root = make_beir(tmp_path / "toy", LAZY_CORPUS, QUERIES, [("q1", "d1", 1), ("q1", "7", 0)])
    with open(root / "corpus.jsonl", "a") as fh:  # a blank line is skipped by both
        fh.write("\n")
    lazy, eager = read_beir(root), read_beir(root, lazy=False)
    assert isinstance(lazy.corpus, LazyCorpus) and isinstance(eager.corpus, dict)
    assert list(lazy.corpus) == list(eager.corpus) == ["d1", "d2", "d3", "7"]  # first occurrence's position
    assert dict(lazy.corpus.items()) == eager.corpus
    assert eager.corpus["d1"]["text"] == "the last record of a repeated id wins."
    assert lazy.duplicates == eager.duplicates == {"corpus": 1}
    assert lazy.doc_texts(["7", "d1", "d2"]) == [eager.doc_text(d) for d in ["7", "d1", "d2"]]
    assert lazy.doc_text("d2") == "dogs bark, ünïcode ✓."
    assert "d3" in lazy.corpus and "d9" not in lazy.corpus and len(lazy.corpus) == 4
    with pytest.raises(KeyError):
        lazy.corpus["d9"]


def test_lazy_corpus_pickles_and_refuses_a_file_changed_underneath(tmp_path):
    import pickle

    root = make_beir(tmp_path / "toy", CORPUS, QUERIES, [("q1", "d1", 1)])
    data = read_beir(root)
    assert data.doc_text("d1") == "Cats cats purr."  # opens the file
    copy = pickle.loads(pickle.dumps(data))
    assert copy.doc_text("d2") == "dogs bark." and copy.corpus is not data.corpus
    with open(root / "corpus.jsonl", "a") as fh:
        fh.write(json.dumps({"_id": "d3", "text": "added later"}) + "\n")
    with pytest.raises(DataError, match="corpus file changed while it was being evaluated"):
        data.doc_text("d1")


def test_a_gz_corpus_is_held_in_memory_and_cannot_be_lazy(tmp_path):
    root = make_beir(tmp_path / "toy", CORPUS, QUERIES, [("q1", "d1", 1)], gz=True)
    assert isinstance(read_beir(root).corpus, dict)
    with pytest.raises(DataError, match="cannot be read lazily; decompress it"):
        read_beir(root, lazy=True)


def test_retrieval_scores_are_equal_from_a_lazy_and_an_in_memory_corpus(tmp_path, monkeypatch):
    """The suite reads documents chunk by chunk (here 2 at a time) from the file: same scores as from a dict."""
    import bench.evaluate.suites.retrieval as retrieval
    from bench.evaluate.lexical import BM25Model
    from bench.evaluate.suites.base import EvalContext

    corpus = [{"_id": f"d{i}", "title": f"t{i % 3}", "text": f"word{i} shared{i % 4} common"} for i in range(9)]
    queries = [{"_id": f"q{i}", "text": f"word{i} shared{i % 4}"} for i in range(4)]
    root = make_beir(tmp_path / "toy", corpus, queries, [(f"q{i}", f"d{i}", 1) for i in range(4)])
    monkeypatch.setattr(retrieval, "ITER_CHUNK", 2)
    scores = {}
    for lazy in (True, False):
        data = read_beir(root, lazy=lazy)
        records = retrieval.score_retrieval(BM25Model(), data, "toy", EvalContext(data_dir=None), "beir")
        scores[lazy] = [(r.metric, r.value, r.items.values) for r in records]
    assert scores[True] == scores[False] and scores[True][0][1] == pytest.approx(100.0)
