"""`mteb:<Task>`: the mteb package's own evaluator, our encoder behind its model protocol, local data, offline.

The agreement test scores the same data twice in one process, once by our `sts` / `beir` suites and once by
`mteb.evaluate` over custom AbsTaskSTS / AbsTaskRetrieval tasks, and requires the figures to agree to 1e-3.
It uses a slice of STS-B test and of SciFact from ../shared/data with the reference model, or toy data when
that folder is absent. The embedding cache is shared, so the mteb run must not call the model at all: that
proves mteb was handed exactly the texts our suites encoded (title + " " + text for documents, same truncation).
"""

import json
import os
from pathlib import Path

import numpy as np
import pytest

from bench.encode.encoder import Encoder
from bench.evaluate.subsets import FIRST
from bench.evaluate.suites import EvalContext, parse_suites
from bench.evaluate.suites.mteb_suite import MTEBSuite, local_dataset, local_retrieval_task, mteb_encoder
from tests.conftest import SHARED_DATA, TOY_PAIRS as TOY_PAIRS_ALL, write_sts

STS_SLICE = 120  # STS-B test pairs
SCIFACT_QUERIES = 12  # SciFact queries (corpus: their judged documents + 10 distractors per query)
# The first N queries (--limit-mode first) with that slice of the corpus: the seeded sample scores its queries
# against all 5,183 documents, about 3 minutes of encoding on 2 cores for an agreement check that needs neither.
SCIFACT_LIMIT_MODE = FIRST

TOY_PAIRS = TOY_PAIRS_ALL[:7]
TOY_DOCS = {
    "d1": ("Guitar", "a man plays the electric guitar on stage"),
    "d2": ("Cooking", "slice the onion and fry it in butter"),
    "d3": ("Markets", "the stock market fell sharply after the report"),
    "d4": ("Pets", "the dog barks at the cat in the garden"),
    "d5": ("Space", "the rocket launched a satellite into orbit"),
    "d6": ("Music", "an orchestra plays a symphony"),
}
TOY_QUERIES = {"q1": "who plays music on stage", "q2": "why did prices fall", "q3": "animals in the garden", "q4": "space"}
TOY_QRELS = [("q1", "d1", 1), ("q1", "d6", 1), ("q2", "d3", 2), ("q3", "d4", 1), ("q4", "d5", 1)]


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")


@pytest.fixture(scope="module")
def agreement_data(tmp_path_factory):
    """(data dir, limit): the shared real data with slices, or toy files when it is absent."""
    if (SHARED_DATA / "sts" / "stsb-test.tsv").exists() and (SHARED_DATA / "beir" / "scifact").is_dir():
        return str(SHARED_DATA), "shared"
    root = tmp_path_factory.mktemp("toy-data")
    write_sts(root / "sts" / "stsb-test.tsv", TOY_PAIRS)
    beir = root / "beir" / "scifact"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "title": t, "text": x}) + "\n" for d, (t, x) in TOY_DOCS.items()))
    (beir / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in TOY_QUERIES.items()))
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{s}\n" for q, d, s in TOY_QRELS))
    return str(root), "toy"


def _ctx(data_dir, kind, dataset, **kw):
    limit = {"shared": {"stsb": STS_SLICE, "scifact": SCIFACT_QUERIES}, "toy": {}}[kind].get(dataset)
    if dataset == "scifact":
        kw["limit_mode"] = SCIFACT_LIMIT_MODE
    return EvalContext(data_dir=data_dir, limit=limit, **kw)


