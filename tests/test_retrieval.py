import json
import math

import numpy as np
import pytest

from bench.cli import main
from bench.evaluate.lexical import BM25Model
from bench.evaluate.suites import EvalContext, parse_suites
from bench.evaluate import search
from bench.evaluate.suites import retrieval
from bench.evaluate.suites.retrieval import exact_search, limit_slice, retrieval_metrics, to_run
from bench.data.beir import RetrievalData
from results_db import ResultsDB

DOCS = {
    "d1": ("Guitar", "a man plays the electric guitar on stage"),
    "d2": ("Cooking", "slice the onion and fry it in butter"),
    "d3": ("Markets", "the stock market fell sharply after the report"),
    "d4": ("Pets", "the dog barks at the cat in the garden"),
    "d5": ("Space", "the rocket launched a satellite into orbit"),
}
QUERIES = {"q1": "who plays the guitar", "q2": "why did stock prices fall", "q3": "dog and cat"}
QRELS = [("q1", "d1", 1), ("q2", "d3", 2), ("q2", "d2", 0), ("q3", "d4", 1)]


def write_beir(folder, docs=DOCS, queries=QUERIES, qrels=QRELS):
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": d, "title": t, "text": x}) + "\n" for d, (t, x) in docs.items())
    )
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries.items()))
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{s}\n" for q, d, s in qrels)
    )
    return folder


@pytest.fixture()
def data_dir(tmp_path):
    write_beir(tmp_path / "data" / "beir" / "scifact")
    return tmp_path / "data"


# ------------------------------------------------------------------------ metrics
def test_metrics_match_hand_computed_values():
    qrels = {"q1": {"d1": 1, "d3": 2}, "q2": {"d9": 1}}
    run = {"q1": {"d2": 0.9, "d1": 0.8, "d3": 0.7}, "q2": {"d2": 0.5, "d1": 0.4}}
    per_query = retrieval_metrics(qrels, run)
    # trec_eval nDCG: gain = relevance, discount log2(rank + 1).
    dcg = 0 / math.log2(2) + 1 / math.log2(3) + 2 / math.log2(4)
    idcg = 2 / math.log2(2) + 1 / math.log2(3)
    assert per_query["q1"]["ndcg_at_10"] == pytest.approx(100 * dcg / idcg, abs=1e-6)
    assert per_query["q1"]["mrr_at_10"] == pytest.approx(50.0)  # first relevant document at rank 2
    assert per_query["q1"]["recall_at_100"] == pytest.approx(100.0)
    assert per_query["q2"] == {"ndcg_at_10": 0.0, "recall_at_100": 0.0, "mrr_at_10": 0.0}


def test_mrr_is_cut_at_10_and_missing_queries_score_zero():
    qrels = {"q1": {"rel": 1}, "q2": {"rel": 1}}
    ranked = {f"x{i:02d}": 1.0 - i / 100 for i in range(10)}
    run = {"q1": {**ranked, "rel": 0.5}}  # the relevant document is 11th
    per_query = retrieval_metrics(qrels, run)
    assert per_query["q1"]["mrr_at_10"] == 0.0
    assert per_query["q1"]["recall_at_100"] == 100.0
    assert per_query["q1"]["ndcg_at_10"] == 0.0
    assert per_query["q2"]["ndcg_at_10"] == 0.0  # nothing retrieved for q2


def test_exact_search_in_blocks_equals_a_full_sort(monkeypatch):
    rng = np.random.default_rng(0)
    q, d = rng.normal(size=(7, 16)).astype(np.float32), rng.normal(size=(53, 16)).astype(np.float32)
    monkeypatch.setattr(search, "QUERY_BLOCK", 3)
    monkeypatch.setattr(search, "DOC_BLOCK", 10)
    scores, idx = exact_search(q, d, k=12)
    full = q @ d.T
    expected = np.argsort(-full, axis=1)[:, :12]
    np.testing.assert_array_equal(idx, expected)
    np.testing.assert_allclose(scores, np.take_along_axis(full, expected, 1), rtol=1e-5)
    assert exact_search(q, d, k=100)[1].shape == (7, 53)  # k larger than the corpus


def test_identical_ids_are_dropped_only_when_asked():
    scores = np.array([[0.9, 0.8, 0.7]])
    idx = np.array([[0, 1, 2]])
    assert list(to_run(["a"], ["a", "b", "c"], scores, idx, True, 2)["a"]) == ["b", "c"]
    assert list(to_run(["a"], ["a", "b", "c"], scores, idx, False, 2)["a"]) == ["a", "b"]


