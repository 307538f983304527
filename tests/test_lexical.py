"""`--model bm25`: Lucene BM25 by bm25s, scored like any retrieval model, attacked too (word-level elongation)."""

import json
import math
from collections.abc import Sequence

import bm25s
import numpy as np
import pytest

from bench.cli import main
from bench.evaluate.lexical import B, K1, BM25Model
from bench.evaluate.models import load_model
from bench.evaluate.suites import EvalContext, parse_suites
from results_db import ResultsDB
from tests.conftest import write_sts


def write_beir(folder, docs, queries, qrels):
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "title": "", "text": t}) + "\n" for d, t in docs.items()))
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries.items()))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, d in qrels))
    return folder


DOCS = {
    "guitar": "a man plays the electric guitar on stage every night",
    "onion": "slice the onion and fry it slowly in butter",
    "market": "the stock market fell sharply after the quarterly report",
    "garden": "the dog barks at the cat in the garden",
    "rocket": "the rocket launched a weather satellite into orbit",
    "violin": "she plays the violin in an orchestra",
}
QUERIES = {"q1": "electric guitar player", "q2": "stock market report", "q3": "satellite orbit launch"}
QRELS = [("q1", "guitar"), ("q2", "market"), ("q3", "rocket")]


@pytest.mark.parametrize("chunk_docs", [1, 2, 1000])
def test_bm25_scores_equal_the_lucene_formula(chunk_docs):
    docs = ["apple banana apple", "banana cherry", "cherry date grape"]
    k1, b = K1, B
    assert (k1, b) == (1.2, 0.75)  # BEIR's (Elasticsearch's) parameters, as bm25s's BEIR benchmark sets them
    avgdl, n = 8 / 3, 3

    def tfc(tf, dl):
        return tf / (tf + k1 * (1 - b + b * dl / avgdl))

    def idf(df):
        return math.log(1 + (n - df + 0.5) / (df + 0.5))

    scores, idx = BM25Model(chunk_docs=chunk_docs).search(docs, ["apple", "banana cherry"], k=3)
    assert idx[0].tolist() == [0, -1, -1]  # only d0 contains 'apple'
    assert scores[0, 0] == pytest.approx(idf(1) * tfc(2, 3), rel=1e-5)
    assert idx[1, 0] == 1  # both terms, shortest document
    assert scores[1, 0] == pytest.approx(2 * idf(2) * tfc(1, 2), rel=1e-5)
    assert scores[1, 1] == pytest.approx(idf(2) * tfc(1, 3), rel=1e-5) and scores[1, 1] == pytest.approx(scores[1, 2])


# chunks of 3: 'zebra' and 'dog' only in the last chunk, 'apple' not in it; empty titles (a whole chunk of them), an
# empty document, a stop-word-only text, repeated terms, and a query of unknown words only
STREAMED_DOCS = [("Apple pie", "apple banana apples baked"), ("", "banana cherry"), ("Cherry", "cherry date grape cherry"),
                 ("", ""), ("", "the of and"), ("", "kiwi running runs date grapes"),
                 ("Zebra dog", "the zebra chased a running dog"), ("", "dog days dog")]  # fmt: skip
STREAMED_QUERIES = ["apple banana", "cherry unknownword", "running dog", "zebra", "qwerty asdfgh", "the", "dog dog date"]


def bm25s_on_the_whole_corpus(field_texts, queries):
    """The reference: bm25s indexing a field's token lists all at once (what lenbench did before streaming)."""
    model = BM25Model()
    retriever = bm25s.BM25(method="lucene", k1=1.2, b=0.75)
    retriever.index(model._tokenize(field_texts), show_progress=False)
    return np.array([retriever.get_scores(q) if q else np.zeros(len(field_texts)) for q in model._tokenize(queries)])


@pytest.mark.parametrize("fields", ["multifield", "flat"])
def test_streamed_index_scores_and_ranks_as_bm25s_on_the_whole_corpus(fields):
    if fields == "flat":
        field_texts = [[f"{t} {x}".strip() for t, x in STREAMED_DOCS]]
    else:
        field_texts = [[t for t, _ in STREAMED_DOCS], [x for _, x in STREAMED_DOCS]]
    expected = [bm25s_on_the_whole_corpus(texts, STREAMED_QUERIES) for texts in field_texts]
    model = BM25Model(fields=fields, chunk_docs=3)
    query_tokens = model._tokenize(STREAMED_QUERIES)
    for retriever, want in zip(model._index(STREAMED_DOCS), expected, strict=True):
        got = np.array([retriever.get_scores(q) if q else np.zeros(len(STREAMED_DOCS)) for q in query_tokens])
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)  # every document, every query, per field
    total = np.sum(expected, axis=0)
    assert total[3].nonzero()[0].tolist() == [6] and not total[4].any() and not total[5].any()  # cases exercised
    scores, idx = model.search(STREAMED_DOCS, STREAMED_QUERIES, k=len(STREAMED_DOCS))
    for qi, row in enumerate(total):
        order = sorted(range(len(row)), key=lambda d: (-row[d], d))  # score desc, corpus order among ties
        assert idx[qi].tolist() == [d if row[d] > 0 else -1 for d in order], STREAMED_QUERIES[qi]
        np.testing.assert_allclose(scores[qi], row[order], rtol=1e-5, atol=1e-7)