def test_mteb_evaluator_agrees_with_our_suites(reference_dir, agreement_data):
    import mteb

    data_dir, kind = agreement_data
    enc = Encoder.load("minilm", show_progress=False)

    # STS-B: our suite, then mteb's STS evaluator (clean and elongated by 2, a deterministic attack)
    ((sts_suite, _),) = parse_suites("sts:stsb@elong")
    ours_sts = {r.variant: r.value for r in sts_suite.evaluate(enc, "stsb", _ctx(data_dir, kind, "stsb", attacked=True, elong=["2"]))}
    calls = enc.forward_calls
    mteb_sts = MTEBSuite(("STSBenchmark",)).evaluate(enc, "STSBenchmark", _ctx(data_dir, kind, "stsb", attacked=True, elong=["2"]))
    assert enc.forward_calls == calls, "mteb encoded texts our sts suite did not"
    assert {r.variant for r in mteb_sts} == {"clean", "elong-2"}
    for r in mteb_sts:
        assert r.suite == "mteb" and r.metric == "cosine_spearman"
        assert r.value == pytest.approx(ours_sts[r.variant], abs=1e-3), r.variant
    if kind == "shared":
        assert r.n == STS_SLICE and 70 < ours_sts["clean"] < 95

    # SciFact slice: our retrieval suite, then mteb's retrieval evaluator (all three metrics)
    ((beir_suite, _),) = parse_suites("beir:scifact")
    ours = {r.metric: r.value for r in beir_suite.evaluate(enc, "scifact", _ctx(data_dir, kind, "scifact"))}
    calls = enc.forward_calls
    task = local_retrieval_task("scifact", _ctx(data_dir, kind, "scifact"))
    result = mteb.evaluate(mteb_encoder(enc), task, cache=None, co2_tracker=False, show_progress_bar=False,
                           encode_kwargs={"batch_size": 64})  # fmt: skip
    assert enc.forward_calls == calls, "mteb encoded texts our beir suite did not"
    (scores,) = result.task_results[0].scores["test"]
    for metric in ("ndcg_at_10", "recall_at_100", "mrr_at_10"):
        assert 100 * scores[metric] == pytest.approx(ours[metric], abs=1e-3), metric
    # the same through the suite string `mteb:SciFact`
    (rec,) = MTEBSuite(("SciFact",)).evaluate(enc, "SciFact", _ctx(data_dir, kind, "scifact"))
    assert rec.metric == "ndcg_at_10" and rec.value == pytest.approx(ours["ndcg_at_10"], abs=1e-3)
    assert 0 < ours["ndcg_at_10"] < 100 or kind == "toy"


def test_our_wrapper_meets_mteb_model_protocol_and_a_bare_encode_is_rejected(tiny_model_dir, tmp_path):
    import mteb
    from mteb.models import EncoderProtocol

    enc = Encoder.load(str(tiny_model_dir), max_len=32, use_cache=False, show_progress=False)
    wrapped = mteb_encoder(enc)
    assert isinstance(wrapped, EncoderProtocol)
    for member in ("encode", "similarity", "similarity_pairwise"):
        assert callable(getattr(wrapped, member))
    meta = wrapped.mteb_model_meta
    assert meta.embed_dim == enc.dim and meta.max_tokens == 32 and "/" in meta.name
    a, b = enc.encode(["a cat", "a dog", "a car"]), enc.encode(["a cat", "a bus", "a van"])
    np.testing.assert_allclose(np.asarray(wrapped.similarity(a, b)), a @ b.T, atol=1e-5)
    np.testing.assert_allclose(np.asarray(wrapped.similarity_pairwise(a, b)), np.einsum("ij,ij->i", a, b), atol=1e-5)

    class OnlyEncode:
        def encode(self, inputs, *, task_metadata, hf_split, hf_subset, prompt_type=None, **kwargs):
            return np.ones((sum(len(batch["text"]) for batch in inputs), 4))

    assert not isinstance(OnlyEncode(), EncoderProtocol)
    write_sts(tmp_path / "sts" / "stsb-test.tsv", TOY_PAIRS)
    from bench.evaluate.suites.mteb_suite import local_sts_task

    with pytest.raises(NotImplementedError):
        mteb.evaluate(OnlyEncode(), local_sts_task("stsb", EvalContext(data_dir=str(tmp_path))), cache=None,
                      co2_tracker=False, show_progress_bar=False)  # fmt: skip


