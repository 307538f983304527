"""The leaderboard's main board: one row per group (`leaderboard.grouping`), one column per dataset and the suite's
averages, best average first. Across seeds a cell is the mean with its 95% Student-t interval (as
`bench.report.stats.mean_ci`) and the number of seeds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from bench.evaluate.suites.metadata import CQADUPSTACK_PARTS, SUITES
from bench.report import stats
from leaderboard import columns
from leaderboard.grouping import GROUP_KEYS, coded_groups, latest_per_seed, order_datasets, part_datasets

AVERAGE = "average"

NO_BEST_SUITES = {name for name, meta in SUITES.items() if not meta.ranked}  # geometry: no "best" to highlight

CI_LEVEL = stats.DEFAULT_LEVEL

# The averages each suite's papers report: column name and the datasets it averages (all must be present).
SUITE_STANDARDS = {name: meta.averages[0] for name, meta in SUITES.items() if meta.averages}



class SeedMean(float):
    """A mean over seeds that also carries the half-width of its 95% interval and the seed count.

    It is a float, so the table sorts and highlights by the mean; the cell text (`label`) shows "mean ± half (3
    seeds)": the interval covers the seeds (the items' uncertainty is in the Δ column and the rank), its half-width to
    two significant digits and the mean to the same place, the precision a few seeds support. Under 3 seeds,
    "mean (2 seeds)": no interval, the seed variance is not estimated.
    """

    __slots__ = ("half", "seeds")

    def __new__(cls, mean: float, half: float, seeds: int) -> "SeedMean":
        obj = float.__new__(cls, mean)
        obj.half = half
        obj.seeds = seeds
        return obj

    def __reduce__(self):  # noqa: ANN204 - pickling (st.cache_data) must keep the interval and seeds
        return (SeedMean, (float(self), self.half, self.seeds))

    def label(self, digits: int = 2) -> str:
        if self.seeds > 1 and not math.isnan(self.half):
            places = significant_places(self.half, digits)
            return f"{float(self):.{places}f} ± {self.half:.{places}f} ({self.seeds} seeds)"
        if self.seeds > 1:  # 2 seeds: their mean, no t(1) interval
            return f"{float(self):.{digits}f} ({self.seeds} seeds)"
        return f"{float(self):.{digits}f}"


def significant_places(half: float, default: int = 2) -> int:
    """The decimal places that show `half` to two significant digits (5.17 -> 1: '5.2'; 0.251 -> 2; 12.3 -> 0),
    `default` for a zero or non-finite half-width."""
    if not math.isfinite(half) or half <= 0:
        return default
    return max(0, 1 - math.floor(math.log10(half)))



def format_cell(value: object, digits: int = 2) -> str:
    if isinstance(value, SeedMean):
        return value.label(digits)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)



def info_columns() -> list[str]:
    return [*GROUP_KEYS, "type", "seeds", *columns.names(stored_only=True), "subset", "n", "run ids", "latest run"]



@dataclass
class Leaderboard:
    """The main view's table, one row per group, best average first.

    `info` holds the group columns, type, seed count, size columns, subset flags and run ids (and, once
    `with_ranks` ran, the significance ranks); `mean`, `std`, `half` (95% CI half-width over seeds) and `count`
    (seeds behind each cell) are numeric frames with one column per dataset and the averages, row-aligned with
    `info`. `groups` holds each row's group code (as `coded_groups` numbers the filtered runs).
    """

    info: pd.DataFrame
    mean: pd.DataFrame
    std: pd.DataFrame
    half: pd.DataFrame
    count: pd.DataFrame
    score_columns: list[str]
    datasets: list[str]
    complete_average: bool  # False when some group lacks a dataset (its average is left empty)
    groups: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))
    subsets: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))  # per row: "" or "limit N"

    @property
    def empty(self) -> bool:
        return self.info.empty

    def rows(self, mask: np.ndarray) -> "Leaderboard":
        """The rows where mask is True (e.g. the full-set rows, or one subset's)."""
        keep = np.flatnonzero(np.asarray(mask, dtype=bool))
        frames = [f.iloc[keep].reset_index(drop=True) for f in (self.info, self.mean, self.std, self.half, self.count)]
        return Leaderboard(*frames, self.score_columns, self.datasets, self.complete_average, self.groups[keep],
                           self.subsets[keep])  # fmt: skip

    def partitions(self) -> list[tuple[str, "Leaderboard"]]:
        """(subset label, rows): the full-set rows ("") first, then each subset's rows; never mixed."""
        return [(label, self.rows(self.subsets == label)) for label in pd.unique(self.subsets)]

    def tables(self) -> list[tuple[str, str, "Leaderboard"]]:
        """(subset label, backbone, rows): what is ranked together, and shown as one table: rows of one backbone
        scored on the same items (the full sets first, then each subset). Rows of two backbones (a MiniLM and an
        embedding bag) are never ranked against each other. Imported reference rows (published results of other
        models) are shown and ranked beside the first backbone's rows of their subset."""
        backbones = self.info["backbone"].astype(str).to_numpy(dtype=object) if "backbone" in self.info else np.full(len(self), "", dtype=object)
        if "type" in self.info:
            reference = (self.info["type"] == "reference").to_numpy()
            for label in pd.unique(self.subsets):
                here = self.subsets == label
                own = backbones[here & ~reference]
                if len(own) and (here & reference).any():
                    backbones = backbones.copy()
                    backbones[here & reference] = own[0]
        # rows of two versions of the suite's scoring were scored differently: tables (and ranks, bests) of their own
        scoring = self.info["scoring"].fillna("").astype(str).to_numpy(dtype=object) if "scoring" in self.info else np.full(len(self), "", dtype=object)
        out = []
        for label in pd.unique(self.subsets):
            for backbone in pd.unique(backbones[self.subsets == label]):
                here = (self.subsets == label) & (backbones == backbone)
                for version in pd.unique(scoring[here]):
                    out.append((label, str(backbone), self.rows(here & (scoring == version))))
        return out

    def __len__(self) -> int:
        return len(self.info)

    def numeric(self) -> pd.DataFrame:
        """Plain floats (the mean over seeds) in every score column: for sorting, highlighting and tests."""
        return pd.concat([self.info, self.mean], axis=1)

    @property
    def cells(self) -> pd.DataFrame:
        """What the table shows: SeedMean cells (sort by the mean, display "mean ± half (3 seeds)")."""
        out = self.info.copy()
        for col in self.score_columns:
            means = self.mean[col].to_numpy(dtype=float)
            halves = self.half[col].to_numpy(dtype=float)
            counts = self.count[col].to_numpy(dtype=float)
            out[col] = pd.Series(
                [np.nan if math.isnan(m) else SeedMean(m, h, int(c)) for m, h, c in zip(means, halves, counts)],
                index=out.index,
                dtype=object,
            )
        return out

    def labels(self, digits: int = 2) -> pd.DataFrame:
        """The cells as text ("80.12 ± 0.40 (3 seeds)"), e.g. for a static HTML table."""
        out = self.info.copy()
        cells = self.cells
        for col in self.score_columns:
            out[col] = [format_cell(v, digits) for v in cells[col]]
        return out

    def csv_frame(self) -> pd.DataFrame:
        """mean, its 95% interval over seeds and the seed count as separate columns (what a spreadsheet wants)."""
        columns: dict[str, pd.Series] = {c: self.info[c] for c in self.info.columns}
        for col in self.score_columns:
            columns[col] = self.mean[col]
            columns[f"{col} ci low"] = self.mean[col] - self.half[col]
            columns[f"{col} ci high"] = self.mean[col] + self.half[col]
            columns[f"{col} std"] = self.std[col]
            columns[f"{col} seeds"] = self.count[col].astype("Int64")
        return pd.DataFrame(columns)  # one concatenation: inserting 5 columns per dataset one by one is slow

    def with_ranks(self, mean_rank: pd.Series, low: pd.Series, high: pd.Series) -> "Leaderboard":
        """A copy with "rank" (mean significance rank) and "rank 95% CI" after the group columns; the Series are
        indexed by group code."""
        info = self.info.copy()
        codes = pd.Index(self.groups)
        rank = mean_rank.reindex(codes).to_numpy(dtype=float)
        lo, hi = low.reindex(codes).to_numpy(dtype=float), high.reindex(codes).to_numpy(dtype=float)
        at = list(info.columns).index("corpus") + 1
        info.insert(at, "rank", np.round(rank, 2))
        interval = ["" if np.isnan(a) else f"{a:.1f}–{b:.1f}" for a, b in zip(lo, hi)]
        info.insert(at + 1, "rank 95% CI", interval)
        return Leaderboard(info, self.mean, self.std, self.half, self.count, self.score_columns, self.datasets,
                           self.complete_average, self.groups, self.subsets)  # fmt: skip



def _empty_leaderboard() -> Leaderboard:
    info = pd.DataFrame(columns=info_columns())
    return Leaderboard(info, pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), [], [], True)



