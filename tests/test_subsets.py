"""--limit N: a seeded random sample (the same for every model under one seed), stratified by class for kNN, by
query for retrieval; --limit-mode first keeps the first N; every view labels such a score 'sample of N of M'."""

import json
import zlib
from collections import Counter

import numpy as np
import pytest
from scipy.stats import spearmanr

from bench.data.beir import RetrievalData
from bench.evaluate.subsets import class_quotas, draw, subset_label
from bench.evaluate.suites import EvalContext
from bench.evaluate.suites.knn import load_labelled
from bench.evaluate.suites.retrieval import limit_slice
from bench.evaluate.suites.sts import STSSuite
from tests.conftest import write_sts

M, N = 60, 15


class Vectors:
    """A model whose embedding of a text is a fixed random vector drawn from the text and the model's own seed."""

    max_len = 64
    tokenizer = None

    def __init__(self, seed: int):
        self.seed = seed

    def vector(self, text: str) -> np.ndarray:
        v = np.random.default_rng([self.seed, zlib.crc32(text.encode())]).normal(size=8)
        return v / np.linalg.norm(v)

    def encode(self, texts, desc="", normalize=True):
        return np.stack([self.vector(t) for t in texts]).astype(np.float32)


@pytest.fixture()
def sts_pairs(tmp_path):
    rng = np.random.default_rng(7)
    rows = [(f"first sentence {i}", f"second sentence {i}", round(float(rng.uniform(0, 5)), 2)) for i in range(M)]
    write_sts(tmp_path / "data" / "sts" / "stsb-test.tsv", rows)
    return tmp_path / "data", rows


def clean_record(model, data_dir, **limit):
    ctx = EvalContext(data_dir=str(data_dir), **limit)
    (record,) = [r for r in STSSuite(names=("stsb",)).evaluate(model, "stsb", ctx) if r.variant == "clean"]
    return record, ctx


def expected_spearman(model, rows) -> float:
    """Spearman x100 of the model's pair cosines against the gold scores, computed here on the given pairs."""
    cos = [float(model.vector(a) @ model.vector(b)) for a, b, _ in rows]
    return float(spearmanr(cos, [g for _, _, g in rows]).statistic) * 100


def test_limit_scores_a_seeded_sample_drawn_as_documented(sts_pairs):
    """The documented recipe: numpy default_rng([--limit-seed, crc32(dataset)]).permutation(M)[:N], in file order."""
    data_dir, rows = sts_pairs
    model = Vectors(1)
    record, ctx = clean_record(model, data_dir, limit=N, limit_seed=3)
    drawn = sorted(np.random.default_rng([3, zlib.crc32(b"stsb")]).permutation(M)[:N].tolist())
    assert drawn != list(range(N))
    assert record.n == N
    assert record.value == pytest.approx(expected_spearman(model, [rows[i] for i in drawn]), abs=1e-4)
    assert record.value != pytest.approx(expected_spearman(model, rows[:N]), abs=1e-3)  # not the first N
    assert ctx.subset_info() == {"limit": N, "limit_of": M, "limit_mode": "sample", "limit_seed": 3}


def test_every_model_scores_the_same_sample_and_another_seed_draws_another(sts_pairs):
    data_dir, rows = sts_pairs
    gold = {}
    for model_seed in (1, 2):
        record, _ = clean_record(Vectors(model_seed), data_dir, limit=N, limit_seed=0)
        gold[model_seed] = list(record.items.gold)
    assert gold[1] == gold[2]  # the same pairs, in the same order: the two models' items pair up
    other, _ = clean_record(Vectors(1), data_dir, limit=N, limit_seed=5)
    assert list(other.items.gold) != gold[1]
    drawn = sorted(np.random.default_rng([0, zlib.crc32(b"stsb")]).permutation(M)[:N].tolist())
    assert gold[1] == [rows[i][2] for i in drawn]


def test_limit_mode_first_keeps_the_first_n(sts_pairs):
    data_dir, rows = sts_pairs
    model = Vectors(1)
    record, ctx = clean_record(model, data_dir, limit=N, limit_mode="first")
    assert list(record.items.gold) == [g for _, _, g in rows[:N]]
    assert record.value == pytest.approx(expected_spearman(model, rows[:N]), abs=1e-4)
    assert ctx.subset_info() == {"limit": N, "limit_of": M, "limit_mode": "first"}
    assert subset_label(ctx.subset_info()) == f"first {N} of {M}"


