"""The one significance computation of lenbench: the paired bootstrap of the difference between two scores, used
by the CLI report (`bench run`, `bench results`), the leaderboard's rank and rank interval, its Compare view and
its difference-vs-reference column, so every place gives the same verdict on the same pair of scores.

Both scores are recomputed on the same resamples of the items both scored (queries, STS pairs, test examples):
the shared item ids are put in a canonical (sorted) order, and resample b draws item positions with replacement
from `numpy.random.default_rng(SEED)` (`resample_counts`). A score on a resample follows `ScoreItems.aggregate`:
"mean" -> the weighted mean of the values; "spearman" -> 100 * Spearman(values, gold), ties averaged as
scipy.stats.rankdata does on the resampled array. The interval of B - A is the percentile interval of the
resampled differences (resamples where a Spearman is undefined are left out); it "excludes 0" when both ends are
on the same side of 0.

A score's resamples depend only on its own items and the item set, so they are computed once per (score, item set)
and kept (`resampled`, keyed by what the caller names the score, e.g. the database and score id): ranking twenty
groups costs twenty re-scorings, not one per pair, and gives exactly the numbers each pair's own call gives.

Several seeds of a method are a different question (training-seed variance): `mean_ci`, the Student t-interval
of per-seed values or differences, answers it.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import rankdata

DEFAULT_RESAMPLES = 1000
DEFAULT_LEVEL = 0.95
SEED = 0
RESAMPLE_CHUNK = 200  # resamples scored at once (bounds memory on 10k-item datasets)
MIN_ITEMS = {"mean": 1, "spearman": 3}
CACHE_ENTRIES = 4096  # resampled scores kept (8 KB each at 1,000 resamples)


@dataclass(frozen=True)
class BootstrapCI:
    difference: float  # score(B) - score(A) on the shared items
    low: float
    high: float
    n_items: int
    resamples: int  # resamples with a defined difference
    level: float

    @property
    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0

    def label(self, digits: int = 2) -> str:
        """'+2.01 [1.44, 2.62]*' (the star: the interval excludes 0)."""
        star = "*" if self.excludes_zero else ""
        return f"{self.difference:+.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]{star}"


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
    """The score of each row of an (R, n) array of items."""
    if aggregate == "mean":
        return values.mean(axis=1)
    if aggregate == "spearman":
        if gold is None:
            raise ValueError("a 'spearman' score needs gold values")
        return spearman_x100_rows(values, gold)
    raise ValueError(f"unknown aggregate {aggregate!r} (known: mean, spearman)")


# ------------------------------------------------------------------------------------------------ resamples
def resample_counts(n: int, resamples: int = DEFAULT_RESAMPLES, seed: int = SEED) -> np.ndarray:
    """How often each of n items is drawn in each resample, (resamples, n): the draws rng.integers(0, n, (R, n))."""
    idx = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    flat = (idx + n * np.arange(resamples)[:, None]).ravel()
    return np.bincount(flat, minlength=resamples * n).reshape(resamples, n).astype(np.float64)


def _sorted_ranks(values: np.ndarray, counts_t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(order, ranks): the items sorted by value, and for each of them (in that order) the average rank (as scipy's
    rankdata) of its value inside each resample, (n, B). counts_t: (n, B), how often each item is drawn.

    A resample holds item i counts_t[i, b] times, and all copies of one value tie: the rank of a value is the number
    of drawn items below it plus (its copies + 1) / 2, a cumulative sum over the sorted values; O(n) per resample
    instead of sorting every resample.
    """
    order = np.argsort(values, kind="stable")
    drawn = counts_t[order]
    ordered = values[order]
    distinct = np.r_[True, ordered[1:] != ordered[:-1]]
    if distinct.all():
        return order, np.cumsum(drawn, axis=0) - (drawn - 1.0) / 2.0
    starts = np.flatnonzero(distinct)
    per_value = np.add.reduceat(drawn, starts, axis=0)
    rank_of_value = np.cumsum(per_value, axis=0) - (per_value - 1.0) / 2.0
    return order, rank_of_value[np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(values)]))]