def test_limit_slice_keeps_judged_documents_and_is_deterministic():
    corpus = {f"d{i}": {"title": "", "text": f"text {i}"} for i in range(100)}
    qrels = {"q1": {"d90": 1}, "q2": {"d50": 1, "d3": 1}, "q3": {"d7": 1}}
    data = RetrievalData("x", corpus, {q: q for q in qrels}, qrels)
    sliced = limit_slice(data, 2, distractors_per_query=3)
    assert list(sliced.qrels) == ["q1", "q2"]
    # judged d90, d50, d3 + the first 6 other documents in file order, in corpus-file order
    assert list(sliced.corpus) == ["d0", "d1", "d2", "d3", "d4", "d5", "d6", "d50", "d90"]
    assert limit_slice(data, 2, distractors_per_query=3).corpus.keys() == sliced.corpus.keys()


# ------------------------------------------------------------------------- BM25
def test_bm25_ranks_the_obvious_document_first():
    docs = [t + " " + x for t, x in DOCS.values()]
    scores, idx = BM25Model().search(docs, ["electric guitar", "rocket orbit", "zzzz"], k=5)
    assert idx[0, 0] == 0 and idx[1, 0] == 4
    assert scores[0, 0] > scores[0, 1]
    assert (idx[2] == -1).all()  # no shared term: nothing retrieved


