"""kNN suite: k=10, Euclidean (raw pooled vectors) and cosine, stratified 9:1 split with a fixed seed."""

import json
from collections import Counter

import numpy as np
import pytest
from sklearn.model_selection import train_test_split

from bench.cli import main
from bench.encode.encoder import Encoder
from bench.evaluate.suites import EvalContext, parse_suites
from bench.evaluate.suites.knn import K, KNNSuite, knn_correct, raw_pooled, split_indices
from results_db import ResultsDB

TOPICS = {
    "sport": ["football match goal", "tennis player serve", "the team won the league", "a striker scored twice"],
    "food": ["bake bread with flour", "fry onions in butter", "a recipe for soup", "slice the tomato and cheese"],
    "space": ["rocket launch to orbit", "the moon and the stars", "a satellite circles earth", "astronauts on a mission"],
}


def write_labelled(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"text": t, "label": lab}) + "\n" for t, lab in rows))
    return path


def toy_rows(per_label=10):
    rows = []
    for i in range(per_label):
        for label, texts in TOPICS.items():
            rows.append((f"{texts[i % len(texts)]} number {i}", label))
    return rows


@pytest.fixture()
def data_dir(tmp_path):
    write_labelled(tmp_path / "data" / "knn" / "agnews_test.jsonl", toy_rows())
    return tmp_path / "data"


class Table:
    """A model whose embedding of each text is given: `raw` unnormalised vectors, encode() their unit vectors."""

    def __init__(self, raw: dict[str, np.ndarray]):
        self.raw = raw
        self.max_len = 64
        self.tokenizer = None

    def encode(self, texts, desc="", normalize=True):
        x = np.stack([self.raw[t] for t in texts]).astype(np.float32)
        return x / np.linalg.norm(x, axis=1, keepdims=True) if normalize else x


# -------------------------------------------------------------------------- split
def test_split_is_stratified_9_to_1_and_seeded():
    labels = ["a"] * 50 + ["b"] * 30 + ["c"] * 20
    train, test = split_indices(labels, seed=0, dataset="x")
    assert len(test) == 10 and len(train) == 90 and not set(train) & set(test)
    assert Counter(labels[i] for i in test) == {"a": 5, "b": 3, "c": 2}  # the label mix of the whole set
    again = split_indices(labels, seed=0, dataset="x")
    assert (again[0] == train).all() and (again[1] == test).all()
    assert not (split_indices(labels, seed=1, dataset="x")[1] == test).all()
    # the split sklearn itself makes for this seed
    _, sk_test = train_test_split(np.arange(100), test_size=10, stratify=labels, random_state=0)
    assert sorted(sk_test) == list(test)


@pytest.mark.parametrize(
    "labels, message",
    [(["a"] * 10, "single label 'a'"), (["a"] * 10 + ["b"], r"label\(s\) \['b'\] occur once")],
)
def test_split_errors_name_the_problem(labels, message):
    with pytest.raises(ValueError, match=message):
        split_indices(labels, seed=0, dataset="toy")


def test_smallest_split_has_a_test_example_per_label():
    train, test = split_indices(["a", "a", "b", "b"], seed=0, dataset="toy")
    assert len(test) == 2 and len(train) == 2  # 10% would be 0.4 texts: one per label instead


# ------------------------------------------------------------- accuracy by hand
def test_knn_accuracy_hand_computed(tmp_path):
    """Hand-built 1-D data: known neighbours, known votes."""
    # Train: label 'lo' at 0..9, label 'hi' at 100..109.  Test points: 3 (lo, right), 104 (hi, right),
    # 60 (labelled lo; its 10 nearest train points are all 'hi' -> wrong).
    train_x = np.array([[float(v)] for v in list(range(10)) + list(range(100, 110))])
    train_y = np.array(["lo"] * 10 + ["hi"] * 10)
    test_x, test_y = np.array([[3.0], [104.0], [60.0]]), np.array(["lo", "hi", "lo"])
    assert knn_correct(train_x, train_y, test_x, test_y, "euclidean").tolist() == [True, True, False]
    assert K == 10


