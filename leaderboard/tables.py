"""The leaderboard's tables, built with pandas from long score rows (no streamlit here; tests call these directly).

Grouping: one row per (method, backbone, budget, corpus). Within a group each seed counts once: when several runs
share a group and a seed (a re-run), the latest run's score (highest run id) is the one kept, per dataset.
Across seeds a cell is the mean, with the sample standard deviation (ddof=1) and the number of seeds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

CLEAN = "clean"
NONE_LABEL = "—"  # what an empty budget / corpus (an untrained `bench eval` run) shows as
GROUP_KEYS = ["method", "backbone", "budget", "corpus"]
AVERAGE = "average"

# The score a suite is ranked by when the user has not picked one (SPEC §3).
PRIMARY_METRIC = {"sts": "spearman", "beir": "ndcg_at_10", "knn": "knn_acc_euclidean", "diag": "pair_cos_shift"}
# diag measures are geometry, not task scores: no "best" to highlight.
NO_BEST_SUITES = {"diag"}
DIAG_PLOT_METRICS = ("pair_cos_shift", "intra_sim_adj", "anisotropy", "positional_jsd")
VARIANT_ORDER = [CLEAN, "elong-2", "elong-4", "elong-8", "elong-rand"]


def _catalog_order() -> list[str]:
    try:
        from bench.data.catalog import CATALOG, STS_SUITE

        return list(STS_SUITE) + [n for n in CATALOG if n not in STS_SUITE]
    except Exception:  # noqa: BLE001 - the leaderboard still works (alphabetical order) without the catalog
        return []


DATASET_ORDER = {name: i for i, name in enumerate(_catalog_order())}


class SeedMean(float):
    """A mean over seeds that also carries its standard deviation and seed count.

    It is a float, so the table sorts and highlights by the mean; the cell text (`label`) shows "mean ± std (n)".
    """

    __slots__ = ("std", "seeds")

    def __new__(cls, mean: float, std: float, seeds: int) -> "SeedMean":
        obj = float.__new__(cls, mean)
        obj.std = std
        obj.seeds = seeds
        return obj

    def __reduce__(self):  # noqa: ANN204 - pickling (st.cache_data) must keep std and seeds
        return (SeedMean, (float(self), self.std, self.seeds))

    def label(self, digits: int = 2) -> str:
        if self.seeds > 1 and not math.isnan(self.std):
            return f"{float(self):.{digits}f} ± {self.std:.{digits}f} (n={self.seeds})"
        return f"{float(self):.{digits}f}"


def format_cell(value: object, digits: int = 2) -> str:
    if isinstance(value, SeedMean):
        return value.label(digits)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def primary_metric(suite: str, metrics: list[str]) -> str | None:
    if not metrics:
        return None
    wanted = PRIMARY_METRIC.get(suite) or PRIMARY_METRIC.get(suite.split(":", 1)[0])
    if wanted in metrics:
        return wanted
    if "main_score" in metrics:
        return "main_score"
    return sorted(metrics)[0]


def order_datasets(datasets: list[str]) -> list[str]:
    return sorted(set(datasets), key=lambda d: (DATASET_ORDER.get(d, len(DATASET_ORDER)), d))


def order_variants(variants: list[str]) -> list[str]:
    known = {v: i for i, v in enumerate(VARIANT_ORDER)}
    return sorted(set(variants), key=lambda v: (known.get(v, len(known)), v))


def part_datasets(datasets: list[str]) -> set[str]:
    """Datasets that are parts of another one present (cqadupstack-android of cqadupstack): not own columns."""
    names = set(datasets)
    return {d for d in names if "-" in d and d.split("-", 1)[0] in names}


def group_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """Runs with the group columns as the tables show them (empty budget / corpus -> NONE_LABEL)."""
    out = runs.copy()
    out["budget"] = out["budget_label"].replace("", NONE_LABEL)
    out["corpus"] = out["train_corpus"].replace("", NONE_LABEL)
    out["backbone"] = out["backbone"].replace("", NONE_LABEL)
    out["method"] = out["method"].replace("", NONE_LABEL)
    return out


@dataclass
class RunFilters:
    """The main view's filters on runs; an empty list means no restriction."""

    methods: list[str] = field(default_factory=list)
    backbones: list[str] = field(default_factory=list)
    budgets: list[str] = field(default_factory=list)
    corpora: list[str] = field(default_factory=list)
    seeds: list[int] = field(default_factory=list)
    finished_only: bool = True

    def apply(self, runs: pd.DataFrame) -> pd.DataFrame:
        keep = pd.Series(True, index=runs.index)
        for column, chosen in (
            ("method", self.methods),
            ("backbone", self.backbones),
            ("budget", self.budgets),
            ("corpus", self.corpora),
            ("seed", self.seeds),
        ):
            if chosen:
                keep &= runs[column].isin(list(chosen))
        if self.finished_only:
            keep &= runs["status"] == "finished"
        return runs[keep]


