"""Ranks that respect significance, from the pairwise verdicts of `bench.report.stats.paired_bootstrap` (the same
1,000 resamples, seed and cached per-score resamples as the CLI report and the Compare view, so a pair the rank
calls different is the pair Compare and `bench results` call different).

Per dataset, for every two ranked groups g, h, the 95% CI of (h - g) on the items both scored (over their seeds,
`stats.seed_item_ci`, where a row has several: `SeedEvidence`, as `bench results` pools them), and whether it is
real: its p-value after the Holm correction over every pair on every dataset of the table (the family the table
shows; `stats.corrected_stars`, the function `bench results` stars its differences with), and never for a pair
with a trained row of fewer than 3 seeds (`stats.seed_variance_estimated`, the rule of every star):
  - the best group (highest score) has rank 1, and so has every group not significantly worse than the best: they
    are tied with it;
  - any other group's rank is 1 + the number of groups significantly better than it.
A group's **mean rank** is the mean of those ranks over the datasets it was ranked on. Its **rank interval**
comes from the same pairwise CIs: on a dataset the group's rank can be no better than 1 + the groups
significantly better than it (1 when tied with the best) and no worse than G - the groups significantly worse
than it; both bounds are averaged over the datasets. (A confidence set for ranks built from pairwise tests, as
rank intervals on arena-style leaderboards are; it always contains the rank shown.)

No streamlit here; the main view caches `rank_groups` by the database's change marker.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from bench.report import stats

RESAMPLES = stats.DEFAULT_RESAMPLES
LEVEL = stats.DEFAULT_LEVEL
MIN_ITEMS = 3
CORRECTION = "holm"  # over each table's pairwise comparisons, as `bench results` corrects its differences


@dataclass(frozen=True)
class Ranks:
    """Per group (index = group code): the significance rank on each dataset, the mean rank, its interval, and the
    pairwise verdicts behind them: better[dataset] = set of (h, g) where h is significantly better than g."""

    per_dataset: pd.DataFrame  # groups x datasets; NaN where a group has no per-item values for a dataset
    mean_rank: pd.Series
    low: pd.Series
    high: pd.Series
    resamples: int
    better: dict[str, set[tuple[int, int]]]


@dataclass(frozen=True)
class SeedEvidence:
    """Each row's seeds on each dataset, what `bench results` pools as one method's seeds: items[dataset][group] =
    the ScoreItems dicts of its seeds' runs (the latest run of each seed, in run order), keys alike (what names each
    score, so its resamples are drawn once); trained: the groups whose runs are training seeds."""

    items: dict[str, dict[int, list[dict]]]
    keys: dict[str, dict[int, list[Hashable]]]
    trained: frozenset[int] | set[int] = frozenset()

    def seeds(self, dataset: str, group: int) -> int:
        return len(self.items.get(dataset, {}).get(group, ())) or 1

    def varies(self, dataset: str, group: int) -> bool:
        return group in self.trained or self.seeds(dataset, group) > 1

    def judged(self, dataset: str, g: int, h: int) -> bool:
        """Whether a verdict on (g, h) may be given (`stats.seed_variance_estimated`, the rule of every star)."""
        return stats.seed_variance_estimated((self.seeds(dataset, g), self.seeds(dataset, h)),
                                             (self.varies(dataset, g), self.varies(dataset, h)))  # fmt: skip

    def pooled(self, dataset: str, g: int, h: int) -> bool:
        """Whether (g, h) is judged over seeds: a side has several (else one run against one: the paired bootstrap)."""
        return self.seeds(dataset, g) > 1 or self.seeds(dataset, h) > 1

    def has(self, dataset: str, group: int) -> bool:
        """Whether a row's seeds on a dataset are here (every one of them with per-item values)."""
        return group in self.items.get(dataset, {})

    def ci(self, dataset: str, g: int, h: int) -> stats.DifferenceCI | None:
        """mean(h) - mean(g) over their seeds (`seed_ci`): the one computation of a pair's difference over seeds,
        for the rank (`pairwise_cis`) and the difference from the reference (leaderboard.significance); None where
        a side has no seeds here, or no interval can be drawn."""
        if not (self.has(dataset, g) and self.has(dataset, h)):
            return None
        per, names = self.items[dataset], self.keys.get(dataset, {})
        return seed_ci(per[g], per[h], names[g], names[h], (self.varies(dataset, g), self.varies(dataset, h)))

    def mean_score(self, dataset: str, group: int) -> float | None:
        """The mean over its seeds of a row's score on a dataset (None without seeds here)."""
        found = self.items.get(dataset, {}).get(group)
        return float(np.mean([_score(item) for item in found])) if found else None


def seed_ci(items_a: list[dict], items_b: list[dict], keys_a: list[Hashable], keys_b: list[Hashable],
            seeds_vary: tuple[bool, bool]) -> stats.DifferenceCI | None:  # fmt: skip
    """mean(B) - mean(A) over their seeds' runs with `stats.seed_item_ci`, every run rescored on the same resamples
    of the items all of them share (each run's resamples cached by its key); None when their aggregates differ or
    they share too few items (as `bench results`, no interval then)."""
    chosen = [*items_a, *items_b]
    if len({i["aggregate"] for i in chosen}) > 1:
        return None
    common = stats.common_items(*chosen)
    if len(common) < stats.MIN_ITEMS.get(chosen[0]["aggregate"], 1):
        return None
    try:
        pairs = [stats.resampled(item, common, key) for item, key in zip(chosen, [*keys_a, *keys_b])]
    except ValueError:
        return None
    full = np.array([p[0] for p in pairs])
    boot = np.array([p[1] for p in pairs])
    k = len(items_a)
    return stats.seed_item_ci(full[:k], boot[:k], full[k:], boot[k:], seeds_vary=seeds_vary, n_items=len(common))


