"""kNN suite `knn[:NAME,...]`: k=10 nearest-neighbour classification accuracy (x100) of the embeddings.

Protocol of the crop-SSL paper (papers/003, §3): 9:1 train/test split, stratified by label, fixed seed
(`train_test_split(..., stratify=labels, random_state=ctx.seed)`), scikit-learn `KNeighborsClassifier(k=10)`
fitted on the train part, accuracy on the test part. Two metrics:
    knn_acc_euclidean  Euclidean distance between the *unnormalised* pooled embeddings, as in the paper (on
                       L2-normalised vectors Euclidean ranks neighbours exactly like cosine, so the paper's
                       Euclidean figure needs the raw pooled vectors: `Encoder.encode(normalize=False)`,
                       cached like the normalised ones);
    knn_acc_cosine     cosine distance (the same vectors L2-normalised: one forward pass per text).
A model without `token_embeddings` gets Euclidean on its normalised embeddings (then both metrics coincide).
Per-item values: 100 if a test example is classified correctly, else 0 (mean = accuracy x100).

An attacked suite (`@elong`, `@pad`, `@shuffle`) attacks every text, train and test alike (token-aware within
max_len): the whole collection is seen at another length, as the STS suite attacks both sentences; `@pad` pads a
text with sentences of other texts of the file.
`--limit N` keeps the first N texts of the file (before the split); every label needs at least 2 of them.
"""

from __future__ import annotations

import inspect
import logging
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.model_selection import train_test_split
from sklearn.neighbors import KNeighborsClassifier

from bench.data import get_info, read_labelled
from bench.data.errors import DataError
from bench.data.labelled import LabelledData
from bench.evaluate.attacks import Distractors
from bench.evaluate.suites.base import EvalContext, NamedDatasets, SuiteError, load_dataset
from bench.evaluate.suites.variants import variant_loop
from results_db.records import ItemValues, ScoreRecord

log = logging.getLogger(__name__)
K = 10
TEST_SIZE = 0.1
DEFAULT_DATASETS = ("agnews",)
RAW_POOL_CHUNK = 512  # texts whose token embeddings are held in memory at once


def load_labelled(dataset: str, ctx: EvalContext) -> LabelledData:
    data = load_dataset(dataset, ctx, "labelled", "a labelled-text dataset (knn needs {'text','label'} jsonl)",
                        lambda located: read_labelled(located.path, name=dataset))  # fmt: skip
    subset = ctx.subset(dataset, len(data.texts), "texts", strata=data.labels)  # each class keeps its share
    if subset:
        data = LabelledData(data.name, subset.take(data.texts), subset.take(data.labels), data.files)
    return data


def split_indices(labels: list[str], seed: int, dataset: str) -> tuple[np.ndarray, np.ndarray]:
    """Stratified 9:1 split of example indices; a clear error when a label is too rare to stratify."""
    counts = Counter(labels)
    rare = {lab: c for lab, c in counts.items() if c < 2}
    if len(counts) < 2:
        raise DataError(f"kNN dataset {dataset!r} has a single label {next(iter(counts))!r}; accuracy needs 2 or more")
    if rare:
        raise DataError(f"kNN dataset {dataset!r}: label(s) {sorted(rare)} occur once; a stratified split needs 2 each")
    n = len(labels)
    n_test = max(len(counts), int(np.ceil(TEST_SIZE * n)))  # stratification needs a test example per class
    if n - n_test < len(counts):
        raise DataError(f"kNN dataset {dataset!r} has {n} texts for {len(counts)} labels: too few to split 9:1")
    idx = np.arange(n)
    train, test = train_test_split(idx, test_size=n_test, stratify=labels, random_state=seed)
    return np.sort(train), np.sort(test)


def check_split_size(dataset: str, n_train: int, n_test: int) -> None:
    """Fewer training texts than k: every vote would take all of them (k silently lowered), which is not the k=10
    protocol: refused. Fewer test texts than k: the accuracy moves in steps of 100 / n_test: a warning says so."""
    if n_train < K:
        raise DataError(f"kNN dataset {dataset!r} has {n_train + n_test} texts: its 9:1 split leaves {n_train} to train "
                        f"on, fewer than the k={K} neighbours each vote takes; give a file (or a --limit) with at least "
                        f"{K + n_test} texts")  # fmt: skip
    if n_test < K:
        log.warning("%s: kNN accuracy rests on %d test texts (10%% of %d), fewer than k=%d: each is %.0f points of "
                    "the score; read it as a smoke test, not a measurement", dataset, n_test, n_train + n_test, K,
                    100.0 / n_test)  # fmt: skip


