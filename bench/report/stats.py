"""The one significance computation of lenbench: the paired bootstrap of the difference between two scores, used
by the CLI report (`bench run`, `bench results`), the leaderboard's rank and rank interval, its Compare view and
its difference-vs-reference column, so every place gives the same verdict on the same pair of scores.

Both scores are recomputed on the same resamples of the items both scored (queries, STS pairs, test examples):
the shared item ids are put in a canonical (sorted) order, and resample b draws item positions with replacement
from `numpy.random.default_rng(SEED)` (`resample_counts`). A score on a resample follows `ScoreItems.aggregate`:
"mean" -> the weighted mean of the values; "spearman" -> 100 * Spearman(values, gold), ties averaged as
scipy.stats.rankdata does on the resampled array. The interval of B - A is the percentile interval of the
resampled differences (resamples where a Spearman is undefined are left out); it "excludes 0" when both ends are
on the same side of 0. The p-value is read off the same resamples (`bootstrap_p`), so a row's interval excludes 0
exactly when its uncorrected p is under 1 - level.

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
    p: float = float("nan")  # two-sided p-value from the same resamples (`bootstrap_p`): < 1 - level iff excludes_zero

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
    difference = float(b[0] - a[0])
    return BootstrapCI(difference, float(low), float(high), n_items, int(len(diffs)), level,
                       bootstrap_p(difference, diffs, n_items))  # fmt: skip


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


# ------------------------------------------------------------------------------------------------ seeds and items
MIN_SEEDS = 3  # fewer seeds than this: their variance is not estimated (a t(1) interval over 2 seeds says nothing)
SEED_ITEM_METHOD = ("seeds+items: mean over seeds; variance = each method's between-seed variance / seeds + the "
                    "paired bootstrap variance over the items of the seed-mean difference; t interval with "
                    "Welch-Satterthwaite degrees of freedom")  # fmt: skip
ITEM_METHOD = "items: paired bootstrap over the items (percentile interval)"


@dataclass(frozen=True)
class DifferenceCI:
    """The difference of two methods' mean scores (over their seeds) with its interval and a two-sided p-value
    (for multiplicity corrections), and how both were computed."""

    difference: float
    low: float
    high: float
    p: float
    seeds: tuple[int, int]  # runs of (A, B)
    method: str  # "seeds+items" or "items"
    level: float = DEFAULT_LEVEL
    note: str = ""  # e.g. "seed variance not estimated (2 seeds)"

    @property
    def excludes_zero(self) -> bool:
        return not np.isnan(self.low) and (self.low > 0 or self.high < 0)


def _normal_p(difference: float, se: float, n_items: int | None = None) -> float:
    """Two-sided p of difference / se: Student t with n_items - 1 degrees of freedom (a mean over n items with an
    estimated standard error), normal without n_items."""
    from scipy.stats import norm, t

    if not np.isfinite(se) or se <= 0:
        return 0.0 if difference != 0 else 1.0
    if n_items is not None and n_items > 1:
        return float(2.0 * t.sf(abs(difference) / se, n_items - 1))
    return float(2.0 * norm.sf(abs(difference) / se))


def seed_item_ci(a_full: Sequence[float], a_boot: np.ndarray, b_full: Sequence[float], b_boot: np.ndarray,
                 level: float = DEFAULT_LEVEL, seeds_vary: tuple[bool, bool] = (True, True),
                 n_items: int | None = None) -> DifferenceCI:  # fmt: skip
    """CI of mean(B) - mean(A) over seeds, each run scored on the same items and item resamples.

    a_full (kA,), a_boot (kA, R): each run of A's score on all shared items and on each of the R item resamples
    (`resampled`, the same resamples for every run); likewise B. seeds_vary: whether each side's runs are training
    seeds (False: one untrained model, which has no seed variance).

    Both sides with >= MIN_SEEDS seeds (or a side that does not vary by seed): variance = sum over the varying sides
    of (between-seed variance of the full scores) / seeds + the bootstrap variance over the items of the seed-mean
    difference; interval diff +- t(df) * sqrt(variance), df by Welch-Satterthwaite (the item part counts as many
    degrees of freedom; each run's own item noise, which both parts hold, is counted once). Otherwise the seed
    variance is not estimated: the percentile interval of the item bootstrap of the seed-mean difference, with a
    note. p: two-sided, from the distribution the interval comes from (the t with Welch df for seeds+items, the
    item resamples for the items alone: `bootstrap_p`), so the interval excludes 0 exactly when p < 1 - level.
    """
    from scipy.stats import t

    a_full, b_full = np.asarray(a_full, dtype=float), np.asarray(b_full, dtype=float)
    a_boot, b_boot = np.atleast_2d(np.asarray(a_boot, dtype=float)), np.atleast_2d(np.asarray(b_boot, dtype=float))
    diff = float(b_full.mean() - a_full.mean())
    boot_all = b_boot.mean(axis=0) - a_boot.mean(axis=0)
    keep = ~np.isnan(boot_all)
    boot = boot_all[keep]
    var_items = float(boot.var(ddof=1)) if len(boot) > 1 else np.nan
    ks = (len(a_full), len(b_full))
    short = [k for k, varies in zip(ks, seeds_vary) if varies and k < MIN_SEEDS]
    seeded = [(full, k) for full, k, varies in zip((a_full, b_full), ks, seeds_vary) if varies and k >= MIN_SEEDS]
    if seeded and not short:
        parts = [float(full.var(ddof=1)) / k for full, k in seeded]
        # The between-seed variance already holds each run's own item-level noise (sigma_e^2 / n), which the item
        # bootstrap of the seed means counts again (sigma_e^2 / (n k)): estimated from how each run deviates from
        # its method's seed mean over the item resamples, and taken out of the item part once.
        repeated = 0.0
        for runs, k in ((a_boot, ks[0]), (b_boot, ks[1])):
            if k > 1:
                dev = runs[:, keep] - runs[:, keep].mean(axis=0)
                repeated += float(dev.var(axis=1, ddof=1).sum()) / ((k - 1) * k)
        item_part = max(var_items - repeated, 0.0) if np.isfinite(var_items) else 0.0
        var = sum(parts) + item_part
        denom = sum(p * p / (k - 1) for p, (_, k) in zip(parts, seeded))
        df = var * var / denom if denom > 0 else np.inf
        half = float(t.ppf(0.5 + level / 2.0, df) * np.sqrt(var)) if np.isfinite(df) else float(
            _z(level) * np.sqrt(var))  # fmt: skip
        p = float(2.0 * t.sf(abs(diff) / np.sqrt(var), df)) if var > 0 else (0.0 if diff else 1.0)
        return DifferenceCI(diff, diff - half, diff + half, p, ks, "seeds+items", level)
    note = ""
    if short:
        note = f"seed variance not estimated ({min(short)} seed{'s' if min(short) > 1 else ''}; {MIN_SEEDS} needed)"
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(boot, [alpha, 1.0 - alpha]) if len(boot) else (np.nan, np.nan)
    return DifferenceCI(diff, float(low), float(high), bootstrap_p(diff, boot, n_items), ks, "items", level,
                        note)  # fmt: skip


def _z(level: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(0.5 + level / 2.0))


def _zero_position(diffs: np.ndarray) -> tuple[float, float]:
    """(below, above) for sorted resamples d (m >= 2): `below` is the largest probability p whose quantile
    (np.quantile's linear interpolation, the interval's) is <= 0, `above` the smallest whose quantile is >= 0; -inf /
    +inf when no resample is <= 0 / >= 0."""
    m = len(diffs)
    last = int(np.searchsorted(diffs, 0.0, side="right")) - 1  # last resample <= 0
    if last < 0:
        below = -np.inf
    elif last == m - 1:
        below = 1.0
    else:
        below = (last + (0.0 - diffs[last]) / (diffs[last + 1] - diffs[last])) / (m - 1)
    first = int(np.searchsorted(diffs, 0.0, side="left"))  # first resample >= 0
    if first == m:
        above = np.inf
    elif first == 0:
        above = 0.0
    else:
        above = (first - 1 + (0.0 - diffs[first - 1]) / (diffs[first] - diffs[first - 1])) / (m - 1)
    return below, above


def bootstrap_p(difference: float, boot: np.ndarray, n_items: int | None = None) -> float:
    """Two-sided p-value of a difference from its bootstrap resamples, read off the same distribution as its
    percentile interval: the smallest 1 - level at which that interval (np.quantile, linear) reaches 0, about twice
    the share of resamples beyond 0. So the interval at level L excludes 0 exactly when p < 1 - L.

    Below 2 / (resamples - 1) (at most one resample beyond 0) the resamples cannot size p, and a Holm correction over
    many rows needs its size: there the t approximation of difference / the resamples' standard deviation (n_items - 1
    degrees of freedom) gives it, capped at 2 / (resamples - 1). The agreement holds for every level under
    1 - 2 / (resamples - 1) (0.998 at 1,000 resamples)."""
    boot = np.sort(np.asarray(boot, dtype=float))
    boot = boot[~np.isnan(boot)]
    if len(boot) < 2:
        return np.nan
    below, above = _zero_position(boot)
    percentile_p = float(min(1.0, max(2.0 * below, 0.0), max(2.0 * (1.0 - above), 0.0)))
    unresolved = 2.0 / (len(boot) - 1)
    if percentile_p >= unresolved:
        return percentile_p
    return min(_normal_p(difference, float(boot.std(ddof=1)), n_items), unresolved)


# ------------------------------------------------------------------------------------------------ multiplicity
CORRECTIONS = ("holm", "bh", "none")
CORRECTION_NAMES = {"holm": "Holm", "bh": "Benjamini-Hochberg", "none": "uncorrected"}


def adjust_p(p: Sequence[float], method: str = "holm") -> np.ndarray:
    """Adjusted p-values over one family: Holm (family-wise error) or Benjamini-Hochberg (false discovery rate);
    NaN stays NaN and is not counted in the family. A star is `adjusted < 1 - level`."""
    p = np.asarray(p, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = ~np.isnan(p)
    m = int(ok.sum())
    if m == 0 or method == "none":
        return np.where(ok, p, np.nan)
    values = p[ok]
    order = np.argsort(values, kind="stable")
    ranked = values[order]
    if method == "holm":
        adjusted = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * ranked))
    elif method == "bh":
        adjusted = np.minimum.accumulate((m / np.arange(m, 0, -1) * ranked[::-1]))[::-1]
        adjusted = np.minimum(1.0, adjusted)
    else:
        raise ValueError(f"unknown correction {method!r} (known: {', '.join(CORRECTIONS)})")
    back = np.empty(m)
    back[order] = adjusted
    out[ok] = back
    return out


def seed_variance_estimated(seeds: tuple[int, int], trained: tuple[bool, bool]) -> bool:
    """Whether a difference of two rows may be starred: every side whose runs are training seeds has at least
    MIN_SEEDS of them, so its interval holds how another seed would do. With fewer (one seed of a trained method)
    the interval is the items' alone and says nothing of the next seed: the difference keeps its interval and p,
    and gets no star, in `bench results` and in every leaderboard view alike. An untrained model scored once has
    no seed variance to estimate."""
    return all(k >= MIN_SEEDS or not varies for k, varies in zip(seeds, trained))


def corrected_stars(p: Sequence[float], correction: str = "holm", level: float = DEFAULT_LEVEL,
                    judged: Sequence[bool] | None = None) -> np.ndarray:  # fmt: skip
    """Which differences of one family get a star: their `adjust_p` p-value is under 1 - level (NaN: none), and
    `judged` (`seed_variance_estimated`; None: every one). The one verdict of `bench results` and the leaderboard;
    "none" stars each p-value on its own. An unjudged difference still counts in the family: the correction does
    not loosen because a row has one seed."""
    stars = np.asarray(adjust_p(p, correction) < 1.0 - level, dtype=bool)
    return stars if judged is None else stars & np.asarray(judged, dtype=bool)


# ------------------------------------------------------------------------------------------------ across datasets
def iqm(values: np.ndarray, axis: int | None = None) -> np.ndarray:
    """Interquartile mean: the mean of the middle half (scipy.stats.trim_mean with 25% cut, as rliable)."""
    from scipy.stats import trim_mean

    return trim_mean(values, 0.25, axis=axis)


def probability_of_improvement(x: Sequence[np.ndarray], y: Sequence[np.ndarray]) -> float:
    """P(X > Y) per dataset, averaged over datasets (rliable's definition): per dataset the Mann-Whitney U of X's
    seeds against Y's over kx * ky, ties counting one half; a dataset where both are identical counts 0.5.
    x, y: one array of per-seed scores per dataset."""
    probs = []
    for xs, ys in zip(x, y):
        xs, ys = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
        if len(xs) == len(ys) and np.array_equal(xs, ys):
            probs.append(0.5)
            continue
        greater = (xs[:, None] > ys[None, :]).sum() + 0.5 * (xs[:, None] == ys[None, :]).sum()
        probs.append(greater / (len(xs) * len(ys)))
    return float(np.mean(probs)) if probs else np.nan


@dataclass(frozen=True)
class Aggregate:
    """A method's aggregate over datasets with its stratified-bootstrap interval."""

    name: str  # "mean" or "IQM"
    value: float
    low: float
    high: float
    datasets: int
    seeds: int  # the fewest seeds on any dataset




def aggregate_over_datasets(full: Sequence[np.ndarray], boot: Sequence[np.ndarray], resamples: int = DEFAULT_RESAMPLES,
                            level: float = DEFAULT_LEVEL, seed: int = SEED) -> dict[str, Aggregate]:  # fmt: skip
    """Mean and interquartile mean over datasets of one method, with stratified-bootstrap intervals.

    full[d]: (k_d,) the method's per-seed scores on dataset d; boot[d]: (k_d, R) the same runs on R item resamples
    of d (`resampled`). Mean: the mean over datasets of the mean over seeds. IQM: rliable's, the 25%-trimmed mean
    of every (seed, dataset) score (datasets with fewer seeds are tiled to the most seeds' count, so each dataset
    weighs the same). Each bootstrap resample draws, in every dataset, the seeds with replacement and one of
    the item resamples (items within each dataset, seeds within the method), and computes the aggregate; the
    interval is the percentile interval.
    """
    rng = np.random.default_rng(seed)
    k_max = max(len(f) for f in full)
    datasets = len(full)
    point = np.empty((k_max, datasets))
    resampled_scores = np.empty((resamples, k_max, datasets))
    seed_means = np.empty((resamples, datasets))
    for d, (f, b) in enumerate(zip(full, boot)):
        k = len(f)
        tile = np.arange(k_max) % k
        point[:, d] = np.asarray(f, dtype=float)[tile]
        seeds_drawn = rng.integers(0, k, size=(resamples, k))
        items_drawn = rng.integers(0, np.asarray(b).shape[1], size=resamples)  # this dataset's own item resamples
        drawn = np.asarray(b, dtype=float)[seeds_drawn, items_drawn[:, None]]  # (R, k)
        resampled_scores[:, :, d] = drawn[:, tile]
        seed_means[:, d] = drawn.mean(axis=1)
    alpha = (1.0 - level) / 2.0
    out = {}
    mean = float(np.mean([np.mean(f) for f in full]))
    for name, values, boots in (
        ("mean", mean, seed_means.mean(axis=1)),
        ("IQM", float(iqm(point, axis=None)), iqm(resampled_scores.reshape(resamples, -1), axis=1)),
    ):
        boots = boots[~np.isnan(boots)]
        low, high = np.quantile(boots, [alpha, 1.0 - alpha]) if len(boots) else (np.nan, np.nan)
        out[name] = Aggregate(name, values, float(low), float(high), datasets, min(len(f) for f in full))
    return out


def seeds_ci(values: Sequence[float], level: float = DEFAULT_LEVEL) -> MeanCI:
    """The mean over seeds with its t-interval from MIN_SEEDS seeds on; under that the mean alone (a t(1) interval
    over 2 seeds says nothing: the seed variance is not estimated). What every table of seeds shows."""
    ci = mean_ci(values, level)
    return ci if ci.n >= MIN_SEEDS else MeanCI(ci.mean, np.nan, np.nan, ci.n, ci.level)
