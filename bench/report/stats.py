"""Paired bootstrap confidence interval of the difference between two runs on one dataset (shared by the CLI
tables and the leaderboard).

Both runs are scored on the same items (queries, STS pairs, test examples). One resample draws item indices
with replacement and scores *both* runs on that same draw, so the interval reflects the difference and not
the two runs' separate sampling noise. How a score is rebuilt from items follows `ScoreItems.aggregate`:
"mean" -> mean(values); "spearman" -> 100 * Spearman(values, gold).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import rankdata

DEFAULT_RESAMPLES = 1000
DEFAULT_LEVEL = 0.95
RESAMPLE_CHUNK = 200  # resamples ranked at once for Spearman (bounds memory on 10k-item datasets)


@dataclass(frozen=True)
class BootstrapCI:
    difference: float  # score(B) - score(A) on the shared items
    low: float
    high: float
    n_items: int
    resamples: int
    level: float

    @property
    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0


def _pearson_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson correlation of each row of x with the same row of y."""
    x = x - x.mean(axis=1, keepdims=True)
    y = y - y.mean(axis=1, keepdims=True)
    denom = np.sqrt((x * x).sum(axis=1) * (y * y).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, (x * y).sum(axis=1) / denom, np.nan)


def spearman_x100_rows(values: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """100 * Spearman of each row pair (ties get average ranks, as scipy.stats.spearmanr)."""
    return 100.0 * _pearson_rows(rankdata(values, axis=1), rankdata(gold, axis=1))


def score_rows(aggregate: str, values: np.ndarray, gold: np.ndarray | None) -> np.ndarray:
    """The score of each row of an (R, n) array of resampled items."""
    if aggregate == "mean":
        return values.mean(axis=1)
    if aggregate == "spearman":
        if gold is None:
            raise ValueError("a 'spearman' score needs gold values")
        return spearman_x100_rows(values, gold)
    raise ValueError(f"unknown aggregate {aggregate!r} (known: mean, spearman)")


def align_items(a: dict, b: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Values (and gold) of A and B on the items both have, in the same order."""
    index_b = {item: i for i, item in enumerate(b["item_ids"])}
    pairs = [(i, index_b[item]) for i, item in enumerate(a["item_ids"]) if item in index_b]
    ia = np.array([p[0] for p in pairs], dtype=np.int64)
    ib = np.array([p[1] for p in pairs], dtype=np.int64)
    va = np.asarray(a["values"], dtype=np.float64)[ia]
    vb = np.asarray(b["values"], dtype=np.float64)[ib]
    ga = None if a.get("gold") is None else np.asarray(a["gold"], dtype=np.float64)[ia]
    gb = None if b.get("gold") is None else np.asarray(b["gold"], dtype=np.float64)[ib]
    return va, vb, ga, gb


def paired_bootstrap(
    a: dict,
    b: dict,
    resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: int = 0,
) -> BootstrapCI:
    """Percentile CI of score(B) - score(A). a, b: {"aggregate", "item_ids", "values", "gold"} (ScoreItems)."""
    if a["aggregate"] != b["aggregate"]:
        raise ValueError(f"the two runs aggregate differently ({a['aggregate']} vs {b['aggregate']})")
    aggregate = a["aggregate"]
    va, vb, ga, gb = align_items(a, b)
    n = len(va)
    minimum = 3 if aggregate == "spearman" else 1
    if n < minimum:
        raise ValueError(f"the runs share {n} item(s); the bootstrap needs at least {minimum}")
    full = score_rows(aggregate, np.stack([vb, va]), None if gb is None else np.stack([gb, ga]))
    difference = float(full[0] - full[1])
    rng = np.random.default_rng(seed)
    diffs = np.empty(resamples)
    for start in range(0, resamples, RESAMPLE_CHUNK):
        size = min(RESAMPLE_CHUNK, resamples - start)
        idx = rng.integers(0, n, size=(size, n))
        score_b = score_rows(aggregate, vb[idx], None if gb is None else gb[idx])
        score_a = score_rows(aggregate, va[idx], None if ga is None else ga[idx])
        diffs[start : start + size] = score_b - score_a
    diffs = diffs[~np.isnan(diffs)]  # a constant resample has no Spearman; it says nothing about the difference
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(diffs, [alpha, 1.0 - alpha]) if len(diffs) else (np.nan, np.nan)
    return BootstrapCI(difference, float(low), float(high), n, int(len(diffs)), level)


@dataclass(frozen=True)
class MeanCI:
    """Mean of independent repeats (e.g. one score per training seed) with a Student-t interval."""

    mean: float
    low: float
    high: float
    n: int
    level: float


def mean_ci(values, level: float = DEFAULT_LEVEL) -> MeanCI:  # noqa: ANN001
    """t-interval of the mean over seeds; with one value the interval is undefined (nan), not zero."""
    from scipy.stats import t

    x = np.asarray([v for v in values if v is not None and not np.isnan(v)], dtype=np.float64)
    n = len(x)
    if n == 0:
        return MeanCI(np.nan, np.nan, np.nan, 0, level)
    mean = float(x.mean())
    if n == 1:
        return MeanCI(mean, np.nan, np.nan, 1, level)
    half = float(t.ppf(0.5 + level / 2.0, n - 1) * x.std(ddof=1) / np.sqrt(n))
    return MeanCI(mean, mean - half, mean + half, n, level)
