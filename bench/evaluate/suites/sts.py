"""STS suite: Spearman x100 between cosine similarity and gold scores, over all pairs of a file pooled together."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from bench.data import STS_FORMATS, STS_SUITE, get_info
from bench.data.errors import DataError
from bench.data.sts import check_gold_varies
from bench.evaluate.attacks import Distractors
from bench.evaluate.suites.base import EvalContext, NamedDatasets, SuiteError, load_dataset
from bench.evaluate.suites.variants import variant_loop
from results_db.records import ItemValues, ScoreRecord


def spearman_x100(predicted: np.ndarray, gold: np.ndarray) -> float:
    return float(spearmanr(predicted, gold).statistic) * 100.0


def pair_cosines(model: Any, s1: list[str], s2: list[str], desc: str) -> np.ndarray:
    """cos(e(s1_i), e(s2_i)) from one encode call over both sides (normalised embeddings: a dot product)."""
    emb = model.encode(list(s1) + list(s2), desc=desc)
    return np.einsum("ij,ij->i", emb[: len(s1)], emb[len(s1) :])


def load_sts(dataset: str, ctx: EvalContext):
    split = get_info(dataset, kind="sts").split
    data = load_dataset(dataset, ctx, "sts", "an STS dataset",
                        lambda located: STS_FORMATS[located.format](located.path, name=dataset, split=split))  # fmt: skip
    subset = ctx.subset(dataset, len(data.scores), "pairs")
    if subset:
        data.sentences1 = subset.take(data.sentences1)
        data.sentences2 = subset.take(data.sentences2)
        data.scores = subset.take(data.scores)
    return data


@dataclass
class STSSuite(NamedDatasets):
    names: tuple[str, ...] = STS_SUITE
    name: str = "sts"
    data_kind: str = "sts"  # datasets are catalog entries or local files of this kind

    def evaluate(self, model: Any, dataset: str, ctx: EvalContext) -> list[ScoreRecord]:
        data = load_sts(dataset, ctx)
        gold = np.asarray(data.scores, dtype=np.float64)
        if len(gold) < 3:
            raise DataError(f"STS dataset {dataset!r} has {len(gold)} pairs; Spearman needs at least 3")
        check_gold_varies(data.scores, f"STS dataset {dataset!r}" + (f" (the {ctx.limit} pairs of its --limit)" if ctx.limit_applies else ""))
        ids = [str(i) for i in range(len(gold))]
        records = []
        for v in variant_loop(model, ctx, measured=data.sentences1 + data.sentences2, pool=sts_pool(data), dataset=dataset):
            variant = v.name
            s1 = list(v.texts(data.sentences1, salt=f"{dataset}|{variant}|1"))
            s2 = list(v.texts(data.sentences2, salt=f"{dataset}|{variant}|2"))
            info = v.info(s1 + s2)
            cos = pair_cosines(model, s1, s2, desc=f"{dataset} {variant}")
            if not np.isfinite(cos).all() or np.ptp(cos) == 0:
                raise DataError(
                    f"STS dataset {dataset!r} ({variant}): the model gives every pair the same (or a non-finite) cosine "
                    "similarity, so Spearman correlation is undefined; nothing was recorded for this dataset"
                )
            records.append(
                ScoreRecord(
                    suite=self.name,
                    dataset=dataset,
                    variant=variant,
                    metric="spearman",
                    value=spearman_x100(cos, gold),
                    n=len(gold),
                    items=ItemValues("spearman", ids, cos.tolist(), gold.tolist()),
                    info=info,
                )
            )
        return records


def sts_pool(data):  # noqa: ANN001, ANN201 - STSData -> a pool factory
    """Distractor sentences of an STS set: both sides of the other pairs (a pair's own sentences never pad it)."""
    n = len(data.sentences1)
    return lambda seed: Distractors.build(data.sentences1 + data.sentences2, seed, owners=list(range(n)) * 2)


def make_suite(arg: str | None) -> STSSuite:
    if not arg:
        return STSSuite()
    names = tuple(n.strip() for n in arg.split(",") if n.strip())
    for n in names:
        info = get_info(n, kind="sts")  # a name outside the catalog is a local sts/NAME.tsv
        if info.kind != "sts":
            raise SuiteError(f"{n!r} is not an STS dataset")
    return STSSuite(names)
