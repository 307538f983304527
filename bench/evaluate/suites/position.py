"""`position`: the needle suite's facts placed at fixed depths of a context of fixed length, so a score says how well
a model finds a fact by where it sits (Zeng et al. 2025, An Empirical Study of Position Bias in Modern Information
Retrieval, arXiv 2505.13950).

For each dataset of the needle suite (passkey, needle) the same documents, names and facts are built once per depth
d in (0, 0.25, 0.5, 0.75, 1): every needle at depth d (the sentence boundary nearest d; the depth it got is in each
score's info). The context holds `LENGTH` tokens of the evaluated model, or its max_len - 2 when that is shorter, so
every depth is inside what the model reads and a drop with depth is the model's own, not truncation's. A model
whose max_len cannot hold a needle at some depth (the needle alone is longer than a max_len of 8) is refused, with
the max_len it needs: such depths would score truncation, and a PSI over them would mean nothing. Scored as
the needle suite (nDCG@1 x100 per query, 50 queries among 100 documents), variant `depth-0` ... `depth-100`.

The position sensitivity index (PSI, Zeng et al.'s worst-case measure) summarises the curve: the relative drop from
the best depth to the worst, 100 * (max - min) / max over the depths (0: position does not matter; 100: the worst
depth scores nothing). It is computed from the depth scores where it is shown (`bench results`' robustness summary,
the leaderboard's Robustness view, a claim whose metric is `psi`), with its interval from the items' resamples:
every depth scores the same queries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.evaluate.suites.base import EvalContext, NamedDatasets, SuiteError
from bench.evaluate.suites.needle import DATASETS, METRIC, build, length_counter, ndcg_at_1
from results_db.records import ItemValues, ScoreRecord

DEPTHS = (0.0, 0.25, 0.5, 0.75, 1.0)
LENGTH = 128  # tokens; the model's max_len - 2 when shorter


def depth_variant(depth: float) -> str:
    return f"depth-{round(100 * depth)}"


def position_sensitivity(scores: Any) -> Any:
    """PSI of per-depth scores along the last axis: 100 * (max - min) / max; 0 where the best depth scores 0."""
    s = np.asarray(scores, dtype=float)
    best, worst = s.max(axis=-1), s.min(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(best > 0, 100.0 * (best - worst) / np.where(best > 0, best, 1.0), 0.0)


def readable_tokens(model: Any) -> int | None:
    """The tokens of a text the model reads (its max_len less the two special tokens); None when it reads any
    length (BM25)."""
    max_len = getattr(model, "max_len", None)
    return max(0, max_len - 2) if isinstance(max_len, int) and not isinstance(max_len, bool) else None


def context_length(model: Any) -> int:
    readable = readable_tokens(model)
    return min(LENGTH, readable) if readable is not None and readable > 8 else LENGTH


def check_read(dataset: str, model: Any, built: Sequence[Any]) -> None:
    """Refuse a model that cannot read every needle at every depth: a depth whose needle lies past the model's
    max_len scores truncation, not position (every depth 0 at a max_len of 4; PSI 100 from truncation alone at 8),
    and a PSI over such depths says nothing about position."""
    readable = readable_tokens(model)
    if readable is None:
        return
    cut = {depth: sum(end > readable for end in data.needle_ends) for depth, data in zip(DEPTHS, built)}
    cut = {depth: n for depth, n in cut.items() if n}
    if cut:
        needed = max(end for data in built for end in data.needle_ends) + 2
        where = ", ".join(f"{depth_variant(d)} ({n} of {len(built[0].needle_ends)} queries)" for d, n in cut.items())
        raise SuiteError(f"position:{dataset}: the model reads {readable} tokens (max_len {readable + 2}) and the fact "
                         f"lies past them at {where}: those depths would score truncation, not position (nor would "
                         f"their PSI); score the position suite at a max_len of at least {needed} "
                         "(--eval-max-len for bench run, --max-len for bench eval)")  # fmt: skip


@dataclass
class PositionSuite(NamedDatasets):
    names: tuple[str, ...] = DATASETS
    name: str = "position"
    lexical_ok: bool = True  # BM25 ranks the documents with its own search

    def variants(self, ctx: EvalContext) -> list[str]:
        return [depth_variant(d) for d in DEPTHS]

    def evaluate(self, model: Any, dataset: str, ctx: EvalContext) -> list[ScoreRecord]:
        from bench.data.corpus import wiki_offline_file

        if dataset == "needle":
            ctx.files_read.add(str(wiki_offline_file()))
        counter = length_counter(model)
        length = context_length(model)
        built = [build(dataset, length, ctx.seed, ctx.limit, counter, at=depth) for depth in DEPTHS]
        check_read(dataset, model, built)  # before any depth is scored
        records = []
        for depth, data in zip(DEPTHS, built):
            values = ndcg_at_1(model, data, desc=f"{dataset} depth {depth:g}")
            info = {"depth": depth, "depths": [round(d, 4) for d in data.depths], "length": length,
                    "tokens_mean": float(np.mean(data.tokens)), "candidates": len(data.docs),
                    "length_tokenizer": counter.name}  # fmt: skip
            records.append(ScoreRecord(self.name, dataset, METRIC, float(np.mean(values)), n=len(values),
                                       variant=depth_variant(depth), items=ItemValues("mean", data.query_ids, values),
                                       info=info))  # fmt: skip
        return records


def make_suite(arg: str | None) -> PositionSuite:
    if not arg:
        return PositionSuite()
    names = tuple(n.strip() for n in arg.split(",") if n.strip())
    if not names or any(n not in DATASETS for n in names):
        raise SuiteError(f"position: datasets are {', '.join(DATASETS)} (e.g. position:passkey), got {arg!r}")
    return PositionSuite(names)


def depth_of(variant: str) -> float | None:
    """0.25 for 'depth-25'; None for any other variant."""
    if not variant.startswith("depth-") or not variant[6:].isdigit():
        return None
    return int(variant[6:]) / 100.0