def test_suite_equals_an_independent_knn(tmp_path):
    """Split with sklearn's stratified split, vote among the 10 nearest by hand; raw vectors for Euclidean."""
    rng = np.random.default_rng(0)
    rows = [(f"t{i}", ["x", "y", "z"][i % 3]) for i in range(60)]
    centres = {"x": np.array([1.0, 0, 0, 0]), "y": np.array([0, 1.0, 0, 0]), "z": np.array([0, 0, 1.0, 0])}
    # overlapping clusters and very different norms: Euclidean on raw vectors != cosine
    raw = {t: (centres[lab] + rng.normal(scale=0.9, size=4)) * rng.uniform(0.2, 5.0) for t, lab in rows}
    write_labelled(tmp_path / "knn" / "agnews_test.jsonl", rows)
    recs = KNNSuite().evaluate(Table(raw), "agnews", EvalContext(data_dir=str(tmp_path), seed=7))
    got = {r.metric: r.value for r in recs}

    labels = np.array([lab for _, lab in rows])
    train, test = train_test_split(np.arange(60), test_size=6, stratify=labels, random_state=7)
    x = np.stack([raw[t] for t, _ in rows])
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)

    def vote(dist_row):
        near = np.argsort(dist_row, kind="stable")[:10]
        counts = Counter(labels[train][near])
        best = max(counts.values())
        return min(lab for lab, c in counts.items() if c == best)  # sklearn breaks ties by the smallest class

    euclid = [vote(np.linalg.norm(x[train] - x[i], axis=1)) == labels[i] for i in test]
    cosine = [vote(1 - unit[train] @ unit[i]) == labels[i] for i in test]
    assert got["knn_acc_euclidean"] == pytest.approx(100 * np.mean(euclid))
    assert got["knn_acc_cosine"] == pytest.approx(100 * np.mean(cosine))
    assert all(r.n == 6 and r.items.item_ids == [str(i) for i in sorted(test)] for r in recs)


def test_euclidean_uses_unnormalised_vectors(tmp_path):
    """Two labels on the same direction, told apart only by norm: Euclidean 100, cosine cannot separate them."""
    rows = [(f"s{i}", "small") for i in range(20)] + [(f"b{i}", "big") for i in range(20)]
    rng = np.random.default_rng(1)
    raw = {t: (1.0 if t[0] == "s" else 10.0) * (np.array([1.0, 1.0]) + rng.normal(scale=0.3, size=2)) for t, _ in rows}
    write_labelled(tmp_path / "knn" / "agnews_test.jsonl", rows)
    got = {r.metric: r.value for r in KNNSuite().evaluate(Table(raw), "agnews", EvalContext(data_dir=str(tmp_path)))}
    assert got["knn_acc_euclidean"] == 100.0
    assert got["knn_acc_cosine"] < 100.0


# ---------------------------------------------------------------- a real encoder
def test_raw_embeddings_match_pooled_token_embeddings(tiny_model_dir):
    enc = Encoder.load(str(tiny_model_dir), max_len=32, use_cache=False, show_progress=False)
    texts = ["a man plays the guitar", "dogs bark", "the rocket launched a satellite into orbit"]
    raw = enc.encode(texts, normalize=False)
    np.testing.assert_allclose(raw, raw_pooled(enc, texts), atol=1e-5)
    np.testing.assert_allclose(raw / np.linalg.norm(raw, axis=1, keepdims=True), enc.encode(texts), atol=1e-6)
    assert not np.allclose(np.linalg.norm(raw, axis=1), 1.0)


def test_knn_cli_elong_and_cache(tiny_model_dir, data_dir, tmp_path, capsys, monkeypatch):
    db = tmp_path / "r.sqlite"
    args = ["eval", "--model", str(tiny_model_dir), "--suite", "knn@elong", "--elong", "2,rand", "--max-len", "24",
            "--data-dir", str(data_dir), "--db", str(db)]  # fmt: skip
    calls = []
    original = Encoder._forward

    def counting(self, batch):
        calls.append(batch["input_ids"].shape)
        return original(self, batch)

    monkeypatch.setattr(Encoder, "_forward", counting)
    assert main(args) == 0
    assert "knn_acc_euclidean" in capsys.readouterr().out
    assert calls and all(shape[1] <= 24 for shape in calls)  # attacked texts never exceed max_len
    scores = ResultsDB(db).scores()
    assert set(scores["variant"]) == {"clean", "elong-2", "elong-rand"}
    assert set(scores["metric"]) == {"knn_acc_euclidean", "knn_acc_cosine"}
    assert set(scores["n"]) == {3}  # 30 texts, 3 labels: a 27/3 split
    assert scores["value"].between(0, 100).all()
    first = len(calls)
    # the same evaluation again, scored anew (--rerun: a plain repeat now reuses the finished row): raw vectors
    # come from the embedding cache
    assert main([*args, "--rerun"]) == 0
    assert len(calls) == first
    again = ResultsDB(db).scores()
    runs = sorted(again["run_id"].unique())
    a = again[again.run_id == runs[0]].sort_values(["variant", "metric"])["value"].tolist()
    b = again[again.run_id == runs[1]].sort_values(["variant", "metric"])["value"].tolist()
    assert a == b


def test_knn_suite_strings():
    ((suite, attacked),) = parse_suites("knn")
    assert suite.datasets() == ["agnews"] and not attacked
    ((suite, attacked),) = parse_suites("knn:agnews@elong")
    assert suite.datasets() == ["agnews"] and attacked
    with pytest.raises(ValueError, match="not a labelled-text dataset"):
        parse_suites("knn:stsb")
    ((suite, _),) = parse_suites("knn:nosuch")  # not in the catalog: a local knn/nosuch_test.jsonl, if any
    assert suite.datasets() == ["nosuch"]
