"""Which differences on the leaderboard are real: the rank's pairwise verdicts and the difference-vs-reference
column, both from `bench.report.stats` (the computation the CLI report and the Compare view use), so a pair reads
the same everywhere.

A row (group) is represented on a dataset by its latest run that stored per-item values; one run per row: the
paired bootstrap of the two representatives, as `bench results` does for one run per method; several seeds: the
Student t-interval of the per-seed differences (each seed against the reference's run of the same seed, else
the reference's first seed), as `bench results` does for several. Stars are corrected over the family a table
shows (Holm, `bench.report.stats.corrected_stars`, the function `bench results` uses).

No streamlit here: the main view caches what these return.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

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
                   groups: set[int]) -> ranking.Ranks:  # fmt: skip
    """Ranks of some groups (one partition: the full-set rows, or one subset's rows) from their representatives."""
    per_dataset = {d: {g: items[s] for g, s in per.items() if g in groups and s in items} for d, per in reps.items()}
    keys = {d: {g: key(s) for g, s in per.items() if g in groups} for d, per in reps.items()}
    per_dataset = {d: per for d, per in per_dataset.items() if per}
    return ranking.rank_groups(per_dataset, keys)


def reference_differences(long: pd.DataFrame, reference: int, rows: list[int], datasets: list[str],
                          reps: dict[str, dict[int, int]], items: dict[int, dict], key: Callable[[int], Hashable],
                          bootstrap_rows: set[int], correction: str = ranking.CORRECTION) -> dict[int, str]:  # fmt: skip
    """Per row (group code): its difference from the reference row with a 95% CI, as text ("+2.01 [1.44, 2.62]*").

    long: per (group, seed, dataset) value (`grouping.latest_per_seed`); datasets: the datasets the difference is
    taken on (one: that dataset's CI; several: the mean difference over them and how many of them exclude 0);
    bootstrap_rows: the rows whose one-run differences are bootstrapped (each costs a re-scoring). Vectorised over
    rows: 1,000 rows of several seeds take milliseconds.

    '*': the difference is real after `correction` (Holm by default; `stats.corrected_stars`, as `bench results`)
    over the family this call shows: every (row, dataset) difference from the reference. p-values: the paired
    bootstrap's (`stats.bootstrap_p`, the p `bench results` gives one run against one run) and, for several seeds,
    the t-test of the per-seed differences.
    """
    from scipy.stats import t as student


    long = long[long["dataset"].isin(datasets)]
    ref = long[long["group"] == reference]
    mine = long[long["group"].isin([g for g in rows if g != reference])]
    verdicts: dict[int, list[list]] = {}  # per row: [difference, low, high, p] per dataset
    if not ref.empty and not mine.empty:
        # each seed against the reference's run of the same seed, else the reference's first seed
        first = ref.sort_values("seed").drop_duplicates("dataset").set_index("dataset")["value"]
        same_seed = mine.merge(ref[["dataset", "seed", "value"]], on=["dataset", "seed"], how="left", suffixes=("", "_ref"))
        base = same_seed["value_ref"].fillna(same_seed["dataset"].map(first))
        diffs = same_seed.assign(diff=same_seed["value"] - base).dropna(subset=["diff"])
        per = diffs.groupby(["group", "dataset"], sort=False)["diff"].agg(["mean", "std", "count"]).reset_index()
        half = stats.t_half_width(per["std"].to_numpy(), per["count"].to_numpy())
        for g, dataset, mean, count, h in zip(per["group"], per["dataset"], per["mean"], per["count"], half):
            g = int(g)
            if count > 1:
                se = h / float(stats.t_half_width(1.0, count)) if h > 0 else 0.0  # std / sqrt(count)
                p = float(2.0 * student.sf(abs(mean) / se, count - 1)) if se > 0 else (0.0 if mean else 1.0)
                verdicts.setdefault(g, []).append([mean, mean - h, mean + h, p])
                continue
            if g not in bootstrap_rows:
                continue
            sa, sb = reps.get(dataset, {}).get(reference), reps.get(dataset, {}).get(g)
            if sa not in items or sb not in items:
                continue
            try:
                ci = stats.paired_bootstrap(items[sa], items[sb], keys=(key(sa), key(sb)))
            except ValueError:
                continue
            verdicts.setdefault(g, []).append([ci.difference, ci.low, ci.high, ci.p])
    family = [v for found in verdicts.values() for v in found]
    for v, star in zip(family, stats.corrected_stars([v[3] for v in family], correction)):
        v[3] = bool(star)
    out: dict[int, str] = {}
    for g in rows:
        found = verdicts.get(g, [])
        if g == reference:
            out[g] = "reference"
        elif not found:
            out[g] = ""
        elif len(datasets) == 1:
            d, lo, hi, sig = found[0]
            out[g] = f"{d:+.2f} [{lo:.2f}, {hi:.2f}]{'*' if sig else ''}" if not np.isnan(lo) else f"{d:+.2f}"
        else:
            mean = float(np.mean([v[0] for v in found]))
            out[g] = f"{mean:+.2f} ({sum(v[3] for v in found)}/{len(found)} datasets*)"
    return out
