"""Ranks that respect significance, from the per-item values a paired bootstrap needs (ScoreItems).

Per dataset, every ranked group's score is recomputed on the same bootstrap resamples of the items (queries, STS
pairs, test examples), as `bench.report.stats.paired_bootstrap` does for two runs:
  - the best group (highest score on all items) has rank 1, and so has every group whose paired 95% CI of
    (group - best) contains 0: they are tied with it;
  - any other group's rank is 1 + the number of groups significantly better than it (CI of the difference > 0).
A group's **mean rank** is the mean of those ranks over the datasets it was ranked on. Its **rank interval**
comes from the same pairwise bootstrap CIs: on a dataset the group's rank can be no better than 1 + the groups
significantly better than it (1 when tied with the best) and no worse than G - the groups significantly worse
than it; both bounds are averaged over the datasets. (A confidence set for ranks built from pairwise tests, as
rank intervals on arena-style leaderboards are; unlike ranking each resample, it always contains the rank shown.)

No streamlit here; the main view caches `rank_groups` by the database's change marker.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from bench.report import stats

RESAMPLES = 200  # enough for 95% quantiles of ranks; kept small because Spearman re-ranks every resample
LEVEL = stats.DEFAULT_LEVEL
MIN_ITEMS = 3


@dataclass(frozen=True)
class Ranks:
    """Per group (index = group code): the significance rank on each dataset, the mean rank, its interval."""

    per_dataset: pd.DataFrame  # groups x datasets; NaN where a group has no per-item values for a dataset
    mean_rank: pd.Series
    low: pd.Series
    high: pd.Series
    resamples: int


def common_items(items: dict[int, dict]) -> tuple[str, ...]:
    """The item ids every group scored, sorted: a canonical order, so one group's resampled scores depend only on
    that set (and can be cached per score while the filters change which groups are compared)."""
    groups = list(items)
    common = set(items[groups[0]]["item_ids"])
    for g in groups[1:]:
        common &= set(items[g]["item_ids"])
    return tuple(sorted(common))


def score_resamples(item: dict, common: tuple[str, ...], resamples: int = RESAMPLES, seed: int = 0) -> tuple[float, np.ndarray]:
    """One group's score on the common items and on each of the shared resamples (`resample_counts(len(common))`)."""
    position = {item_id: k for k, item_id in enumerate(item["item_ids"])}
    take = [position[i] for i in common]
    values = np.asarray(item["values"], dtype=np.float64)[take]
    gold = None if item.get("gold") is None else np.asarray(item["gold"], dtype=np.float64)[take]
    full, boot = resampled_scores(item["aggregate"], values[None, :], gold, resamples, seed)
    return float(full[0]), boot[0]


def resample_counts(n: int, resamples: int, seed: int = 0) -> np.ndarray:
    """How often each item is drawn in each resample, (resamples, n): the same draws as `bench.report.stats.paired_bootstrap`
    with this seed (rng.integers(0, n, (resamples, n)))."""
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
    drawn = counts_t[order]  # rows in value order (contiguous rows: a fast gather)
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


