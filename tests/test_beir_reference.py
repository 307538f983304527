"""`beir`, the package researchers know for this data, as a reference: lenbench's streaming reader and its
retrieval metrics give what beir's GenericDataLoader and EvaluateRetrieval give on SciFact, query by query."""

from __future__ import annotations

import re

import pytest

beir_loader = pytest.importorskip("beir.datasets.data_loader", reason="beir is not installed (pip install beir)")
beir_eval = pytest.importorskip("beir.retrieval.evaluation")

from bench.data import read_beir  # noqa: E402
from bench.evaluate.suites.retrieval import retrieval_metrics  # noqa: E402


@pytest.fixture(scope="module")
def scifact(shared_data):
    folder = shared_data / "beir" / "scifact"
    if not (folder / "corpus.jsonl").is_file():
        pytest.skip(f"{folder} has no SciFact copy")
    corpus, queries, qrels = beir_loader.GenericDataLoader(str(folder)).load(split="test")
    return folder, corpus, queries, qrels, read_beir(folder)


def test_read_beir_reads_what_beirs_loader_reads(scifact):
    _, corpus, queries, qrels, ours = scifact
    assert ours.qrels == qrels
    assert {q: ours.queries[q] for q in qrels} == queries  # beir keeps the judged queries only
    assert len(ours.corpus) == len(corpus) == 5183
    for doc_id, doc in corpus.items():
        mine = ours.corpus[doc_id]
        assert (mine.get("title") or "", mine["text"]) == (doc.get("title") or "", doc["text"]), doc_id


def _word_overlap_run(corpus, queries, k=100):
    """A deterministic ranking without a model: shared lowercase words, ties broken by a distinct tiny offset."""
    words = {d: set(re.findall(r"\w+", f"{doc.get('title', '')} {doc['text']}".lower())) for d, doc in corpus.items()}
    ids = sorted(words)
    run = {}
    for q, text in queries.items():
        qw = set(re.findall(r"\w+", text.lower()))
        scored = sorted(((len(qw & words[d]) + i * 1e-7, d) for i, d in enumerate(ids)), reverse=True)[:k]
        run[q] = {d: float(s) for s, d in scored}
    return run


def test_retrieval_metrics_match_beirs_evaluate_retrieval_per_query(scifact):
    _, corpus, queries, qrels, _ = scifact
    run = _word_overlap_run(corpus, queries)
    ours = retrieval_metrics(qrels, run)
    evaluator = beir_eval.EvaluateRetrieval
    for q in qrels:  # one query at a time: beir reports means only, so a one-query mean is that query's value
        ndcg, _map, recall, _p = evaluator.evaluate({q: qrels[q]}, {q: run[q]}, [10, 100], ignore_identical_ids=False)
        mrr = evaluator.evaluate_custom({q: qrels[q]}, {q: run[q]}, [10], metric="mrr")
        # beir rounds to 5 decimals
        assert ours[q]["ndcg_at_10"] == pytest.approx(100 * ndcg["NDCG@10"], abs=1e-3), q
        assert ours[q]["recall_at_100"] == pytest.approx(100 * recall["Recall@100"], abs=1e-3), q
        assert ours[q]["mrr_at_10"] == pytest.approx(100 * mrr["MRR@10"], abs=1e-3), q
    mean_ndcg = sum(v["ndcg_at_10"] for v in ours.values()) / len(ours)
    all_ndcg, _, _, _ = evaluator.evaluate(qrels, run, [10], ignore_identical_ids=False)
    assert mean_ndcg == pytest.approx(100 * all_ndcg["NDCG@10"], abs=1e-3)
    assert 20 < mean_ndcg < 90  # a real ranking, not a degenerate one