def resampled_ranks(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The average rank of each item's value inside each resample, (B, n), items in their own order."""
    order, ranks = _sorted_ranks(values, np.ascontiguousarray(counts.T))
    out = np.empty_like(ranks)
    out[order] = ranks
    return out.T


def _spearman_on_counts(values: np.ndarray, gold: np.ndarray, counts_t: np.ndarray) -> np.ndarray:
    """100 * Spearman of values and gold on each resample (a weighted Pearson of the resampled ranks), (B,)."""
    n = counts_t.sum(axis=0)
    order, sorted_gold = _sorted_ranks(gold, counts_t)
    gold_ranks = np.empty_like(sorted_gold)
    gold_ranks[order] = sorted_gold
    gold_ranks -= (counts_t * gold_ranks).sum(axis=0) / n
    weighted_gold = counts_t * gold_ranks
    gold_norm = np.sqrt((weighted_gold * gold_ranks).sum(axis=0))
    order, ranks = _sorted_ranks(values, counts_t)
    # sum w (x - mean x)(y - mean y) = sum w x (y - mean y), as the weighted y deviations sum to 0
    covariance = (ranks * weighted_gold[order]).sum(axis=0)
    weighted = counts_t[order] * ranks
    variance = (weighted * ranks).sum(axis=0) - weighted.sum(axis=0) ** 2 / n
    with np.errstate(invalid="ignore", divide="ignore"):
        denom = np.sqrt(np.maximum(variance, 0.0)) * gold_norm
        return np.where(denom > 0, 100.0 * covariance / denom, np.nan)


def resampled_score(aggregate: str, values: np.ndarray, gold: np.ndarray | None, resamples: int = DEFAULT_RESAMPLES,
                    seed: int = SEED) -> tuple[float, np.ndarray]:  # fmt: skip
    """(score on all items, score on each resample (B,)) of one score's items in canonical order."""
    values = np.asarray(values, dtype=np.float64)
    n = len(values)
    full = float(score_rows(aggregate, values[None, :], None if gold is None else np.asarray(gold, dtype=np.float64)[None, :])[0])
    rng = np.random.default_rng(seed)
    boot = np.empty(resamples)
    for start in range(0, resamples, RESAMPLE_CHUNK):
        size = min(RESAMPLE_CHUNK, resamples - start)
        idx = rng.integers(0, n, size=(size, n))
        counts = np.bincount((idx + n * np.arange(size)[:, None]).ravel(), minlength=size * n).reshape(size, n)
        if aggregate == "mean":
            boot[start : start + size] = counts @ values / n
        else:
            boot[start : start + size] = _spearman_on_counts(values, gold, np.ascontiguousarray(counts.T, dtype=np.float64))
    return full, boot


def common_items(*items: dict) -> tuple[str, ...]:
    """The item ids every score has, sorted: the canonical order every resample is drawn over."""
    common = set(items[0]["item_ids"])
    for item in items[1:]:
        common &= set(item["item_ids"])
    return tuple(sorted(common))


def _digest(ids: tuple[str, ...]) -> str:
    return hashlib.sha1("\n".join(ids).encode("utf-8")).hexdigest()


_CACHE: OrderedDict[tuple, tuple[float, np.ndarray]] = OrderedDict()


def resampled(item: dict, common: tuple[str, ...], key: Hashable | None = None, resamples: int = DEFAULT_RESAMPLES,
              seed: int = SEED) -> tuple[float, np.ndarray]:  # fmt: skip
    """One score's value and resamples on the item set `common` (canonical order). With a key (what names the
    score: database and score id), the result is kept and reused by every later pair that involves it."""
    cache_key = None if key is None else (key, _digest(common), resamples, seed)
    if cache_key is not None and cache_key in _CACHE:
        _CACHE.move_to_end(cache_key)
        return _CACHE[cache_key]
    aggregate = item["aggregate"]
    if aggregate not in MIN_ITEMS:
        raise ValueError(f"unknown aggregate {aggregate!r} (known: mean, spearman)")
    position = {item_id: k for k, item_id in enumerate(item["item_ids"])}
    take = [position[i] for i in common]
    values = np.asarray(item["values"], dtype=np.float64)[take]
    gold = None if item.get("gold") is None else np.asarray(item["gold"], dtype=np.float64)[take]
    if aggregate == "spearman" and gold is None:
        raise ValueError("a 'spearman' score needs gold values")
    result = resampled_score(aggregate, values, gold, resamples, seed)
    if cache_key is not None:
        _CACHE[cache_key] = result
        while len(_CACHE) > CACHE_ENTRIES:
            _CACHE.popitem(last=False)
    return result


def score_interval(item: dict | None, key: Hashable | None = None, resamples: int = DEFAULT_RESAMPLES,
                   level: float = DEFAULT_LEVEL, seed: int = SEED) -> tuple[float, float]:  # fmt: skip
    """Percentile interval of one score from its items, on the resamples every difference involving it uses
    (`resampled` over its own item set); (nan, nan) without items or with too few. Items without ids (curve
    points) are taken in their stored order."""
    if not isinstance(item, dict) or not item.get("values"):
        return np.nan, np.nan
    n = len(item["values"])
    if n < MIN_ITEMS.get(item.get("aggregate"), 1):
        return np.nan, np.nan
    ids = item.get("item_ids") or [f"{i:012d}" for i in range(n)]  # zero-padded: sorted = stored order
    _, boot = resampled({**item, "item_ids": ids}, tuple(sorted(ids)), key, resamples, seed)
    boot = boot[~np.isnan(boot)]
    if not len(boot):
        return np.nan, np.nan
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(boot, [alpha, 1.0 - alpha])
    return float(low), float(high)


def difference_ci(a: tuple[float, np.ndarray], b: tuple[float, np.ndarray], n_items: int,
                  level: float = DEFAULT_LEVEL) -> BootstrapCI:  # fmt: skip
    """The percentile CI of B - A from both scores' (value, resamples) on the same item set and resamples."""
    diffs = b[1] - a[1]
    diffs = diffs[~np.isnan(diffs)]  # a constant resample has no Spearman; it says nothing about the difference
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(diffs, [alpha, 1.0 - alpha]) if len(diffs) else (np.nan, np.nan)
    return BootstrapCI(float(b[0] - a[0]), float(low), float(high), n_items, int(len(diffs)), level)


def paired_bootstrap(a: dict, b: dict, resamples: int = DEFAULT_RESAMPLES, level: float = DEFAULT_LEVEL,
                     seed: int = SEED, keys: tuple[Hashable, Hashable] | None = None) -> BootstrapCI:  # fmt: skip
    """Percentile CI of score(B) - score(A) on the items both scored. a, b: {"aggregate", "item_ids", "values",
    "gold"} (ScoreItems); keys: what names each score, to reuse its resamples (see `resampled`)."""
    if a["aggregate"] != b["aggregate"]:
        raise ValueError(f"the two runs aggregate differently ({a['aggregate']} vs {b['aggregate']})")
    common = common_items(a, b)
    minimum = MIN_ITEMS.get(a["aggregate"], 1)
    if len(common) < minimum:
        raise ValueError(f"the runs share {len(common)} item(s); the bootstrap needs at least {minimum}")
    key_a, key_b = keys if keys is not None else (None, None)
    return difference_ci(resampled(a, common, key_a, resamples, seed), resampled(b, common, key_b, resamples, seed),
                         len(common), level)  # fmt: skip


# ------------------------------------------------------------------------------------------------ seeds
@dataclass(frozen=True)
class MeanCI:
    """Mean of independent repeats (e.g. one score per training seed) with a Student-t interval."""

    mean: float
    low: float
    high: float
    n: int
    level: float

    @property
    def half(self) -> float:
        return (self.high - self.low) / 2.0

    @property
    def excludes_zero(self) -> bool:
        return not np.isnan(self.low) and (self.low > 0 or self.high < 0)


def t_half_width(std: np.ndarray | float, count: np.ndarray | float, level: float = DEFAULT_LEVEL) -> np.ndarray:
    """Half-width of the Student-t interval of a mean of `count` values with sample std `std` (NaN below 2 values);
    vectorised, and what `mean_ci` uses."""
    from scipy.stats import t

    count = np.asarray(count, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        half = t.ppf(0.5 + level / 2.0, np.maximum(count - 1, 1)) * np.asarray(std, dtype=float) / np.sqrt(count)
    return np.where(count > 1, half, np.nan)


def mean_ci(values: Sequence[float], level: float = DEFAULT_LEVEL) -> MeanCI:
    """t-interval of the mean over seeds; with one value the interval is undefined (nan), not zero."""
    x = np.asarray([v for v in values if v is not None and not np.isnan(v)], dtype=np.float64)
    n = len(x)
    if n == 0:
        return MeanCI(np.nan, np.nan, np.nan, 0, level)
    mean = float(x.mean())
    if n == 1:
        return MeanCI(mean, np.nan, np.nan, 1, level)
    half = float(t_half_width(x.std(ddof=1), n, level))
    return MeanCI(mean, mean - half, mean + half, n, level)