def resampled_scores(aggregate: str, values: np.ndarray, gold: np.ndarray | None, resamples: int, seed: int = 0
                     ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """(score of each group on all items (G,), scores on the same resamples (G, B)); scores as ScoreItems defines.

    The resamples are item counts (`resample_counts`), shared by every group: a mean is a matrix product and a
    Spearman a weighted Pearson of resampled ranks, with no (B, n) copy of the data per group.
    """
    n = values.shape[1]
    counts = resample_counts(n, resamples, seed)
    if aggregate == "mean":
        return values.mean(axis=1), values @ counts.T / n
    if aggregate == "spearman":
        if gold is None:
            raise ValueError("a 'spearman' score needs gold values")
        full = stats.score_rows("spearman", values, np.broadcast_to(gold, values.shape))
        counts_t = np.ascontiguousarray(counts.T)  # (n, B): items as rows
        # Gold's side of the weighted Pearson is the same for every group: centred and weighted once.
        order, sorted_gold = _sorted_ranks(gold, counts_t)
        gold_ranks = np.empty_like(sorted_gold)
        gold_ranks[order] = sorted_gold
        gold_ranks -= (counts_t * gold_ranks).sum(axis=0) / n
        weighted_gold = counts_t * gold_ranks
        gold_norm = np.sqrt((weighted_gold * gold_ranks).sum(axis=0))
        boot = np.empty((len(values), resamples))
        for g, row in enumerate(values):
            order, ranks = _sorted_ranks(row, counts_t)
            # sum w (x - mean x)(y - mean y) = sum w x (y - mean y), as the weighted y deviations sum to 0
            covariance = (ranks * weighted_gold[order]).sum(axis=0)
            weighted = counts_t[order] * ranks
            variance = (weighted * ranks).sum(axis=0) - weighted.sum(axis=0) ** 2 / n
            with np.errstate(invalid="ignore", divide="ignore"):
                denom = np.sqrt(np.maximum(variance, 0.0)) * gold_norm
                boot[g] = np.where(denom > 0, 100.0 * covariance / denom, np.nan)
        return full, boot
    raise ValueError(f"unknown aggregate {aggregate!r} (known: mean, spearman)")


def dataset_ranks(full: np.ndarray, boot: np.ndarray, level: float = LEVEL) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Significance ranks (G,) of groups scored on one dataset, and the bounds of their rank intervals (G,), (G,)."""
    alpha = (1.0 - level) / 2.0
    best = int(np.nanargmax(full))
    # diff[h, g, b] = score_h - score_g on resample b: h is significantly better than g when its CI is above 0.
    diff = boot[:, None, :] - boot[None, :, :]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a pair with no defined resample: no verdict
        low = np.nanquantile(diff, alpha, axis=2)
        high = np.nanquantile(diff, 1.0 - alpha, axis=2)
    better = (low > 0).sum(axis=0)  # per g: how many groups beat it significantly
    worse = (high < 0).sum(axis=0)  # per g: how many groups it beats significantly
    tied_with_best = high[:, best] >= 0  # CI of (g - best) reaches 0
    ranks = np.where(tied_with_best, 1.0, 1.0 + better)
    ranks[best] = 1.0
    lowest = np.minimum(ranks, 1.0 + better)
    highest = np.maximum(ranks, float(len(full)) - worse)
    return ranks, lowest, highest


def ranks_from_scores(scores: dict[str, dict[int, tuple[float, np.ndarray]]], level: float = LEVEL) -> Ranks:
    """scores[dataset][group] = (score on all common items, scores on the shared resamples)."""
    all_groups = sorted({g for per in scores.values() for g in per})
    datasets = list(scores)
    frames = {name: pd.DataFrame(np.nan, index=all_groups, columns=datasets) for name in ("rank", "low", "high")}
    row_of = {g: k for k, g in enumerate(all_groups)}
    resamples = 0
    for j, dataset in enumerate(datasets):
        groups = sorted(scores[dataset])
        full = np.array([scores[dataset][g][0] for g in groups])
        boot = np.stack([scores[dataset][g][1] for g in groups])
        resamples = boot.shape[1]
        rows = [row_of[g] for g in groups]
        for name, column in zip(("rank", "low", "high"), dataset_ranks(full, boot, level)):
            frames[name].iloc[rows, j] = column
    return Ranks(frames["rank"], frames["rank"].mean(axis=1), frames["low"].mean(axis=1), frames["high"].mean(axis=1), resamples)


def rank_groups(items: dict[str, dict[int, dict]], resamples: int = RESAMPLES, level: float = LEVEL, seed: int = 0) -> Ranks:
    """items[dataset][group] = ScoreItems dict of that group's representative run. Groups never seen get no row."""
    scores: dict[str, dict[int, tuple[float, np.ndarray]]] = {}
    for dataset, per in items.items():
        common = common_items(per)
        if len(common) >= MIN_ITEMS:
            scores[dataset] = {g: score_resamples(item, common, resamples, seed) for g, item in per.items()}
    return ranks_from_scores(scores, level)