def coded_groups(runs: pd.DataFrame) -> tuple[np.ndarray, pd.DataFrame]:
    """Each run's group code (0..G-1, first-seen order) and the groups' key columns (row g = code g)."""
    runs = runs.reset_index(drop=True)
    codes = runs.groupby(GROUP_KEYS, sort=False).ngroup().to_numpy()
    groups = runs[GROUP_KEYS].drop_duplicates().reset_index(drop=True)
    return codes, groups


def latest_per_seed(scores: pd.DataFrame, runs: pd.DataFrame, keys: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Scores of the given runs with their integer group code and seed, keeping per (group, seed, *keys) the
    latest run's value (a re-run replaces the earlier run). Returns (scores with "group" and "seed", groups)."""
    runs = runs.reset_index(drop=True)
    codes, groups = coded_groups(runs)
    position = pd.Index(runs["id"]).get_indexer(scores["run_id"])
    mine = position >= 0
    out = scores[mine].copy()
    out["group"] = codes[position[mine]]
    out["seed"] = runs["seed"].to_numpy()[position[mine]]
    out = out.sort_values("run_id", kind="stable").drop_duplicates(["group", "seed", *keys], keep="last")
    return out.reset_index(drop=True), groups


@dataclass
class Leaderboard:
    """The main view's table, one row per group, best average first.

    `info` holds the group columns, the seed count and the run ids; `mean`, `std` and `count` (seeds behind each
    cell) are numeric frames with one column per dataset and the average, row-aligned with `info`.
    """

    info: pd.DataFrame  # GROUP_KEYS + "seeds" + "run ids"
    mean: pd.DataFrame
    std: pd.DataFrame
    count: pd.DataFrame
    score_columns: list[str]
    datasets: list[str]
    complete_average: bool  # False when some group lacks a dataset (its average is left empty)

    @property
    def empty(self) -> bool:
        return self.info.empty

    def __len__(self) -> int:
        return len(self.info)

    def numeric(self) -> pd.DataFrame:
        """Plain floats (the mean over seeds) in every score column: for sorting, highlighting and tests."""
        return pd.concat([self.info, self.mean], axis=1)

    @property
    def cells(self) -> pd.DataFrame:
        """What the table shows: SeedMean cells (sort by the mean, display "mean ± std (n=seeds)")."""
        out = self.info.copy()
        for col in self.score_columns:
            means = self.mean[col].to_numpy(dtype=float)
            stds = self.std[col].to_numpy(dtype=float)
            counts = self.count[col].to_numpy(dtype=float)
            out[col] = pd.Series(
                [np.nan if math.isnan(m) else SeedMean(m, s, int(c)) for m, s, c in zip(means, stds, counts)],
                index=out.index,
                dtype=object,
            )
        return out

    def labels(self, digits: int = 2) -> pd.DataFrame:
        """The cells as text ("80.12 ± 0.40 (n=3)"), e.g. for a static HTML table."""
        out = self.info.copy()
        cells = self.cells
        for col in self.score_columns:
            out[col] = [format_cell(v, digits) for v in cells[col]]
        return out

    def csv_frame(self) -> pd.DataFrame:
        """mean, std and seed count as separate columns (what a spreadsheet wants)."""
        out = self.info.copy()
        for col in self.score_columns:
            out[col] = self.mean[col]
            out[f"{col} std"] = self.std[col]
            out[f"{col} seeds"] = self.count[col].astype("Int64")
        return out


def _empty_leaderboard() -> Leaderboard:
    info = pd.DataFrame(columns=[*GROUP_KEYS, "seeds", "run ids"])
    return Leaderboard(info, pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), [], [], True)


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


