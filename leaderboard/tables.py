"""The leaderboard's tables, built with pandas from long score rows (no streamlit here; tests call these directly).

Grouping: one row per (method, backbone, budget, corpus); a reference row (Run.kind "reference", e.g. imported
MTEB results) is named by its model. Within a group each seed counts once: when several runs share a group and a
seed (a re-run), the latest run's score (highest run id) is the one kept, per dataset. Across seeds a cell is the
mean with its 95% Student-t interval (as `bench.report.stats.mean_ci`) and the number of seeds.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from bench.evaluate.attacks import CLEAN  # the one definition of the clean variant's name
from bench.evaluate.suites.metadata import CQADUPSTACK_PARTS, SUITES, main_metric
from bench.report import stats

NONE_LABEL = "—"  # what an empty budget / corpus (an untrained `bench eval` run) shows as
GROUP_KEYS = ["method", "backbone", "budget", "corpus"]
AVERAGE = "average"

NO_BEST_SUITES = {name for name, meta in SUITES.items() if not meta.ranked}  # geometry: no "best" to highlight
DIAG_PLOT_METRICS = SUITES["diag"].plot_metrics
VARIANT_ORDER = [CLEAN, "elong-2", "elong-4", "elong-8", "elong-rand"]  # kept for readers; order_variants asks the attack registry
REFERENCE = "reference"
TYPES = ("trained", "untrained", REFERENCE)
# Size columns read from Run.model_info (the first key found; MTEB's ModelMeta names are accepted too).
SIZE_COLUMNS = {
    "params (M)": ("parameters", "n_parameters", "params"),
    "dim": ("embedding_dim", "embed_dim", "dim"),
    "max tokens": ("max_tokens", "max_seq_length", "max_len"),
}
CI_LEVEL = stats.DEFAULT_LEVEL
# The averages each suite's papers report: column name and the datasets it averages (all must be present).
SUITE_STANDARDS = {name: meta.averages[0] for name, meta in SUITES.items() if meta.averages}


def _catalog_order() -> list[str]:
    try:
        from bench.data.catalog import CATALOG, STS_SUITE

        return list(STS_SUITE) + [n for n in CATALOG if n not in STS_SUITE]
    except Exception:  # noqa: BLE001 - the leaderboard still works (alphabetical order) without the catalog
        return []


DATASET_ORDER = {name: i for i, name in enumerate(_catalog_order())}


class SeedMean(float):
    """A mean over seeds that also carries the half-width of its 95% interval and the seed count.

    It is a float, so the table sorts and highlights by the mean; the cell text (`label`) shows "mean ± half (n)".
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
            return f"{float(self):.{digits}f} ± {self.half:.{digits}f} (n={self.seeds})"
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
    """The metric a suite opens on (its declared main metric, `bench.evaluate.suites.metadata`)."""
    return main_metric(suite, metrics)


def order_datasets(datasets: list[str]) -> list[str]:
    return sorted(set(datasets), key=lambda d: (DATASET_ORDER.get(d, len(DATASET_ORDER)), d))


def order_variants(variants: list[str]) -> list[str]:
    """clean, then each attack family in the attack registry's order, each family's variants in their axis order
    (bench.evaluate.attacks.order_variants; elong-2, elong-4, elong-8, elong-rand as always)."""
    from bench.evaluate.attacks import order_variants as registry_order

    return registry_order(variants)


def variant_family(variant: str) -> str:
    """The attack family a stored variant belongs to ("elong", "pad", "len" ...; "" for clean, "other" unknown)."""
    from bench.evaluate.attacks import describe_variant

    return "" if variant == CLEAN else (describe_variant(variant).family or "other")


def family_axis(family: str) -> str:
    """The x axis title of a family's robustness curve (from the attack registry)."""
    from bench.evaluate.attacks import families

    return next((f.axis for f in families() if f.name == family), "variant")


def part_datasets(datasets: list[str]) -> set[str]:
    """Datasets that are parts of another one present (cqadupstack-android of cqadupstack): not own columns."""
    names = set(datasets)
    return {d for d in names if "-" in d and d.split("-", 1)[0] in names}