def test_knn_sample_is_stratified_by_class(tmp_path):
    """60/30/10 texts of three classes, --limit 20: two of each class first, the other 14 by share (8.64, 4.17,
    1.19: 8, 4, 1, and the largest remainder, a, takes the last), drawn within each class."""
    labels = ["a"] * 60 + ["b"] * 30 + ["c"] * 10
    order = np.random.default_rng(0).permutation(len(labels))  # classes interleaved in the file
    rows = [{"text": f"text {i}", "label": labels[i]} for i in order]
    path = tmp_path / "data" / "knn" / "agnews_test.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert class_quotas({"a": 60, "b": 30, "c": 10}, 20) == {"a": 11, "b": 6, "c": 3}
    data = load_labelled("agnews", EvalContext(data_dir=str(tmp_path / "data"), limit=20, limit_seed=1))
    assert Counter(data.labels) == {"a": 11, "b": 6, "c": 3}
    again = load_labelled("agnews", EvalContext(data_dir=str(tmp_path / "data"), limit=20, limit_seed=1))
    assert again.texts == data.texts  # seeded: the same texts every time
    positions = [int(t.split()[1]) for t in data.texts]
    file_order = [int(r["text"].split()[1]) for r in rows]
    assert sorted(positions, key=file_order.index) == positions  # kept in file order
    first = load_labelled("agnews", EvalContext(data_dir=str(tmp_path / "data"), limit=20, limit_mode="first"))
    assert first.texts == [r["text"] for r in rows[:20]]


def test_retrieval_sample_draws_queries_with_their_judgements_against_the_whole_corpus():
    corpus = {f"d{i}": {"title": "", "text": f"document {i}"} for i in range(100)}
    qrels = {f"q{i}": {f"d{i}": 1} for i in range(20)}
    data = RetrievalData("toy", corpus, {q: f"query {q}" for q in qrels}, qrels)
    subset = draw(len(qrels), 4, seed=2, dataset="toy")
    drawn = sorted(np.random.default_rng([2, zlib.crc32(b"toy")]).permutation(20)[:4].tolist())
    assert list(subset.indices) == drawn != [0, 1, 2, 3]
    sliced = limit_slice(data, subset)
    kept = [f"q{i}" for i in drawn]
    assert list(sliced.qrels) == kept and list(sliced.queries) == kept
    assert sliced.qrels == {q: qrels[q] for q in kept}
    assert list(sliced.corpus) == list(corpus)  # the whole corpus: the search the full set's queries face
    first = limit_slice(data, draw(len(qrels), 4, seed=2, dataset="toy", mode="first"))
    assert list(first.qrels) == ["q0", "q1", "q2", "q3"] and len(first.corpus) == 4 + 40  # the earlier slice


@pytest.mark.parametrize("info, label", [
    ({"limit": 300, "limit_of": 1379, "limit_mode": "sample", "limit_seed": 0}, "sample of 300 of 1,379"),
    ({"limit": 300, "limit_of": 1379, "limit_mode": "sample", "limit_seed": 4}, "sample of 300 of 1,379, seed 4"),
    ({"limit": 300, "limit_of": 1379, "limit_mode": "first"}, "first 300 of 1,379"),
    ({"limit": 300}, "first 300"),  # a row older than the sample: those were the first N
    ({"limit_above_size": 5000}, ""), (None, ""), ('{"limit": 40}', "first 40"),
])  # fmt: skip
def test_subset_label(info, label):
    assert subset_label(info) == label


def test_bench_results_results_json_and_the_api_frame_name_the_sample(tmp_path, tiny_model_dir, capsys, one_thread):
    """A `bench eval --limit 15` of a 60-pair set: `bench results` (text and csv), results.json and to_pandas() all
    say 'sample of 15 of 60' beside the score; a `--limit-mode first` row is 'first 15 of 60', in a row of its own."""
    import io
    from pathlib import Path

    import pandas as pd

    import lenbench
    from bench.cli import main
    from results_db import ResultsDB

    rng = np.random.default_rng(7)
    rows = [(f"a cat sentence {i}", f"sentence {i} of a cat", round(float(rng.uniform(0, 5)), 2)) for i in range(M)]
    write_sts(tmp_path / "data" / "sts" / "stsb-test.tsv", rows)
    db = tmp_path / "r.sqlite"
    base = ["eval", "--model", str(tiny_model_dir), "--suite", "sts:stsb", "--data-dir", str(tmp_path / "data"),
            "--db", str(db), "--max-len", "32", "--limit", str(N), "--no-progress"]  # fmt: skip
    assert main(base) == 0 and main([*base, "--limit-mode", "first"]) == 0
    capsys.readouterr()
    assert main(["results", "--db", str(db)]) == 0
    text = capsys.readouterr().out
    assert f"stsb (sample of {N} of {M})" in text and f"stsb (first {N} of {M})" in text
    assert main(["results", "--db", str(db), "--format", "csv"]) == 0
    frame = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert {f"sample of {N} of {M}", f"first {N} of {M}"} <= set(frame["subset_label"].dropna())
    document = json.loads((Path(ResultsDB(db).get_run(1)["output_dir"]) / "results.json").read_text())
    assert {s["subset"]["label"] for s in document["scores"]} == {f"sample of {N} of {M}"}
    assert document["scores"][0]["subset"] == {"limit": N, "of": M, "mode": "sample", "seed": 0,
                                               "label": f"sample of {N} of {M}"}  # fmt: skip
    api = lenbench.load(str(db)).scores()  # the frame Results.to_pandas() gives
    assert set(api["subset_label"]) == {f"sample of {N} of {M}", f"first {N} of {M}"}