def test_retrieval_queries_stay_clean_under_attack(tiny_model_dir, tmp_path):
    """@elong through mteb elongates documents only, as the beir suite does."""
    beir = tmp_path / "beir" / "scifact"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "title": t, "text": x}) + "\n" for d, (t, x) in TOY_DOCS.items()))
    (beir / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in TOY_QUERIES.items()))
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{s}\n" for q, d, s in TOY_QRELS))
    enc = Encoder.load(str(tiny_model_dir), max_len=64, use_cache=False, show_progress=False)
    seen = []
    original = enc.encode
    enc.encode = lambda texts, **kw: (seen.extend(texts), original(texts, **kw))[1]
    recs = MTEBSuite(("scifact",)).evaluate(enc, "scifact", EvalContext(data_dir=str(tmp_path), attacked=True, elong=["2"]))
    assert [r.variant for r in recs] == ["clean", "elong-2"]
    assert set(TOY_QUERIES.values()) <= set(seen)  # queries as they are
    doubled = {f"{t} {x} {t} {x}" for t, x in TOY_DOCS.values()}
    assert doubled <= set(seen) and not any(q + " " + q in seen for q in TOY_QUERIES.values())


def test_task_names_and_offline_errors():
    assert local_dataset("STSBenchmark").name == "stsb" and local_dataset("SciFact").name == "scifact"
    assert local_dataset("ArguAna").name == "arguana" and local_dataset("TRECCOVID").name == "trec-covid"
    assert local_dataset("CQADupstackGisRetrieval").name == "cqadupstack-gis" and local_dataset("SICK-R").name == "sickr"
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    from bench.data import DataError
    from bench.evaluate.suites.mteb_suite import build_task

    with pytest.raises(DataError, match="'Banking77Classification' has no local copy .* offline"):
        build_task("Banking77Classification", EvalContext())
    with pytest.raises(ValueError, match="unknown task 'NoSuchTask'"):
        build_task("NoSuchTask", EvalContext())


def test_the_offline_error_offers_only_tasks_whose_data_is_here(tmp_path, monkeypatch):
    """The tasks it suggests instead run now: STS-B (a package ships it), SciFact only once its files are in the
    data folder, ArguAna (absent) never."""
    from bench.data import DataError
    from bench.evaluate.suites.mteb_suite import build_task
    from tests.test_eval_cli import write_beir

    monkeypatch.chdir(tmp_path)  # no ./data, no ../shared/data
    with pytest.raises(DataError) as empty:
        build_task("Banking77Classification", EvalContext())
    offered = str(empty.value).split("data folder now (")[1]
    assert "STSBenchmark" in offered and "SciFact" not in offered and "ArguAna" not in offered
    write_beir(tmp_path / "data" / "beir" / "scifact")
    with pytest.raises(DataError) as with_scifact:
        build_task("Banking77Classification", EvalContext(data_dir=str(tmp_path / "data")))
    offered = str(with_scifact.value).split("data folder now (")[1]
    assert "SciFact" in offered and "ArguAna" not in offered


def test_an_unreachable_hub_is_one_line_at_once(monkeypatch):
    """Without HF_HUB_OFFLINE but with no network: one quick connection check, not mteb's retries."""
    from bench.data import DataError
    from bench.evaluate.suites import mteb_suite

    def unreachable(address, timeout=None):
        assert timeout is not None and timeout <= 2  # never a long wait
        raise OSError("Network is unreachable")

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.setattr("socket.create_connection", unreachable)
    with pytest.raises(DataError, match=r"'Banking77Classification' has no local copy .* offline \(cannot reach huggingface\.co"):
        mteb_suite.build_task("Banking77Classification", EvalContext())
    with pytest.raises(ValueError, match="name the tasks"):
        parse_suites("mteb")