def raw_pooled(model: Any, texts: list[str]) -> np.ndarray:
    """Unnormalised pooled embeddings (mean of the token vectors, or the first token for cls pooling).

    Recomputed from `token_embeddings`; `embeddings` below prefers the encoder's cached `encode(normalize=False)`.
    """
    out = []
    for start in range(0, len(texts), RAW_POOL_CHUNK):
        tokens = model.token_embeddings(texts[start : start + RAW_POOL_CHUNK])
        if model.pooling == "cls":
            out += [t[0] for t in tokens]
        else:
            out += [t.mean(axis=0) for t in tokens]
    return np.stack(out).astype(np.float32)


def _accepts_normalize(model: Any) -> bool:
    try:
        return "normalize" in inspect.signature(model.encode).parameters
    except (TypeError, ValueError):
        return False


def embeddings(model: Any, texts: list[str], desc: str) -> tuple[np.ndarray, np.ndarray]:
    """(raw pooled, L2-normalised) embeddings of `texts`, with one forward pass per text at most.

    The raw vectors come from the encoder's `encode(normalize=False)` (cached like any embedding), or from its
    token embeddings; a model with neither gets its normalised embeddings for both.
    """
    if _accepts_normalize(model):
        raw = np.asarray(model.encode(texts, desc=desc, normalize=False), dtype=np.float32)
        normed = raw / np.clip(np.linalg.norm(raw, axis=1, keepdims=True), 1e-12, None)
        return raw, normed.astype(np.float32)
    normed = model.encode(texts, desc=desc)
    raw = raw_pooled(model, texts) if callable(getattr(model, "token_embeddings", None)) else normed
    return raw, normed


def knn_correct(train_x: np.ndarray, train_y: np.ndarray, test_x: np.ndarray, test_y: np.ndarray, metric: str) -> np.ndarray:
    clf = KNeighborsClassifier(n_neighbors=min(K, len(train_x)), metric=metric, algorithm="brute")  # K in the suite
    clf.fit(train_x, train_y)
    return clf.predict(test_x) == test_y


@dataclass
class KNNSuite(NamedDatasets):
    names: tuple[str, ...] = DEFAULT_DATASETS
    name: str = "knn"
    data_kind: str = "labelled"  # datasets are catalog entries or local files of this kind

    def evaluate(self, model: Any, dataset: str, ctx: EvalContext) -> list[ScoreRecord]:
        data = load_labelled(dataset, ctx)
        labels = np.asarray(data.labels)
        train, test = split_indices(data.labels, ctx.seed, dataset)
        check_split_size(dataset, len(train), len(test))
        test_ids = [str(i) for i in test]
        records = []
        pool = lambda seed: Distractors.build(data.texts, seed)  # noqa: E731 - other texts of the file
        for v in variant_loop(model, ctx, measured=data.texts, pool=pool, dataset=dataset):
            variant = v.name
            texts = list(v.texts(data.texts, salt=f"{dataset}|{variant}"))
            info = v.info(texts)
            raw, normed = embeddings(model, texts, desc=f"{dataset} {variant}")
            for metric, emb, dist in (("knn_acc_euclidean", raw, "euclidean"), ("knn_acc_cosine", normed, "cosine")):
                correct = knn_correct(emb[train], labels[train], emb[test], labels[test], dist)
                values = (100.0 * correct).tolist()
                records.append(
                    ScoreRecord(
                        suite=self.name,
                        dataset=dataset,
                        variant=variant,
                        metric=metric,
                        value=float(np.mean(values)),
                        n=len(values),
                        items=ItemValues("mean", test_ids, values),
                        info=info,
                    )
                )
        return records


def make_suite(arg: str | None) -> KNNSuite:
    if not arg:
        return KNNSuite()
    names = tuple(n.strip() for n in arg.split(",") if n.strip())
    for n in names:
        try:
            info = get_info(n, kind="labelled")  # a name outside the catalog is a local knn/NAME_test.jsonl
        except DataError as exc:
            raise SuiteError(str(exc)) from None
        if info.kind != "labelled":
            raise SuiteError(f"{n!r} is not a labelled-text dataset; e.g. knn:agnews")
    return KNNSuite(names)