def _score(item: dict) -> float:
    values = np.asarray(item["values"], dtype=np.float64)[None, :]
    gold = None if item.get("gold") is None else np.asarray(item["gold"], dtype=np.float64)[None, :]
    return float(stats.score_rows(item["aggregate"], values, gold)[0])


def pairwise_cis(items: dict[int, dict], keys: dict[int, Hashable] | None = None, resamples: int = RESAMPLES,
                 level: float = LEVEL, seeds: SeedEvidence | None = None, dataset: str = ""
                 ) -> dict[tuple[int, int], Any]:  # fmt: skip
    """CI of (h - g) for every ordered pair of groups (g, h), g < h: as `stats.paired_bootstrap` gives it for one run
    against one, over their seeds (`seed_ci`, as `bench results` and the Δ column) where `seeds` has several for a
    side on this dataset."""
    groups = sorted(items)
    out = {}
    for i, g in enumerate(groups):
        for h in groups[i + 1 :]:
            if seeds is not None and seeds.pooled(dataset, g, h):  # over seeds, or no verdict (a side lacks items)
                ci = seeds.ci(dataset, g, h)
                if ci is not None:
                    out[(g, h)] = ci
                continue
            pair_keys = None if keys is None else (keys.get(g), keys.get(h))
            try:
                out[(g, h)] = stats.paired_bootstrap(items[g], items[h], resamples=resamples, level=level, keys=pair_keys)
            except ValueError:  # too few shared items, or different aggregates: no verdict
                continue
    return out


def dataset_ranks(full: dict[int, float], cis: dict[tuple[int, int], Any],
                  significant: set[tuple[int, int]] | None = None,
                  ) -> tuple[dict[int, float], dict[int, float], dict[int, float], set[tuple[int, int]]]:  # fmt: skip
    """Per group: significance rank, rank-interval bounds; and the (better, worse) pairs. significant: the pairs
    whose difference is real after the family's correction (None: those whose CI excludes 0)."""
    groups = sorted(full)
    better: set[tuple[int, int]] = set()  # (h, g): h significantly better than g
    for (g, h), ci in cis.items():
        real = ci.excludes_zero if significant is None else (g, h) in significant
        if real and ci.difference > 0:
            better.add((h, g))
        elif real and ci.difference < 0:
            better.add((g, h))
    best = max(groups, key=lambda g: (full[g], -g))
    n_better = {g: sum((h, g) in better for h in groups) for g in groups}
    n_worse = {g: sum((g, h) in better for h in groups) for g in groups}
    ranks, lows, highs = {}, {}, {}
    for g in groups:
        tied = g == best or (best, g) not in better
        ranks[g] = 1.0 if tied else 1.0 + n_better[g]
        lows[g] = min(ranks[g], 1.0 + n_better[g])
        highs[g] = max(ranks[g], float(len(groups) - n_worse[g]))
    return ranks, lows, highs, better


def rank_groups(items: dict[str, dict[int, dict]], keys: dict[str, dict[int, Hashable]] | None = None,
                resamples: int = RESAMPLES, level: float = LEVEL, correction: str = CORRECTION,
                seeds: SeedEvidence | None = None) -> Ranks:  # fmt: skip
    """items[dataset][group] = ScoreItems dict of that group's representative run; keys[dataset][group]: what names
    that score (database, score id) so its resamples are computed once. Groups never seen get no row.

    The family: every pairwise comparison on every dataset of this call (one table's rows); a pair is different
    when its p-value after `correction` (`stats.corrected_stars`, as `bench results`) is under 1 - level, and the
    seed rule allows a verdict (`SeedEvidence.judged`: a trained side under 3 seeds never outranks or is outranked).
    With `seeds`, a pair where a side has several seeds is judged over them as `bench results` judges it
    (`seed_ci`), and a row's score on a dataset is the mean over its seeds."""
    all_groups = sorted({g for per in items.values() for g in per})
    datasets = list(items)
    frames = {name: pd.DataFrame(np.nan, index=all_groups, columns=datasets) for name in ("rank", "low", "high")}
    verdicts: dict[str, set[tuple[int, int]]] = {}
    kept = {d: {g: item for g, item in per.items() if len(item["item_ids"]) >= MIN_ITEMS} for d, per in items.items()}
    all_cis = {d: pairwise_cis(per, (keys or {}).get(d), resamples, level, seeds, d) for d, per in kept.items() if per}
    family = [(d, pair) for d, cis in all_cis.items() for pair in cis]
    starred = stats.corrected_stars([all_cis[d][pair].p for d, pair in family], correction, level,
                                    judged=[seeds is None or seeds.judged(d, *pair) for d, pair in family])  # fmt: skip
    significant = {(d, pair) for (d, pair), star in zip(family, starred) if star}
    for dataset, per in kept.items():
        if not per:
            continue
        cis = all_cis[dataset]
        full = {}
        for g, item in per.items():
            pooled = None if seeds is None else seeds.mean_score(dataset, g)
            full[g] = _score(item) if pooled is None else pooled
        ranks, lows, highs, better = dataset_ranks(full, cis, {pair for d, pair in significant if d == dataset})
        for g in per:
            frames["rank"].loc[g, dataset] = ranks[g]
            frames["low"].loc[g, dataset] = lows[g]
            frames["high"].loc[g, dataset] = highs[g]
        verdicts[dataset] = better
    return Ranks(frames["rank"], frames["rank"].mean(axis=1), frames["low"].mean(axis=1), frames["high"].mean(axis=1),
                 resamples, verdicts)  # fmt: skip
