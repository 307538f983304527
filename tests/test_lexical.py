"""`--model bm25`: Lucene BM25 by bm25s, scored like any retrieval model, attacked too (word-level elongation)."""

import json
import math

import numpy as np
import pytest

from bench.cli import main
from bench.lexical import BM25Model
from bench.models import load_model
from bench.suites import EvalContext, parse_suites
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


def test_bm25_scores_equal_the_lucene_formula():
    docs = ["apple banana apple", "banana cherry", "cherry date grape"]
    k1, b = 1.5, 0.75
    avgdl, n = 8 / 3, 3

    def tfc(tf, dl):
        return tf / (tf + k1 * (1 - b + b * dl / avgdl))

    def idf(df):
        return math.log(1 + (n - df + 0.5) / (df + 0.5))

    scores, idx = BM25Model().search(docs, ["apple", "banana cherry"], k=3)
    assert idx[0].tolist() == [0, -1, -1]  # only d0 contains 'apple'
    assert scores[0, 0] == pytest.approx(idf(1) * tfc(2, 3), rel=1e-5)
    assert idx[1, 0] == 1  # both terms, shortest document
    assert scores[1, 0] == pytest.approx(2 * idf(2) * tfc(1, 2), rel=1e-5)
    assert scores[1, 1] == pytest.approx(idf(2) * tfc(1, 3), rel=1e-5) and scores[1, 1] == pytest.approx(scores[1, 2])


def test_bm25_ranks_the_obvious_document_first_clean_and_attacked(tmp_path):
    write_beir(tmp_path / "beir" / "scifact", DOCS, QUERIES, QRELS)
    model = load_model("bm25")
    assert isinstance(model, BM25Model) and not hasattr(model, "encode")
    ((suite, attacked),) = parse_suites("beir:scifact@elong")
    recs = suite.evaluate(model, "scifact", EvalContext(data_dir=str(tmp_path), attacked=attacked))
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
    write_sts(tmp_path / "data" / "sts" / "stsb-test.tsv", [("a b", "a c", 1.0), ("d e", "d f", 2.0), ("g", "h", 3.0)])
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