class SliceOnlyCorpus(Sequence):
    """A corpus that may only be read by slices of at most `max_slice` documents (as a lazily read jsonl would)."""

    def __init__(self, docs, max_slice):
        self.docs, self.max_slice, self.slices = docs, max_slice, []

    def __len__(self):
        return len(self.docs)

    def __getitem__(self, index):
        if not isinstance(index, slice) or len(range(*index.indices(len(self.docs)))) > self.max_slice:
            raise AssertionError(f"corpus read whole or by item: {index!r}")
        self.slices.append((index.start, index.stop))
        return self.docs[index]

    def __iter__(self):
        raise AssertionError("corpus iterated whole")


def test_bm25_reads_its_corpus_only_by_slices():
    corpus = SliceOnlyCorpus(STREAMED_DOCS, max_slice=3)
    scores, idx = BM25Model(chunk_docs=3).search(corpus, STREAMED_QUERIES, k=4)
    assert corpus.slices == [(0, 3), (3, 6), (6, 9)]  # each document read once, in order
    expected = BM25Model(chunk_docs=1000).search(list(STREAMED_DOCS), STREAMED_QUERIES, k=4)
    np.testing.assert_array_equal(idx, expected[1])
    np.testing.assert_allclose(scores, expected[0], rtol=1e-6)
    with pytest.raises(ValueError, match="chunk_docs must be a positive number"):
        BM25Model(chunk_docs=0)