def _group_stats(codes: np.ndarray, values: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """mean, sample std (ddof=1; NaN for one value) and count of the non-NaN values per group code."""
    ok = ~np.isnan(values)
    codes, values = codes[ok], values[ok]
    count = np.bincount(codes, minlength=n_groups).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.bincount(codes, weights=values, minlength=n_groups) / count
        deviation = values - mean[codes]  # two passes: no cancellation on scores far from 0
        std = np.sqrt(np.bincount(codes, weights=deviation * deviation, minlength=n_groups) / (count - 1))
    std[count < 2] = np.nan
    return mean, std, count



def with_cqadupstack_mean(scores: pd.DataFrame) -> pd.DataFrame:
    """Add "cqadupstack" = the unweighted mean of its 12 forums (as BEIR and MTEB report it) for runs that have
    every forum but no mean row (e.g. imported MTEB results); runs with the mean row keep theirs."""
    present = set(pd.unique(scores["dataset"]))  # (the distinct names: a set of 70,000 strings costs 0.2 s)
    if not CQADUPSTACK_PARTS or not present & set(CQADUPSTACK_PARTS):
        return scores
    forums = scores[scores["dataset"].isin(CQADUPSTACK_PARTS)]
    if forums.empty:
        return scores
    keys = [c for c in scores.columns if c not in ("dataset", "value")]
    stats = forums.groupby(keys, sort=False)["value"].agg(["mean", "count"]).reset_index()
    stats = stats[stats["count"] == len(CQADUPSTACK_PARTS)]
    have = scores.loc[scores["dataset"] == "cqadupstack", keys].drop_duplicates()
    stats = stats.merge(have, on=keys, how="left", indicator=True)
    stats = stats[stats["_merge"] == "left_only"]
    if stats.empty:
        return scores
    derived = stats[keys].assign(dataset="cqadupstack", value=stats["mean"].to_numpy())
    return pd.concat([scores, derived[scores.columns]], ignore_index=True)



def subset_labels(run_ids: np.ndarray, groups_of_runs: np.ndarray, n_groups: int, runs: pd.DataFrame,
                  limits: pd.DataFrame | None) -> list[str]:  # fmt: skip
    """Per group: "stsb (sample of 300 of 1,379), ..." for datasets scored on a subset ("stsb[300]" where the limits
    lack the label), or the config's "sample of N" / "first N" when only the run's config says so ("limit N" where
    the runs lack config_subset); "" for full-set groups."""
    labels: list[set[str]] = [set() for _ in range(n_groups)]
    group_of = dict(zip(run_ids.tolist(), groups_of_runs.tolist()))
    if limits is not None and not limits.empty:
        shown = limits["subset_label"] if "subset_label" in limits else [""] * len(limits)  # 'sample of N of M'
        for run_id, dataset, limit, label in zip(limits["run_id"], limits["dataset"], limits["limit"], shown):
            g = group_of.get(int(run_id))
            if g is not None:
                labels[g].add(f"{dataset} ({label})" if label else f"{dataset}[{int(limit)}]")
    if "config_limit" in runs:
        asked = runs["config_subset"] if "config_subset" in runs else pd.Series("", index=runs.index)
        limited = runs["config_limit"].fillna(0) > 0
        for run_id, limit, label in zip(runs.loc[limited, "id"], runs.loc[limited, "config_limit"], asked[limited]):
            g = group_of.get(int(run_id))
            if g is not None and not labels[g]:
                labels[g].add(label or f"limit {int(limit)}")
    return [", ".join(sorted(x)) for x in labels]



def build_leaderboard(scores: pd.DataFrame, runs: pd.DataFrame, include_parts: bool = False,
                      limits: pd.DataFrame | None = None, suite: str | None = None) -> Leaderboard:  # fmt: skip
    """scores: run_id, dataset, value (one suite, metric and variant); runs: grouped (see `group_runs`), filtered;
    limits: (run_id, dataset, limit) of subset scores (flags); suite: adds the average its papers report.

    Vectorised on integer codes (group, seed, dataset): 10,000 runs and 70,000 scores build in well under a second.
    """
    if runs.empty or scores.empty:
        return _empty_leaderboard()
    runs = runs.reset_index(drop=True)
    scores = with_cqadupstack_mean(scores[["run_id", "dataset", "value", *(["n"] if "n" in scores else [])]])
    # Each seed counts once per group and dataset: a re-run (same group and seed) replaces the earlier run.
    long, groups = latest_per_seed(scores, runs, ["dataset"])
    if long.empty:
        return _empty_leaderboard()
    all_datasets = pd.unique(long["dataset"]).tolist()
    parts = set() if include_parts else part_datasets(all_datasets)
    datasets = order_datasets([d for d in all_datasets if d not in parts])
    long = long[long["dataset"].isin(datasets)]

    # One row per (group, seed), one column per dataset.
    group_of, seed_of = long["group"].to_numpy(dtype=np.int64), long["seed"].to_numpy(dtype=np.int64)
    seed_codes, _ = pd.factorize(seed_of)
    pair_codes, pairs = pd.factorize(group_of * (int(seed_codes.max()) + 1) + seed_codes)
    pair_group = np.asarray(pairs) // (int(seed_codes.max()) + 1)
    column = pd.Index(datasets).get_indexer(long["dataset"])
    wide = np.full((len(pairs), len(datasets)), np.nan)
    wide[pair_codes, column] = long["value"].to_numpy(dtype=float)
    # Suite average per (group, seed): only over the full set of columns, so averages stay comparable.
    average = wide.mean(axis=1)  # NaN where a dataset is missing
    complete = bool(not np.isnan(average).any())
    averages = {AVERAGE: average}
    standard = SUITE_STANDARDS.get(suite or "")
    if standard is not None and set(standard[1]) <= set(datasets) and set(datasets) != set(standard[1]):
        # The papers' average (e.g. BEIR-14) beside the average of what is shown, when they differ.
        averages[standard[0]] = wide[:, pd.Index(datasets).get_indexer(list(standard[1]))].mean(axis=1)
    elif standard is not None and set(datasets) == set(standard[1]):
        averages = {standard[0]: average}

    n_groups = len(groups)
    score_columns = datasets + list(averages)
    mean = np.full((n_groups, len(score_columns)), np.nan)
    std, count = mean.copy(), np.zeros_like(mean)
    for j, values in enumerate([*wide.T, *averages.values()]):
        mean[:, j], std[:, j], count[:, j] = _group_stats(pair_group, values, n_groups)
    half = stats.t_half_width(std, count, CI_LEVEL)
    half[count < stats.MIN_SEEDS] = np.nan  # over 2 seeds a t(1) interval says nothing: the seed variance is not estimated

    present = np.bincount(pair_group, minlength=n_groups) > 0  # groups with at least one score
    seeds = np.bincount(pair_group, minlength=n_groups)
    run_of = long["run_id"].to_numpy(dtype=np.int64)
    span = int(run_of.max()) + 1
    keys = np.unique(group_of * span + run_of)  # sorted by group, then run id
    starts = np.searchsorted(keys // span, np.arange(n_groups + 1))
    id_text = (keys % span).astype(str).tolist()
    run_ids = [", ".join(id_text[starts[g] : starts[g + 1]]) for g in range(n_groups)]

    codes, _ = coded_groups(runs)
    subset_of_group = groups["subset"].astype(str).to_numpy() if "subset" in groups else np.full(n_groups, "")
    info = groups[list(GROUP_KEYS)].assign(seeds=seeds)
    info.insert(len(GROUP_KEYS), "type", runs.groupby(codes)["type"].first().reindex(range(n_groups)).to_numpy()
                if "type" in runs else "")  # fmt: skip
    by_id = runs.assign(_g=codes).sort_values("id")
    for column in columns.names(stored_only=True):
        info[column] = by_id.groupby("_g")[column].last().reindex(range(n_groups)).to_numpy() if column in runs else np.nan
    if "scoring" in runs:  # the version of the suite's scoring its scores came from (`grouping.split_scoring_versions`)
        info["scoring"] = runs.groupby(codes)["scoring"].first().reindex(range(n_groups)).fillna("").to_numpy()
    used = np.unique(run_of)
    used_groups = codes[pd.Index(runs["id"]).get_indexer(used)]
    labels = subset_labels(used, used_groups, n_groups, runs[runs["id"].isin(used)], limits)
    info["subset"] = [label or fallback for label, fallback in zip(labels, subset_of_group)]
    info["n"] = _n_labels(long, n_groups, datasets) if "n" in long else ""
    info["run ids"] = run_ids
    info["latest run"] = [int(id_text[starts[g + 1] - 1]) if starts[g + 1] > starts[g] else 0 for g in range(n_groups)]
    keep = np.flatnonzero(present)
    # Full-set rows first, then each subset's rows; within each, best average first and groups without a complete
    # average last (stable: ties keep first-seen order).
    first_average = len(datasets)
    subset_rank = pd.Series(subset_of_group).map(_subset_size).to_numpy()
    order = np.lexsort((np.nan_to_num(-mean[keep, first_average], nan=np.inf), subset_rank[keep]))
    keep = keep[order]
    info = info.iloc[keep].reset_index(drop=True)
    frames = [pd.DataFrame(a[keep], columns=score_columns) for a in (mean, std, half, count)]
    return Leaderboard(info, *frames, score_columns, datasets, complete, keep, subset_of_group[keep].astype(object))



def _subset_size(label: str) -> float:
    """Sort key of a row's subset: full sets (0) first, then subsets by size, largest first."""
    if not label:
        return 0.0
    try:
        return 1.0 / (1.0 + float(str(label).rsplit(" ", 1)[-1]))
    except ValueError:
        return 1.0



def _n_labels(long: pd.DataFrame, n_groups: int, datasets: list[str]) -> list[str]:
    """Per group: the items its scores rest on, "1,379" or "100–1,379" when its datasets differ (largest over seeds)."""
    n = pd.to_numeric(long["n"], errors="coerce")
    n = n.where(n > 0)  # 0: the source did not say (an imported published score), not a score over no items
    per = pd.DataFrame({"group": long["group"], "n": n}).dropna().groupby("group")["n"].agg(["min", "max"])
    out = [""] * n_groups
    for g, lo, hi in per.itertuples():
        out[int(g)] = f"{int(lo):,}" if lo == hi else f"{int(lo):,}–{int(hi):,}"
    return out