def test_bm25_elongation_is_word_level_and_untruncated():
    model = BM25Model(max_len=16)
    text = "one two three four five six seven eight nine ten"
    assert model.attack_texts([text], "8")[0] == " ".join([text] * 8)
    rand = model.attack_texts([text] * 20, "rand", seed=1)
    ms = {len(t.split()) // 10 for t in rand}
    assert ms <= {1} and rand == model.attack_texts([text] * 20, "rand", seed=1)  # (16-2)//10 = 1


def test_bm25_beir_elong_via_cli(data_dir, tmp_path, capsys):
    db = tmp_path / "r.sqlite"
    args = ["eval", "--model", "bm25", "--suite", "beir:scifact@elong", "--elong", "2,4,8,rand", "--data-dir", str(data_dir), "--db", str(db)]
    assert main(args) == 0
    scores = ResultsDB(db).scores()
    assert set(scores["suite"]) == {"beir"}
    assert set(scores["variant"]) == {"clean", "elong-2", "elong-4", "elong-8", "elong-rand"}
    clean = scores[(scores.variant == "clean") & (scores.metric == "ndcg_at_10")]["value"].item()
    assert clean == pytest.approx(100.0)  # each toy query shares its words with its one relevant document
    assert "ndcg_at_10" in capsys.readouterr().out


# --------------------------------------------------------------- dense, end to end
def test_dense_suite_records_per_query_values(tiny_model_dir, data_dir):
    from bench.encode.encoder import Encoder

    enc = Encoder.load(str(tiny_model_dir), max_len=32, use_cache=False, show_progress=False)
    ((suite, attacked),) = parse_suites("beir:scifact@elong")
    assert attacked and suite.name == "beir"
    ctx = EvalContext(data_dir=str(data_dir), attacked=True, elong=["2", "rand"])
    recs = suite.evaluate(enc, "scifact", ctx)
    assert {(r.variant, r.metric) for r in recs} == {
        (v, m) for v in ("clean", "elong-2", "elong-rand") for m in ("ndcg_at_10", "recall_at_100", "mrr_at_10")
    }
    for r in recs:
        # q2's judgements include a 0: still judged; every query has a positive judgement
        assert r.items.aggregate == "mean" and r.items.item_ids == ["q1", "q2", "q3"]
        assert r.value == pytest.approx(np.mean(r.items.values)) and 0.0 <= r.value <= 100.0
        assert r.metric != "recall_at_100" or r.value == 100.0  # 5 documents: all retrieved


def test_a_large_corpus_is_attacked_chunk_by_chunk_with_the_same_scores(tiny_model_dir, data_dir, monkeypatch):
    import bench.evaluate.attacks as attacks
    import bench.evaluate.suites.variants as variants
    from bench.encode.encoder import Encoder

    enc = Encoder.load(str(tiny_model_dir), max_len=32, use_cache=False, show_progress=False)
    ctx = EvalContext(data_dir=str(data_dir), attacked=True, elong=["rand"])
    ((suite, _),) = parse_suites("beir:scifact@elong")
    upfront = [(r.variant, r.metric, r.value, r.info) for r in suite.evaluate(enc, "scifact", ctx)]
    monkeypatch.setattr(variants, "LAZY_ATTACK_DOCS", 2)  # the 5 toy documents count as a large corpus
    monkeypatch.setattr(attacks.base, "ATTACK_CHUNK", 2)
    made = []
    monkeypatch.setattr(variants, "AttackedTexts", lambda *a, **k: made.append(attacks.AttackedTexts(*a, **k)) or made[-1])
    lazy = [(r.variant, r.metric, r.value, r.info) for r in suite.evaluate(enc, "scifact", ctx)]
    assert len(made) == 1 and lazy == upfront


def test_suite_strings():
    ((suite, _),) = parse_suites("beir14")
    assert len(suite.datasets()) == 14 and "cqadupstack" in suite.datasets() and suite.name == "beir"
    ((suite, _),) = parse_suites("beir:scifact,nfcorpus")
    assert suite.datasets() == ["scifact", "nfcorpus"]
    with pytest.raises(ValueError, match="'stsb' is not a retrieval"):
        parse_suites("beir:stsb")


def test_a_name_outside_the_catalog_is_a_local_folder_or_one_clear_error(tmp_path, monkeypatch):
    from bench.evaluate.runner import locate_datasets
    from bench.evaluate.suites import EvalContext

    monkeypatch.chdir(tmp_path)
    suites = parse_suites("beir:mine")  # not in the catalog: the documented layout beir/mine/ decides
    with pytest.raises(ValueError, match=r"unknown dataset 'mine'.*beir/mine/corpus\.jsonl"):
        locate_datasets(suites, EvalContext(data_dir=str(tmp_path)))
    write_beir(tmp_path / "beir" / "mine")
    (located,) = locate_datasets(suites, EvalContext(data_dir=str(tmp_path)))
    assert located.info.local and located.path == tmp_path / "beir" / "mine" and "local dataset" in located.describe()


def test_cqadupstack_is_the_mean_of_its_forums(monkeypatch):
    from bench.data.catalog import CQADUPSTACK_FORUMS
    from results_db import ScoreRecord

    def fake_score(model, data, dataset, ctx, suite):
        value = float(CQADUPSTACK_FORUMS.index(dataset.split("-", 1)[1]))
        return [ScoreRecord(suite, dataset, m, value, n=2) for m in retrieval.METRICS]

    monkeypatch.setattr(retrieval, "load_retrieval", lambda name, ctx, share=False: None)
    monkeypatch.setattr(retrieval, "score_retrieval", fake_score)
    ((suite, _),) = parse_suites("beir14")
    recs = suite.evaluate(None, "cqadupstack", EvalContext())
    mean = [r for r in recs if r.dataset == "cqadupstack"]
    assert len(recs) == 13 * 3 and len(mean) == 3
    assert all(r.value == pytest.approx(np.mean(range(12))) and r.n == 24 for r in mean)


# ------------------------------------------------------------------- error cases
@pytest.mark.parametrize(
    "corrupt, message",
    [
        (lambda f: (f / "corpus.jsonl").write_text(""), "corpus of 'scifact' is empty"),
        (lambda f: (f / "corpus.jsonl").write_text('{"_id": "d1", "text": "x"}\n{"_id": "d2", "text": \n'),
         "corpus.jsonl:2: not valid JSON"),
        (lambda f: (f / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t0\n"),
         "no query has a positive relevance judgement"),
    ],
)  # fmt: skip
def test_bad_data_gives_a_clear_error_and_keeps_earlier_runs(data_dir, tmp_path, capsys, corrupt, message):
    db = tmp_path / "r.sqlite"
    ok = ["eval", "--model", "bm25", "--suite", "beir:scifact", "--data-dir", str(data_dir), "--db", str(db)]
    assert main(ok) == 0
    before = ResultsDB(db).scores()
    corrupt(data_dir / "beir" / "scifact")
    assert main(ok) == 2
    err = capsys.readouterr().err
    assert err.startswith("bench: error: ") and message in err
    runs = ResultsDB(db).runs()
    assert runs["status"].tolist() == ["finished", "failed"]
    after = ResultsDB(db).scores([int(runs["id"].iloc[0])])
    assert after[["dataset", "metric", "value"]].equals(before[["dataset", "metric", "value"]])
