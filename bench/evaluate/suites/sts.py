"""STS suite: Spearman x100 between cosine similarity and gold scores, over all pairs of a file pooled together."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from bench.evaluate.attacks import AttackMeter, attack_texts
from bench.data import STS_FORMATS, STS_SUITE, find, get_info
from bench.data.errors import DataError
from bench.data.readers import check_gold_varies
from bench.evaluate.suites.base import CLEAN, EvalContext, SuiteError
from results_db import ItemValues, ScoreRecord


def spearman_x100(predicted: np.ndarray, gold: np.ndarray) -> float:
    return float(spearmanr(predicted, gold).statistic) * 100.0


def pair_cosines(model: Any, s1: list[str], s2: list[str], desc: str) -> np.ndarray:
    """cos(e(s1_i), e(s2_i)) from one encode call over both sides (normalised embeddings: a dot product)."""
    emb = model.encode(list(s1) + list(s2), desc=desc)
    return np.einsum("ij,ij->i", emb[: len(s1)], emb[len(s1) :])


def load_sts(dataset: str, ctx: EvalContext):
    info = get_info(dataset, kind="sts")
    if info.kind != "sts":
        raise SuiteError(f"{dataset!r} is not an STS dataset")
    located = find(dataset, ctx.data_dir, ctx.fetch, kind="sts")
    data = STS_FORMATS[located.format](located.path, name=dataset, split=info.split)
    ctx.note_source(located)
    ctx.files_read.update(data.files)
    if ctx.limit:
        data.sentences1 = data.sentences1[: ctx.limit]
        data.sentences2 = data.sentences2[: ctx.limit]
        data.scores = data.scores[: ctx.limit]
    return data


@dataclass
class STSSuite:
    names: tuple[str, ...] = STS_SUITE
    name: str = "sts"
    data_kind: str = "sts"  # datasets are catalog entries or local files of this kind

    def datasets(self) -> list[str]:
        return list(self.names)

    def evaluate(self, model: Any, dataset: str, ctx: EvalContext) -> list[ScoreRecord]:
        data = load_sts(dataset, ctx)
        gold = np.asarray(data.scores, dtype=np.float64)
        if len(gold) < 3:
            raise DataError(f"STS dataset {dataset!r} has {len(gold)} pairs; Spearman needs at least 3")
        check_gold_varies(data.scores, f"STS dataset {dataset!r}" + (f" (its first {ctx.limit} pairs)" if ctx.limit else ""))
        ids = [str(i) for i in range(len(gold))]
        records = []
        # a clean-only run skips the meter: a warm cache then needs no tokenizer (nor the texts' tokenisation)
        meter = AttackMeter(data.sentences1 + data.sentences2, model.tokenizer, model.max_len) if ctx.attacked else None
        for variant in ctx.variants():
            if variant == CLEAN:
                s1, s2 = data.sentences1, data.sentences2
                info = meter.clean_info() if meter else None
            else:
                elong = variant.split("-", 1)[1]
                tok, max_len = model.tokenizer, model.max_len
                s1 = attack_texts(data.sentences1, elong, tok, max_len, seed=hash_seed(ctx, dataset, variant, 1))
                s2 = attack_texts(data.sentences2, elong, tok, max_len, seed=hash_seed(ctx, dataset, variant, 2))
                info = meter.measure(s1 + s2).info()
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


def hash_seed(ctx: EvalContext, *parts: object) -> int:
    return ctx.rng("|".join(map(str, parts))).getrandbits(32)


def make_suite(arg: str | None) -> STSSuite:
    if not arg:
        return STSSuite()
    names = tuple(n.strip() for n in arg.split(",") if n.strip())
    for n in names:
        info = get_info(n, kind="sts")  # a name outside the catalog is a local sts/NAME.tsv
        if info.kind != "sts":
            raise SuiteError(f"{n!r} is not an STS dataset")
    return STSSuite(names)