def build_leaderboard(scores: pd.DataFrame, runs: pd.DataFrame, include_parts: bool = False) -> Leaderboard:
    """scores: run_id, dataset, value (one suite, metric and variant); runs: grouped (see `group_runs`), filtered.

    Vectorised on integer codes (group, seed, dataset): 10,000 runs and 70,000 scores build in well under a second.
    """
    if runs.empty or scores.empty:
        return _empty_leaderboard()
    # Each seed counts once per group and dataset: a re-run (same group and seed) replaces the earlier run.
    long, groups = latest_per_seed(scores[["run_id", "dataset", "value"]], runs, ["dataset"])
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

    n_groups = len(groups)
    score_columns = datasets + [AVERAGE]
    mean = np.full((n_groups, len(score_columns)), np.nan)
    std, count = mean.copy(), np.zeros_like(mean)
    for j, values in enumerate([*wide.T, average]):
        mean[:, j], std[:, j], count[:, j] = _group_stats(pair_group, values, n_groups)

    present = np.bincount(pair_group, minlength=n_groups) > 0  # groups with at least one score
    seeds = np.bincount(pair_group, minlength=n_groups)
    run_of = long["run_id"].to_numpy(dtype=np.int64)
    span = int(run_of.max()) + 1
    keys = np.unique(group_of * span + run_of)  # sorted by group, then run id
    starts = np.searchsorted(keys // span, np.arange(n_groups + 1))
    id_text = (keys % span).astype(str).tolist()
    run_ids = [", ".join(id_text[starts[g] : starts[g + 1]]) for g in range(n_groups)]

    info = groups.assign(seeds=seeds, **{"run ids": run_ids})
    keep = np.flatnonzero(present)
    # Best average first; groups without a complete average go last (stable: ties keep first-seen order).
    keep = keep[np.argsort(np.nan_to_num(-mean[keep, -1], nan=np.inf), kind="stable")]
    info = info.iloc[keep].reset_index(drop=True)
    frames = [pd.DataFrame(a[keep], columns=score_columns) for a in (mean, std, count)]
    return Leaderboard(info, *frames, score_columns, datasets, complete)


def group_label(frame: pd.DataFrame) -> pd.Series:
    """'method · backbone · budget · corpus', dropping the parts that are the same for every row."""
    varying = [k for k in GROUP_KEYS if frame[k].nunique() > 1] or ["method"]
    labels = frame[varying[0]].astype(str)
    for k in varying[1:]:
        labels = labels + " · " + frame[k].astype(str)
    return labels


def _with_group_keys(frame: pd.DataFrame, groups: pd.DataFrame) -> pd.DataFrame:
    """Replace the integer "group" column by the group's key columns (first)."""
    keys = groups.iloc[frame["group"].to_numpy()].reset_index(drop=True)
    return pd.concat([keys, frame.drop(columns="group").reset_index(drop=True)], axis=1)


def build_robustness(scores: pd.DataFrame, runs: pd.DataFrame, dataset: str | None = None) -> pd.DataFrame:
    """Clean vs attacked per group: columns clean, each variant, and 'change <variant>' (attacked - clean).

    scores: run_id, dataset, variant, value (one suite and metric). dataset None: the average over the
    datasets a run has both clean and attacked (per seed, per variant), so the change compares like with like.
    """
    empty = pd.DataFrame(columns=[*GROUP_KEYS, "seeds"])
    if dataset is not None:
        scores = scores[scores["dataset"] == dataset]
    else:
        scores = scores[~scores["dataset"].isin(part_datasets(scores["dataset"].unique().tolist()))]
    per_seed, groups = latest_per_seed(scores[["run_id", "dataset", "variant", "value"]], runs, ["dataset", "variant"])
    is_clean = (per_seed["variant"] == CLEAN).to_numpy(dtype=bool)
    if not is_clean.any():
        return empty
    per_seed["dataset"] = pd.factorize(per_seed["dataset"])[0]
    clean = per_seed.loc[is_clean, ["group", "seed", "dataset", "value"]]
    attacked = per_seed.loc[~is_clean, ["group", "seed", "dataset", "variant", "value"]]
    paired = attacked.merge(clean, on=["group", "seed", "dataset"], suffixes=("", "_clean"))
    if paired.empty:
        return empty
    per_variant = paired.groupby(["group", "seed", "variant"], sort=False)[["value", "value_clean"]].mean().reset_index()
    per_variant["change"] = per_variant["value"] - per_variant["value_clean"]
    means = per_variant.groupby(["group", "variant"], sort=False)[["value", "value_clean", "change"]].mean()
    seeds = per_variant.groupby("group", sort=False)["seed"].nunique().rename("seeds")
    variants = order_variants(per_variant["variant"].unique().tolist())
    out = seeds.to_frame()
    # clean column: the clean score over the datasets paired with the first attack that has them (the same set
    # for every attack unless a run lacks an attacked dataset; each change uses its own pairs either way).
    out[CLEAN] = np.nan
    for variant in variants:
        sub = means.xs(variant, level="variant")
        out[CLEAN] = out[CLEAN].fillna(sub["value_clean"])
        out[variant] = sub["value"]
        out[f"change {variant}"] = sub["change"]
    out = _with_group_keys(out.reset_index(), groups)
    return out.sort_values(CLEAN, ascending=False, kind="stable").reset_index(drop=True)


def robustness_long(table: pd.DataFrame) -> pd.DataFrame:
    """The robustness table as (label, variant, score) rows for the plot."""
    if table.empty:
        return pd.DataFrame(columns=["label", "variant", "score"])
    variants = [c for c in table.columns if c == CLEAN or (c.startswith("elong-"))]
    frame = table.assign(label=group_label(table))
    return frame.melt(id_vars=["label"], value_vars=variants, var_name="variant", value_name="score").dropna()


def build_diag(scores: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """diag measures per group and variant, mean over seeds: columns label, metric, variant, value, seeds."""
    keys = ["dataset", "variant", "metric"]
    per_seed, groups = latest_per_seed(scores[["run_id", *keys, "value"]], runs, keys)
    if per_seed.empty:
        return pd.DataFrame(columns=[*GROUP_KEYS, "label", "metric", "variant", "value", "seeds"])
    stats = per_seed.groupby(["group", "metric", "variant"], sort=False)["value"].agg(value="mean", seeds="count").reset_index()
    present = np.unique(stats["group"].to_numpy())
    labels = pd.Series(group_label(groups.iloc[present]).to_numpy(), index=present)
    stats["label"] = labels.reindex(stats["group"].to_numpy()).to_numpy()
    return _with_group_keys(stats, groups)