@pytest.mark.parametrize("variant", ["rand", "4"])
def test_bm25_attacks_a_corpus_above_one_chunk_lazily_with_the_same_texts(variant, monkeypatch):
    monkeypatch.setattr("bench.evaluate.attacks.base.ATTACK_CHUNK", 3)  # several attack chunks, read across their boundaries
    eager = BM25Model(max_len=64).attack_texts(STREAMED_DOCS, variant, seed=7)
    model = BM25Model(max_len=64, chunk_docs=4)
    lazy = model.attack_texts(STREAMED_DOCS, variant, seed=7)
    assert isinstance(eager, list) and not isinstance(lazy, list)
    assert lazy[2:7] == eager[2:7] and list(lazy) == eager and lazy[5] == eager[5]
    if variant == "rand":
        assert len({len(x.split()) // max(1, len(c.split())) for (_, x), (_, c) in zip(eager, STREAMED_DOCS) if c}) > 1
    np.testing.assert_array_equal(model.search(lazy, STREAMED_QUERIES, k=5)[1], model.search(eager, STREAMED_QUERIES, k=5)[1])


def test_bm25_ranks_the_obvious_document_first_clean_and_attacked(tmp_path):
    write_beir(tmp_path / "beir" / "scifact", DOCS, QUERIES, QRELS)
    model = load_model("bm25")
    assert isinstance(model, BM25Model) and not hasattr(model, "encode")
    ((suite, attacked),) = parse_suites("beir:scifact@elong")
    recs = suite.evaluate(model, "scifact", EvalContext(data_dir=str(tmp_path), attacked=attacked, elong=["2", "4", "8", "rand"]))
    assert {r.variant for r in recs} == {"clean", "elong-2", "elong-4", "elong-8", "elong-rand"}
    for r in recs:
        if r.metric in ("mrr_at_10", "ndcg_at_10"):
            # every document is elongated alike, so the one sharing the query's words stays first
            assert r.items.values == [100.0, 100.0, 100.0], (r.variant, r.metric)


def test_bm25_ignores_identical_ids_for_arguana(tmp_path):
    """ArguAna's queries are corpus documents too: the query itself is not a hit (as in mteb)."""
    docs = {"a1": "nuclear power is safe and clean", "a2": "nuclear power plants are dangerous", "a3": "cats purr"}
    write_beir(tmp_path / "beir" / "arguana", docs, {"a1": docs["a1"]}, [("a1", "a2")])
    write_beir(tmp_path / "beir" / "scifact", docs, {"a1": docs["a1"]}, [("a1", "a2")])
    ctx = EvalContext(data_dir=str(tmp_path))
    ((suite, _),) = parse_suites("beir:arguana,scifact")
    mrr = {r.dataset: r.value for r in suite.evaluate(BM25Model(), "arguana", ctx) + suite.evaluate(BM25Model(), "scifact", ctx)
           if r.metric == "mrr_at_10"}  # fmt: skip
    assert mrr == {"arguana": 100.0, "scifact": 50.0}  # scifact keeps the self-match at rank 1


def test_bm25_only_runs_retrieval_suites(tmp_path, capsys):
    db = tmp_path / "r.sqlite"
    data = tmp_path / "data"  # every dataset these suites name, here: the refusal is the model's, not a missing file's
    for name in ("stsb-test", "sts12", "sts13", "sts14", "sts15", "sts16", "sickr"):
        write_sts(data / "sts" / f"{name}.tsv", [("a b", "a c", 1.0), ("d e", "d f", 2.0), ("g", "h", 3.0)])
    (data / "knn").mkdir(parents=True)
    (data / "knn" / "agnews_test.jsonl").write_text("".join(json.dumps({"text": f"t {i}", "label": i % 2}) + "\n" for i in range(8)))
    write_beir(data / "beir" / "scifact", DOCS, QUERIES, QRELS)
    for suite in ("sts:stsb", "knn", "mteb:STSBenchmark", "diag", "sts+beir:scifact"):
        assert main(["eval", "--model", "bm25", "--suite", suite, "--data-dir", str(tmp_path / "data"), "--db", str(db)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("bench: error: model 'bm25' has no embeddings") and err.count("\n") == 1, err
    assert ResultsDB(db).runs().empty  # refused before any run was recorded


def test_bm25_search_edge_cases():
    model = BM25Model()
    scores, idx = model.search(["one doc only"], ["doc", "the"], k=10)
    assert idx.shape == (2, 1) and idx[0, 0] == 0 and idx[1, 0] == -1  # k capped; a stop-word query finds nothing
    with pytest.raises(ValueError, match="corpus is empty"):
        model.search([], ["x"], k=1)
    assert np.all(np.diff(model.search(list(DOCS.values()), ["the guitar plays"], k=6)[0][0]) <= 0)  # best first


def test_bm25_stems_drops_stop_words_and_scores_title_and_text_as_two_fields():
    model = BM25Model()
    # Snowball stemming: 'playing' finds 'plays'; 'the' is a stop word and finds nothing
    scores, idx = model.search(["he plays chess", "a quiet garden"], ["playing", "the"], k=2)
    assert idx[0, 0] == 0 and scores[0, 0] > 0 and idx[1].tolist() == [-1, -1]
    # multifield: a document's score is the sum of its title field's and its text field's BM25 (each its own index)
    docs = [("apple", "banana apple"), ("banana", "cherry"), ("cherry", "date grape")]
    title_only, _ = model.search([t for t, _ in docs], ["apple"], k=3)
    text_only, _ = model.search([x for _, x in docs], ["apple"], k=3)
    both, idx = model.search(docs, ["apple"], k=3)
    assert idx[0, 0] == 0 and both[0, 0] == pytest.approx(title_only[0, 0] + text_only[0, 0], rel=1e-6)
    flat, _ = BM25Model(fields="flat").search(docs, ["apple"], k=3)
    joined, _ = model.search([f"{t} {x}" for t, x in docs], ["apple"], k=3)
    assert flat[0, 0] == pytest.approx(joined[0, 0]) and flat[0, 0] != pytest.approx(both[0, 0])


def test_bm25_settings_are_recorded_in_the_run_row(tmp_path):
    write_beir(tmp_path / "data" / "beir" / "scifact", DOCS, QUERIES, QRELS)
    db = tmp_path / "r.sqlite"
    assert main(["eval", "--model", "bm25", "--suite", "beir:scifact", "--data-dir", str(tmp_path / "data"), "--db", str(db)]) == 0
    config = ResultsDB(db).get_run(1)["config"]
    assert config["bm25"]["k1"] == 1.2 and config["bm25"]["b"] == 0.75 and config["bm25"]["method"] == "lucene"
    assert config["bm25"]["stemmer"] == "PyStemmer english" and config["bm25"]["stopwords"] == "en"
    assert config["bm25"]["fields"] == "multifield" and "k1=1.2" in config["model_fingerprint"]


BEIR_BM25_SCIFACT = 66.5  # BEIR (Thakur et al. 2021), Table: BM25 nDCG@10 on SciFact


@pytest.mark.slow
def test_bm25_matches_beirs_published_scifact_figure(shared_data):
    if not (shared_data / "beir" / "scifact").is_dir():
        pytest.skip(f"{shared_data}/beir/scifact is not present")
    ((suite, _),) = parse_suites("beir:scifact")
    recs = suite.evaluate(BM25Model(), "scifact", EvalContext(data_dir=str(shared_data)))
    ndcg = next(r.value for r in recs if r.metric == "ndcg_at_10")
    assert abs(ndcg - BEIR_BM25_SCIFACT) <= 1.0, ndcg  # measured 66.13 (flat title+text: 67.91; unstemmed: 64.6)
