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


def latest_per_seed(scores: pd.DataFrame, runs: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Join scores to their runs' groups and keep, per (group, seed, *keys), the latest run's value."""
    merged = scores.merge(runs[["id", "seed", *GROUP_KEYS]], left_on="run_id", right_on="id", how="inner")
    merged = merged.sort_values("run_id")
    return merged.drop_duplicates(subset=[*GROUP_KEYS, "seed", *keys], keep="last")


def _seed_stats(per_seed: pd.DataFrame, column: str) -> pd.DataFrame:
    """mean / std / seeds of `value` per (group, column) from one value per (group, seed, column)."""
    stats = per_seed.groupby([*GROUP_KEYS, column], sort=False)["value"].agg(["mean", "std", "count"])
    return stats.reset_index()


@dataclass
class Leaderboard:
    """The main view's table: `cells` holds SeedMean per dataset / average column; `columns` their order."""

    cells: pd.DataFrame  # GROUP_KEYS + seeds + run ids + score columns
    score_columns: list[str]
    datasets: list[str]
    complete_average: bool  # False when some group lacks a dataset (its average is left empty)

    @property
    def empty(self) -> bool:
        return self.cells.empty

    def numeric(self) -> pd.DataFrame:
        """Plain floats (the mean) in every score column: for sorting, highlighting and tests."""
        out = self.cells.copy()
        for col in self.score_columns:
            out[col] = pd.to_numeric(out[col].map(lambda v: float(v) if v is not None else np.nan), errors="coerce")
        return out

    def csv_frame(self) -> pd.DataFrame:
        """mean, std and seed count as separate columns (what a spreadsheet wants)."""
        out = self.cells[[c for c in self.cells.columns if c not in self.score_columns]].copy()
        for col in self.score_columns:
            values = self.cells[col]
            out[col] = [float(v) if isinstance(v, float) else np.nan for v in values]
            out[f"{col} std"] = [v.std if isinstance(v, SeedMean) else np.nan for v in values]
        return out


def build_leaderboard(scores: pd.DataFrame, runs: pd.DataFrame, include_parts: bool = False) -> Leaderboard:
    """scores: run_id, dataset, value (one suite, metric and variant); runs: grouped (see `group_runs`), filtered."""
    per_seed = latest_per_seed(scores[["run_id", "dataset", "value"]], runs, ["dataset"])
    if per_seed.empty:
        return Leaderboard(pd.DataFrame(columns=[*GROUP_KEYS, "seeds", "run ids"]), [], [], True)
    all_datasets = per_seed["dataset"].unique().tolist()
    parts = set() if include_parts else part_datasets(all_datasets)
    datasets = order_datasets([d for d in all_datasets if d not in parts])
    per_seed = per_seed[per_seed["dataset"].isin(datasets)]

    # Suite average per (group, seed): only over the full set of columns, so averages stay comparable.
    wide = per_seed.pivot_table(index=[*GROUP_KEYS, "seed"], columns="dataset", values="value", aggfunc="first")
    wide = wide.reindex(columns=datasets)
    average = wide.mean(axis=1, skipna=False).rename("value").reset_index()
    average["dataset"] = AVERAGE
    complete = bool(average["value"].notna().all())
    long = pd.concat([per_seed[[*GROUP_KEYS, "seed", "dataset", "value"]], average.dropna(subset=["value"])])

    stats = _seed_stats(long, "dataset")
    stats["cell"] = [SeedMean(m, s, int(c)) for m, s, c in zip(stats["mean"], stats["std"], stats["count"])]
    cells = stats.pivot(index=GROUP_KEYS, columns="dataset", values="cell")
    score_columns = datasets + [AVERAGE]
    cells = cells.reindex(columns=score_columns).astype(object)

    info = per_seed.groupby(GROUP_KEYS, sort=False).agg(
        seeds=("seed", "nunique"), run_ids=("run_id", lambda ids: ", ".join(str(i) for i in sorted(set(ids))))
    )
    table = info.join(cells).reset_index().rename(columns={"run_ids": "run ids"})
    table = table[[*GROUP_KEYS, "seeds", "run ids", *score_columns]]
    # Best average first; groups without a complete average go last.
    order = table[AVERAGE].map(lambda v: -float(v) if isinstance(v, float) and not math.isnan(v) else math.inf)
    table = table.iloc[np.argsort(order.to_numpy(), kind="stable")].reset_index(drop=True)
    for col in score_columns:
        table[col] = table[col].map(lambda v: v if isinstance(v, SeedMean) else np.nan).astype(object)
    return Leaderboard(table, score_columns, datasets, complete)


def group_label(frame: pd.DataFrame) -> pd.Series:
    """'method · backbone · budget · corpus', dropping the parts that are the same for every row."""
    varying = [k for k in GROUP_KEYS if frame[k].nunique() > 1] or ["method"]
    return frame[varying].astype(str).agg(" · ".join, axis=1)


def build_robustness(scores: pd.DataFrame, runs: pd.DataFrame, dataset: str | None = None) -> pd.DataFrame:
    """Clean vs attacked per group: columns clean, each variant, and 'change <variant>' (attacked - clean).

    scores: run_id, dataset, variant, value (one suite and metric). dataset None: the average over the
    datasets a run has both clean and attacked (per seed, per variant), so the change compares like with like.
    """
    if dataset is not None:
        scores = scores[scores["dataset"] == dataset]
    else:
        scores = scores[~scores["dataset"].isin(part_datasets(scores["dataset"].unique().tolist()))]
    per_seed = latest_per_seed(scores[["run_id", "dataset", "variant", "value"]], runs, ["dataset", "variant"])
    if per_seed.empty or CLEAN not in set(per_seed["variant"]):
        return pd.DataFrame(columns=[*GROUP_KEYS, "seeds"])
    clean = per_seed[per_seed["variant"] == CLEAN][[*GROUP_KEYS, "seed", "dataset", "value"]]
    attacked = per_seed[per_seed["variant"] != CLEAN]
    paired = attacked.merge(clean, on=[*GROUP_KEYS, "seed", "dataset"], suffixes=("", "_clean"))
    if paired.empty:
        return pd.DataFrame(columns=[*GROUP_KEYS, "seeds"])
    per_variant = paired.groupby([*GROUP_KEYS, "seed", "variant"], sort=False)[["value", "value_clean"]].mean().reset_index()
    per_variant["change"] = per_variant["value"] - per_variant["value_clean"]
    means = per_variant.groupby([*GROUP_KEYS, "variant"], sort=False)[["value", "value_clean", "change"]].mean()
    seeds = per_variant.groupby(GROUP_KEYS, sort=False)["seed"].nunique().rename("seeds")
    variants = order_variants(per_variant["variant"].unique().tolist())
    out = seeds.to_frame()
    # clean column: the clean score over the datasets paired with the first variant (the same set for all,
    # unless a run lacks an attacked dataset; each change uses its own pairs either way).
    out[CLEAN] = means["value_clean"].groupby(level=GROUP_KEYS).first()
    for variant in variants:
        sub = means.xs(variant, level="variant")
        out[variant] = sub["value"]
        out[f"change {variant}"] = sub["change"]
    out = out.reset_index()
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
    per_seed = latest_per_seed(scores[["run_id", "dataset", "variant", "metric", "value"]], runs, ["dataset", "variant", "metric"])
    if per_seed.empty:
        return pd.DataFrame(columns=[*GROUP_KEYS, "label", "metric", "variant", "value", "seeds"])
    stats = per_seed.groupby([*GROUP_KEYS, "metric", "variant"], sort=False)["value"].agg(value="mean", seeds="count").reset_index()
    stats["label"] = group_label(stats)
    return stats