def group_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """Runs with the group columns as the tables show them (empty budget / corpus -> NONE_LABEL), their type
    (trained, untrained, reference), the subset their config asked for ("limit N", "" for the full sets: part of a
    row's identity, so a subset run never joins, replaces or is ranked with a full-set row), and their size columns."""
    out = runs.copy()
    kind = out["kind"] if "kind" in out else pd.Series("", index=out.index)
    reference = (kind == REFERENCE).to_numpy()
    if "model" in out and reference.any():
        named = reference & (out["model"] != "").to_numpy()
        out.loc[named, "method"] = out.loc[named, "model"]  # a reference is known by its model's name
    out["type"] = np.where(reference, REFERENCE, np.where(out["budget_label"] != "", "trained", "untrained"))
    limit = out["config_limit"] if "config_limit" in out else pd.Series(np.nan, index=out.index)
    limit = pd.to_numeric(limit, errors="coerce").fillna(0).to_numpy()
    out["subset"] = [f"limit {int(x)}" if x > 0 else "" for x in limit]
    infos = out["model_info"] if "model_info" in out else pd.Series([{}] * len(out), index=out.index)
    for column, keys in SIZE_COLUMNS.items():
        out[column] = [_size(info, keys, column) for info in infos]
    out["budget"] = out["budget_label"].replace("", NONE_LABEL)
    out["corpus"] = out["train_corpus"].replace("", NONE_LABEL)
    if "in_domain" in out:  # trained on the texts of a dataset it is scored on (`--corpus beir:NAME`, `knn:NAME`)
        marked = out["in_domain"].fillna("").astype(str) != ""
        out.loc[marked, "corpus"] = "in-domain: " + out.loc[marked, "corpus"]
    out["backbone"] = out["backbone"].replace("", NONE_LABEL)
    out["method"] = out["method"].replace("", NONE_LABEL)
    out["method"] = hyperparameter_labels(out)
    return out


def hyperparameter_labels(runs: pd.DataFrame) -> pd.Series:
    """Method names, with the hyper-parameters (`bench run --hp`) that tell runs of one (method, backbone, budget,
    corpus) apart: "laser3-self (m_mode=twice)" and "laser3-self (m_mode=random)" are two rows, not two seeds of one.
    Only the keys whose values differ inside a group are named, so a group of identical configs keeps its name."""
    if "method_config" not in runs or not len(runs):
        return runs["method"]
    configs = [c if isinstance(c, dict) else {} for c in runs["method_config"]]
    if all(not c for c in configs):
        return runs["method"]
    labels = runs["method"].to_numpy(dtype=object).copy()
    keys = [tuple(row) for row in runs[GROUP_KEYS].astype(str).itertuples(index=False)]
    positions: dict[tuple, list[int]] = {}
    for i, key in enumerate(keys):
        positions.setdefault(key, []).append(i)
    for rows in positions.values():
        if len(rows) < 2:
            continue
        seen = [{k: json.dumps(v, sort_keys=True) for k, v in configs[i].items()} for i in rows]
        varying = sorted(k for k in set().union(*seen) if len({s.get(k) for s in seen}) > 1)
        for i in rows if varying else ():
            shown = [f"{k}={_hp_value(configs[i][k]) if k in configs[i] else NONE_LABEL}" for k in varying]
            labels[i] = f"{labels[i]} ({', '.join(shown)})"
    return pd.Series(labels, index=runs.index, name="method")


