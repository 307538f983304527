"""Which differences on the leaderboard are real: the rank's pairwise verdicts and the difference-vs-reference
column, both from `bench.report.stats` (the computation the CLI report and the Compare view use), so a pair reads
the same everywhere.

A row (group) is represented on a dataset by its latest run that stored per-item values (the rank), and by the
latest run of each of its seeds with per-item values (the difference from the reference). One run against one
run: the paired bootstrap of the two (`stats.paired_bootstrap`); several seeds on either side:
`stats.seed_item_ci` on every seed's run rescored on the same resamples of the items all of them share (between-
seed variance + item bootstrap, Welch-Satterthwaite t; under 3 seeds the item bootstrap alone, seed variance not
estimated), exactly as `bench results` computes a method's difference from its reference, with the same inputs
and p-value. The rank and the difference read a row's seeds through one `ranking.SeedEvidence` (`seed_evidence`):
which pairs are judged over seeds, their interval (`SeedEvidence.ci`) and whether a star may be given. Stars are corrected over the family a table shows (Holm, `bench.report.stats.corrected_stars`, the
function `bench results` uses).

No streamlit here: the main view caches what these return.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from bench.report import stats
from leaderboard import grouping, ranking


def representatives(with_items: pd.DataFrame, runs: pd.DataFrame, groups: set[int], datasets: list[str]
                    ) -> dict[str, dict[int, int]]:  # fmt: skip
    """score id of each wanted group's latest run with per-item values, per dataset: {dataset: {group: score_id}}.
    with_items: (score_id, run_id, dataset) of one suite, metric and variant (`queries.item_scores`)."""
    runs = runs.reset_index(drop=True)
    codes, _ = grouping.coded_groups(runs)
    position = pd.Index(runs["id"]).get_indexer(with_items["run_id"])
    mine = with_items[position >= 0].assign(group=codes[position[position >= 0]])
    mine = mine[mine["group"].isin(groups) & mine["dataset"].isin(datasets)]
    latest = mine.sort_values("run_id").drop_duplicates(["group", "dataset"], keep="last")
    out: dict[str, dict[int, int]] = {}
    for score_id, group, dataset in latest[["score_id", "group", "dataset"]].itertuples(index=False):
        out.setdefault(dataset, {})[int(group)] = int(score_id)
    return out


def rank_partition(reps: dict[str, dict[int, int]], items: dict[int, dict], key: Callable[[int], Hashable],
                   groups: set[int], seeds: ranking.SeedEvidence | None = None) -> ranking.Ranks:  # fmt: skip
    """Ranks of some groups (one partition: the full-set rows, or one subset's rows) from their representatives,
    judged over their seeds where `seeds` (`seed_evidence`) has several."""
    per_dataset = {d: {g: items[s] for g, s in per.items() if g in groups and s in items} for d, per in reps.items()}
    keys = {d: {g: key(s) for g, s in per.items() if g in groups} for d, per in reps.items()}
    per_dataset = {d: per for d, per in per_dataset.items() if per}
    return ranking.rank_groups(per_dataset, keys, seeds=seeds)


def seed_evidence(seed_reps: dict[str, dict[int, tuple[int, ...]]], items: dict[int, dict],
                  key: Callable[[int], Hashable], trained: set[int]) -> ranking.SeedEvidence:  # fmt: skip
    """The rank's seeds: each row's seed scores with per-item values (`seed_representatives`; a row missing one
    seed's values is judged on its representative alone, as `bench results` gives no interval then)."""
    found = {d: {g: list(ids) for g, ids in per.items() if all(s in items for s in ids)} for d, per in seed_reps.items()}
    return ranking.SeedEvidence(items={d: {g: [items[s] for s in ids] for g, ids in per.items()} for d, per in found.items()},
                                keys={d: {g: [key(s) for s in ids] for g, ids in per.items()} for d, per in found.items()},
                                trained=trained)  # fmt: skip


def seed_representatives(with_items: pd.DataFrame, runs: pd.DataFrame, groups: set[int], datasets: list[str]
                         ) -> dict[str, dict[int, tuple[int, ...]]]:  # fmt: skip
    """score ids of each wanted group's runs with per-item values, the latest run of each seed, in run order, per
    dataset: {dataset: {group: (score_id, ...)}} (what `bench results` pools as one method's seeds)."""
    runs = runs.reset_index(drop=True)
    codes, _ = grouping.coded_groups(runs)
    position = pd.Index(runs["id"]).get_indexer(with_items["run_id"])
    ok = position >= 0
    mine = with_items[ok].assign(group=codes[position[ok]], seed=runs["seed"].to_numpy()[position[ok]])
    mine = mine[mine["group"].isin(groups) & mine["dataset"].isin(datasets)]
    latest = mine.sort_values("run_id", kind="stable").drop_duplicates(["group", "seed", "dataset"], keep="last")
    out: dict[str, dict[int, tuple[int, ...]]] = {}
    for (dataset, group), part in latest.sort_values("run_id", kind="stable").groupby(["dataset", "group"], sort=False):
        out.setdefault(dataset, {})[int(group)] = tuple(int(s) for s in part["score_id"])
    return out


def trained_groups(runs: pd.DataFrame) -> set[int]:
    """Group codes with a training run (their runs are training seeds), as `bench results` tells a trained method
    from an untrained model scored once."""
    runs = runs.reset_index(drop=True)
    codes, _ = grouping.coded_groups(runs)
    kind = runs["kind"].to_numpy() if "kind" in runs else np.full(len(runs), "")
    return {int(c) for c, k in zip(codes, kind) if k == "train"}


@dataclass(frozen=True)
class ItemEvidence:
    """The per-item scores a row's difference from the reference is bootstrapped over: reps, per dataset each row's
    representative score id; items, score id -> its stored items; key, score id -> the key its resamples are drawn
    under; seed_reps, each row's seed runs with per-item values (`seed_representatives`; `items` must hold them);
    trained, the rows whose runs are training seeds (`trained_groups`)."""

    reps: dict[str, dict[int, int]]
    items: dict[int, dict]
    key: Callable[[int], Hashable]
    seed_reps: dict[str, dict[int, tuple[int, ...]]] = field(default_factory=dict)
    trained: frozenset[int] | set[int] = frozenset()


def reference_differences(long: pd.DataFrame, reference: int, rows: list[int], datasets: list[str],
                          evidence: ItemEvidence, bootstrap_rows: set[int],
                          correction: str = ranking.CORRECTION) -> dict[int, str]:  # fmt: skip
    """Per row (group code): its difference from the reference row with a 95% CI, as text ("+2.01 [1.44, 2.62]*").

    long: per (group, seed, dataset) value (`grouping.latest_per_seed`); datasets: the datasets the difference is
    taken on (one: that dataset's CI; several: the mean difference over them and how many of them exclude 0);
    evidence: the per-item scores (`ItemEvidence`); bootstrap_rows: the rows whose differences get an interval (each
    costs a re-scoring per run, cached per score).

    One run against one run: `stats.paired_bootstrap`; several seeds on either side: `stats.seed_item_ci` (as
    `bench results`: under 3 seeds of a trained row, the item bootstrap alone). A row without per-item values for
    every seed, or outside bootstrap_rows, shows the mean difference over seeds without an interval.
    '*': the difference is real after `correction` (Holm by default; `stats.corrected_stars`, as `bench results`)
    over the family this call shows: every (row, dataset) difference from the reference, with each one's p-value
    as `bench results` gives it; never where a trained side has fewer than 3 seeds (`stats.seed_variance_estimated`).
    """
    long = long[long["dataset"].isin(datasets)]
    ref = long[long["group"] == reference]
    mine = long[long["group"].isin([g for g in rows if g != reference])]
    reps, items, key, trained = evidence.reps, evidence.items, evidence.key, evidence.trained
    seeds = seed_evidence(evidence.seed_reps or {}, items, key, set(trained))  # as the rank reads them
    verdicts: dict[int, list[list]] = {}  # per row: [difference, low, high, p] per dataset
    found_on: dict[int, list[str]] = {}  # per row: the datasets of its verdicts
    if not ref.empty and not mine.empty:
        ref_mean = ref.groupby("dataset")["value"].mean()
        per = mine.groupby(["group", "dataset"], sort=False)["value"].agg(["mean", "count"]).reset_index()
        ref_count = ref.groupby("dataset")["value"].count()
        for g, dataset, mean, count in zip(per["group"], per["dataset"], per["mean"], per["count"]):
            g = int(g)
            if dataset not in ref_mean.index:
                continue
            plain = [float(mean - ref_mean[dataset]), np.nan, np.nan, np.nan, False]
            if g not in bootstrap_rows:
                if count > 1 or ref_count[dataset] > 1:
                    verdicts.setdefault(g, []).append(plain)
                    found_on.setdefault(g, []).append(dataset)
                continue
            both = seeds.has(dataset, reference) and seeds.has(dataset, g)
            if (both and seeds.pooled(dataset, reference, g)) or count > 1 or ref_count[dataset] > 1:
                ci = seeds.ci(dataset, reference, g)  # the rank's computation (ranking.SeedEvidence)
                judged = ci is not None and seeds.judged(dataset, reference, g)
                verdicts.setdefault(g, []).append(plain if ci is None else [ci.difference, ci.low, ci.high, ci.p, judged])
                found_on.setdefault(g, []).append(dataset)
                continue
            sa, sb = reps.get(dataset, {}).get(reference), reps.get(dataset, {}).get(g)
            if sa not in items or sb not in items:
                continue
            try:
                ci = stats.paired_bootstrap(items[sa], items[sb], keys=(key(sa), key(sb)))
            except ValueError:
                continue
            verdicts.setdefault(g, []).append([ci.difference, ci.low, ci.high, ci.p, seeds.judged(dataset, reference, g)])
            found_on.setdefault(g, []).append(dataset)
    family = [v for found in verdicts.values() for v in found]
    for v, star in zip(family, stats.corrected_stars([v[3] for v in family], correction, judged=[v[4] for v in family])):
        v[3] = bool(star)
        del v[4]
    out: dict[int, str] = {}
    for g in rows:
        found = verdicts.get(g, [])
        if g == reference:
            out[g] = "reference"
        elif not found:
            out[g] = ""
        elif len(found) == 1:  # one dataset (or the only one both rows scored): its difference and interval
            d, lo, hi, sig = found[0]
            out[g] = f"{d:+.2f} [{lo:.2f}, {hi:.2f}]{'*' if sig else ''}" if not np.isnan(lo) else f"{d:+.2f}"
            if len(datasets) > 1:
                out[g] += f" ({found_on[g][0]} only)"
        else:
            mean = float(np.mean([v[0] for v in found]))
            out[g] = f"{mean:+.2f} ({sum(v[3] for v in found)}/{len(found)} datasets*)"
    return out