def _hp_value(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _size(info: object, keys: tuple[str, ...], column: str) -> float:
    if not isinstance(info, dict):
        return np.nan
    for key in keys:
        value = info.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return float(value) / 1e6 if column == "params (M)" else float(value)
    return np.nan


@dataclass
class RunFilters:
    """The main view's filters on runs; an empty list means no restriction."""

    methods: list[str] = field(default_factory=list)
    backbones: list[str] = field(default_factory=list)
    budgets: list[str] = field(default_factory=list)
    corpora: list[str] = field(default_factory=list)
    seeds: list[int] = field(default_factory=list)
    finished_only: bool = True
    sweeps: list[str] = field(default_factory=list)  # runs of these sweeps only (Run.sweep)
    include_subsets: bool = False  # runs scored on a `--limit` subset are left out of rankings unless asked for
    include_references: bool = True

    def apply(self, runs: pd.DataFrame) -> pd.DataFrame:
        keep = pd.Series(True, index=runs.index)
        for column, chosen in (
            ("method", self.methods),
            ("backbone", self.backbones),
            ("budget", self.budgets),
            ("corpus", self.corpora),
            ("seed", self.seeds),
            ("sweep", self.sweeps),
        ):
            if chosen and column in runs:
                keep &= runs[column].isin(list(chosen))
        if self.finished_only:
            keep &= runs["status"] == "finished"
        if not self.include_subsets and "subset" in runs:
            keep &= ~runs["subset"].astype(bool)
        if not self.include_references and "type" in runs:
            keep &= runs["type"] != REFERENCE
        return runs[keep]


def mark_subsets(runs: pd.DataFrame, limits: pd.DataFrame) -> pd.DataFrame:
    """runs with "subset" also set ("limit N", N the largest subset of its scores) for runs that have a subset
    score (Score.info limit) in `limits` but no limit in their config."""
    if limits.empty:
        return runs
    out = runs.copy()
    largest = limits.groupby("run_id")["limit"].max()
    found = out["id"].map(largest)
    unlabelled = (out["subset"].astype(str) == "").to_numpy() & found.notna().to_numpy()
    out.loc[unlabelled, "subset"] = [f"limit {int(x)}" for x in found[unlabelled]]
    return out


def row_keys(runs: pd.DataFrame) -> list[str]:
    """What makes a row: the group columns and, when known, the subset its runs were scored on."""
    return [*GROUP_KEYS, "subset"] if "subset" in runs else list(GROUP_KEYS)


def coded_groups(runs: pd.DataFrame) -> tuple[np.ndarray, pd.DataFrame]:
    """Each run's group code (0..G-1, first-seen order) and the groups' key columns (row g = code g)."""
    runs = runs.reset_index(drop=True)
    keys = row_keys(runs)
    codes = runs.groupby(keys, sort=False).ngroup().to_numpy()
    groups = runs[keys].drop_duplicates().reset_index(drop=True)
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


INFO_COLUMNS = [*GROUP_KEYS, "type", "seeds", *SIZE_COLUMNS, "subset", "n", "run ids", "latest run"]


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

    def __len__(self) -> int:
        return len(self.info)

    def numeric(self) -> pd.DataFrame:
        """Plain floats (the mean over seeds) in every score column: for sorting, highlighting and tests."""
        return pd.concat([self.info, self.mean], axis=1)

    @property
    def cells(self) -> pd.DataFrame:
        """What the table shows: SeedMean cells (sort by the mean, display "mean ± half (n=seeds)")."""
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
        """The cells as text ("80.12 ± 0.40 (n=3)"), e.g. for a static HTML table."""
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
    info = pd.DataFrame(columns=INFO_COLUMNS)
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
    """Per group: "stsb[300], sts12[300]" for datasets scored on a subset, or "limit N" when only the run's config
    says so; "" for full-set groups."""
    labels: list[set[str]] = [set() for _ in range(n_groups)]
    group_of = dict(zip(run_ids.tolist(), groups_of_runs.tolist()))
    if limits is not None and not limits.empty:
        for run_id, dataset, limit in limits[["run_id", "dataset", "limit"]].itertuples(index=False):
            g = group_of.get(int(run_id))
            if g is not None:
                labels[g].add(f"{dataset}[{int(limit)}]")
    if "config_limit" in runs:
        for run_id, limit in runs.loc[runs["config_limit"].fillna(0) > 0, ["id", "config_limit"]].itertuples(index=False):
            g = group_of.get(int(run_id))
            if g is not None and not labels[g]:
                labels[g].add(f"limit {int(limit)}")
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
    for column in SIZE_COLUMNS:
        info[column] = by_id.groupby("_g")[column].last().reindex(range(n_groups)).to_numpy() if column in runs else np.nan
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
    per = pd.DataFrame({"group": long["group"], "n": n}).dropna().groupby("group")["n"].agg(["min", "max"])
    out = [""] * n_groups
    for g, lo, hi in per.itertuples():
        out[int(g)] = f"{int(lo):,}" if lo == hi else f"{int(lo):,}–{int(hi):,}"
    return out


def shorten(text: str, width: int = 28) -> str:
    """A label cut to `width` characters with an ellipsis (the full text goes in the Run view and the downloads)."""
    text = str(text)
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


def group_label(frame: pd.DataFrame) -> pd.Series:
    """'method · backbone · budget · corpus', dropping the parts that are the same for every row, each part
    shortened; a subset row says its subset ('… · limit 100')."""
    varying = [k for k in GROUP_KEYS if frame[k].nunique() > 1] or ["method"]
    labels = frame[varying[0]].astype(str).map(shorten)
    for k in varying[1:]:
        labels = labels + " · " + frame[k].astype(str).map(shorten)
    if "subset" in frame:
        subset = frame["subset"].fillna("").astype(str)
        labels = labels + np.where(subset != "", " · " + subset, "")
    return labels


def _with_group_keys(frame: pd.DataFrame, groups: pd.DataFrame) -> pd.DataFrame:
    """Replace the integer "group" column by the group's key columns (first)."""
    keys = groups.iloc[frame["group"].to_numpy()].reset_index(drop=True)
    return pd.concat([keys, frame.drop(columns="group").reset_index(drop=True)], axis=1)


def _paired_per_seed(scores: pd.DataFrame, runs: pd.DataFrame, dataset: str | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per (group, seed, variant): the attacked score and the clean score over the same datasets ("value",
    "value_clean"), and the groups. dataset None: the mean over the datasets scored both ways."""
    if dataset is not None:
        scores = scores[scores["dataset"] == dataset]
    else:
        scores = scores[~scores["dataset"].isin(part_datasets(scores["dataset"].unique().tolist()))]
    per_seed, groups = latest_per_seed(scores[["run_id", "dataset", "variant", "value"]], runs, ["dataset", "variant"])
    is_clean = (per_seed["variant"] == CLEAN).to_numpy(dtype=bool)
    columns = ["group", "seed", "variant", "value", "value_clean"]
    if not is_clean.any():
        return pd.DataFrame(columns=columns), groups
    per_seed["dataset"] = pd.factorize(per_seed["dataset"])[0]
    clean = per_seed.loc[is_clean, ["group", "seed", "dataset", "value"]]
    attacked = per_seed.loc[~is_clean, ["group", "seed", "dataset", "variant", "value"]]
    paired = attacked.merge(clean, on=["group", "seed", "dataset"], suffixes=("", "_clean"))
    if paired.empty:
        return pd.DataFrame(columns=columns), groups
    return paired.groupby(["group", "seed", "variant"], sort=False)[["value", "value_clean"]].mean().reset_index(), groups


def attack_rate_by_group(rates: pd.DataFrame, runs: pd.DataFrame, dataset: str | None = None) -> pd.DataFrame:
    """Mean fraction of texts each attack changed, per (group, variant), over the group's runs and the datasets
    shown: columns group, variant, changed_frac (group codes as `coded_groups` numbers `runs`)."""
    if rates is None or rates.empty:
        return pd.DataFrame(columns=["group", "variant", "changed_frac"])
    runs = runs.reset_index(drop=True)
    codes, _ = coded_groups(runs)
    if dataset is not None:
        rates = rates[rates["dataset"] == dataset]
    position = pd.Index(runs["id"]).get_indexer(rates["run_id"])
    mine = rates[position >= 0].assign(group=codes[position[position >= 0]])
    return mine.groupby(["group", "variant"], sort=False)["changed_frac"].mean().reset_index()


def build_robustness(scores: pd.DataFrame, runs: pd.DataFrame, dataset: str | None = None,
                     rates: pd.DataFrame | None = None) -> pd.DataFrame:  # fmt: skip
    """Clean vs attacked per group: columns clean, each variant, 'change <variant>' (attacked - clean) and, with
    `rates` (run_id, dataset, variant, changed_frac), 'changed <variant>' (fraction of texts the attack changed).

    scores: run_id, dataset, variant, value (one suite and metric). dataset None: the average over the
    datasets a run has both clean and attacked (per seed, per variant), so the change compares like with like.
    """
    empty = pd.DataFrame(columns=[*GROUP_KEYS, "seeds"])
    per_variant, groups = _paired_per_seed(scores, runs, dataset)
    if per_variant.empty:
        return empty
    per_variant["change"] = per_variant["value"] - per_variant["value_clean"]
    means = per_variant.groupby(["group", "variant"], sort=False)[["value", "value_clean", "change"]].mean()
    seeds = per_variant.groupby("group", sort=False)["seed"].nunique().rename("seeds")
    variants = order_variants(per_variant["variant"].unique().tolist())
    changed = attack_rate_by_group(rates, runs, dataset).set_index(["group", "variant"])["changed_frac"]
    out = seeds.to_frame()
    # clean column: the clean score over the datasets paired with the first attack that has them (the same set
    # for every attack unless a run lacks an attacked dataset; each change uses its own pairs either way).
    out[CLEAN] = np.nan
    for variant in variants:
        sub = means.xs(variant, level="variant")
        out[CLEAN] = out[CLEAN].fillna(sub["value_clean"])
        out[variant] = sub["value"]
        out[f"change {variant}"] = sub["change"]
    for variant in variants:
        if not changed.empty and variant in changed.index.get_level_values("variant"):
            out[f"changed {variant}"] = changed.xs(variant, level="variant").reindex(out.index)
    out = _with_group_keys(out.reset_index(), groups)
    return out.sort_values(CLEAN, ascending=False, kind="stable").reset_index(drop=True)


def variant_family(variant: str) -> str:
    """The attack family of a variant name: "elong" for elong-2 ... elong-rand (the text before the first '-')."""
    return variant.split("-", 1)[0]


def variant_m(variant: str) -> str:
    """The x position of a variant on the robustness curve: "1 (clean)", then the variant without its family prefix:
    "2", "4", "8", "rand" (elong), "start-2" (pad), "64" (needle's context lengths), "shuffle"."""
    if variant == CLEAN:
        return "1 (clean)"
    family = variant_family(variant)
    return variant.removeprefix(f"{family}-") if family not in ("", "other") else variant


def length_curve(scores: pd.DataFrame, runs: pd.DataFrame, dataset: str | None = None) -> pd.DataFrame:
    """Score vs context length per group for variants without a clean score (the needle suite's len-N): the mean
    over seeds (of the mean over datasets) with its 95% Student-t interval; columns as `robustness_curve`."""
    from bench.report.stats import mean_ci

    columns = [*GROUP_KEYS, "label", "variant", "m", "score", "low", "high", "seeds", "changed_frac"]
    if dataset is not None:
        scores = scores[scores["dataset"] == dataset]
    per_seed, groups = latest_per_seed(scores[["run_id", "dataset", "variant", "value"]], runs, ["dataset", "variant"])
    if per_seed.empty:
        return pd.DataFrame(columns=columns)
    per_seed = per_seed.groupby(["group", "seed", "variant"], sort=False)["value"].mean().reset_index()
    rows = []
    for (group, variant), values in per_seed.groupby(["group", "variant"], sort=False)["value"]:
        ci = mean_ci(values.to_numpy(dtype=float))
        rows.append({"group": group, "variant": variant, "score": ci.mean, "low": ci.low, "high": ci.high, "seeds": ci.n})
    out = pd.DataFrame(rows).assign(changed_frac=np.nan)
    out["m"] = out["variant"].map(variant_m)
    present = np.unique(out["group"].to_numpy())
    labels = pd.Series(group_label(groups.iloc[present]).to_numpy(), index=present)
    out["label"] = labels.reindex(out["group"].to_numpy()).to_numpy()
    out = _with_group_keys(out, groups)
    order = {v: i for i, v in enumerate(order_variants(out["variant"].unique().tolist()))}
    return out.sort_values(["label", "variant"], key=lambda c: c.map(order) if c.name == "variant" else c)[columns].reset_index(drop=True)


def robustness_curve(scores: pd.DataFrame, runs: pd.DataFrame, dataset: str | None = None,
                     rates: pd.DataFrame | None = None) -> pd.DataFrame:  # fmt: skip
    """Score vs m per group: one row per (group, variant incl. clean) with the mean over seeds and its 95%
    Student-t interval (`bench.report.stats.mean_ci`; no interval from one seed), the seed count and the fraction of
    texts the attack changed. Columns: GROUP_KEYS, label, variant, m, score, low, high, seeds, changed_frac, and
    row (the group's code, as `coded_groups` numbers `runs`)."""
    from bench.report.stats import mean_ci

    columns = [*GROUP_KEYS, "label", "variant", "m", "score", "low", "high", "seeds", "changed_frac", "row"]
    per_variant, groups = _paired_per_seed(scores, runs, dataset)
    if per_variant.empty:
        return pd.DataFrame(columns=columns)
    first = per_variant.drop_duplicates(["group", "seed"])  # the clean score of each seed (the paired datasets)
    clean = first[["group", "seed"]].assign(variant=CLEAN, value=first["value_clean"].to_numpy())
    long = pd.concat([clean, per_variant[["group", "seed", "variant", "value"]]], ignore_index=True)
    rows = []
    for (group, variant), values in long.groupby(["group", "variant"], sort=False)["value"]:
        ci = mean_ci(values.to_numpy(dtype=float))
        rows.append({"group": group, "variant": variant, "score": ci.mean, "low": ci.low, "high": ci.high, "seeds": ci.n})
    out = pd.DataFrame(rows)
    changed = attack_rate_by_group(rates, runs, dataset)
    out = out.merge(changed, on=["group", "variant"], how="left") if not changed.empty else out.assign(changed_frac=np.nan)
    out["m"] = out["variant"].map(variant_m)
    present = np.unique(out["group"].to_numpy())
    labels = pd.Series(group_label(groups.iloc[present]).to_numpy(), index=present)
    out["label"] = labels.reindex(out["group"].to_numpy()).to_numpy()
    out["row"] = out["group"].to_numpy()
    out = _with_group_keys(out, groups)
    order = {v: i for i, v in enumerate(order_variants(out["variant"].unique().tolist()))}
    return out.sort_values(["label", "variant"], key=lambda c: c.map(order) if c.name == "variant" else c)[columns].reset_index(drop=True)


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
