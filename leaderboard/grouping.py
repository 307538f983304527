"""Run grouping for the leaderboard's tables (pandas, no streamlit): which runs form one row, how a row is named,
which runs the filters keep, and each seed's latest score per group.

One row per (method, backbone, budget, corpus) and, when known, the subset its runs were scored on; a reference
row (Run.kind "reference", e.g. imported MTEB results) is named by its model. Within a group each seed counts once:
when several runs share a group and a seed (a re-run), the latest run's score (highest run id) is the one kept, per
dataset.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from bench.report.pooling import declared_mark, evaluated_label, model_name, row_settings, variant_labels  # noqa: F401  (model_name: re-exported)
from leaderboard import columns

NONE_LABEL = "—"  # what an empty budget / corpus (an untrained `bench eval` run) shows as

GROUP_KEYS = ["method", "backbone", "budget", "corpus"]

REFERENCE = "reference"

TYPES = ("trained", "untrained", REFERENCE)

def _catalog_order() -> list[str]:
    try:
        from bench.data.catalog import CATALOG, STS_SUITE

        return list(STS_SUITE) + [n for n in CATALOG if n not in STS_SUITE]
    except Exception:  # noqa: BLE001 - the leaderboard still works (alphabetical order) without the catalog
        return []



DATASET_ORDER = {name: i for i, name in enumerate(_catalog_order())}



def order_datasets(datasets: list[str]) -> list[str]:
    return sorted(set(datasets), key=lambda d: (DATASET_ORDER.get(d, len(DATASET_ORDER)), d))



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
    stored = out.to_dict("records")  # each declared column (leaderboard.columns) read from what the run stored
    for column in columns.stored():
        out[column.name] = [column.value(run) for run in stored]
    out["budget"] = out["budget_label"].replace("", NONE_LABEL)
    out["corpus"] = out["train_corpus"].replace("", NONE_LABEL)
    if "in_domain" in out:  # trained on the texts of a dataset it is scored on (`--corpus beir:NAME`, `knn:NAME`)
        marked = out["in_domain"].fillna("").astype(str) != ""
        out.loc[marked, "corpus"] = "in-domain: " + out.loc[marked, "corpus"]
    out["backbone"] = out["backbone"].replace("", NONE_LABEL)
    out["backbone"] = weights_labels(out)
    out["method"] = evaluated_model_labels(out)
    out["method"] = out["method"].replace("", NONE_LABEL)
    out["method"] = hyperparameter_labels(out)
    return out


def evaluated_model_labels(runs: pd.DataFrame) -> pd.Series:
    """`bench eval` rows (kind eval, outside any `bench run` comparison) are named by the model they scored ("minilm",
    "simcse/encoder"), not "vanilla", as bench eval and bench results name them (bench.report.pooling.evaluated_label):
    a comparison's untrained row stays the reference, and an evaluated model is a row of its own with its difference
    from it. Where no comparison scored that backbone, the row scored as `bench eval --model BACKBONE` stands in as the
    reference (views.board_table)."""
    method = runs["method"].copy()
    if "comparison" not in runs or "kind" not in runs or "model" not in runs:
        return method
    in_comparison = runs["comparison"].fillna("").astype(str) != ""
    evaluated = (runs["kind"] == "eval") & (runs["method"] == "vanilla") & ~in_comparison
    evaluated &= runs["model"].astype(str) != ""
    identity = runs["model_identity"] if "model_identity" in runs else pd.Series("", index=runs.index)
    method.loc[evaluated] = [evaluated_label("vanilla", m) + declared_mark({"identity": i})  # a caller's name: marked
                             for m, i in zip(runs.loc[evaluated, "model"], identity.loc[evaluated])]  # fmt: skip
    return method


def weights_labels(runs: pd.DataFrame) -> pd.Series:
    """Evaluated models are rows by their weights, not by the name typed: where untrained runs of one (method,
    backbone) name evaluated different weights (two folders `x/enc` and `y/enc` both typed `enc`), each backbone gets
    its weights fingerprint ("enc @6952fee8"), so they never share a row."""
    backbone = runs["backbone"].copy()
    if "model_fingerprint" not in runs or "budget_label" not in runs:
        return backbone
    fp = runs["model_fingerprint"].fillna("").astype(str)
    untrained = (runs["budget_label"] == "") & (fp != "") & (runs.get("kind", pd.Series("", index=runs.index)) != REFERENCE)
    if not untrained.any():
        return backbone
    distinct = fp[untrained].groupby([runs.loc[untrained, "method"], backbone[untrained]]).transform("nunique")
    ambiguous = distinct[distinct > 1].index
    backbone.loc[ambiguous] = backbone.loc[ambiguous] + " @" + fp.loc[ambiguous].str[:8]
    return backbone



def hyperparameter_labels(runs: pd.DataFrame) -> pd.Series:
    """Method names, with the settings that tell runs of one (method, backbone, budget, corpus, subset) apart: the
    hyper-parameters (`bench run --hp`: "laser3-self (m_mode=twice)" and "laser3-self (m_mode=random)" are two
    rows, not two seeds of one), training and scoring settings ("train.lr", "eval.max_len", "emb_dtype"...). The
    settings are `row_settings` (queries.run_list: bench.report.pooling.row_settings of each run's config; a frame
    without them is read by its method_config), and the labels `pooling.variant_labels`: the one rule `bench
    results` labels and pools by, so a row here is the runs of one `pooling.row_key`. Only the settings whose values
    differ inside a group are named, so a group of identical configs keeps its name."""
    if not len(runs):
        return runs["method"]
    if "row_settings" in runs:
        settings = [s if isinstance(s, dict) else {} for s in runs["row_settings"]]
    elif "method_config" in runs:
        settings = [row_settings({"method_config": c if isinstance(c, dict) else {}}) for c in runs["method_config"]]
    else:
        return runs["method"]
    keys = [k for k in row_keys(runs) if k != "method"]
    within = [tuple(row) for row in runs[keys].astype(str).itertuples(index=False)]
    labels = variant_labels(runs["method"].astype(str).tolist(), settings, within)
    return pd.Series(labels, index=runs.index, name="method")



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

    def hidden(self, runs: pd.DataFrame) -> list[tuple[str, int]]:
        """(what hides them and the switch that shows them, how many of `runs` it hides), for each filter that
        hides any: what the page says under its tables, so nothing disappears without a word."""
        out = []
        if self.finished_only:
            out.append(("unfinished (running, failed or stale): tick 'Include unfinished runs'",
                        int((runs["status"] != "finished").sum())))  # fmt: skip
        if not self.include_subsets and "subset" in runs:
            out.append(("scored on a subset (--limit): tick 'Include runs scored on a subset'",
                        int(runs["subset"].astype(bool).sum())))  # fmt: skip
        if not self.include_references and "type" in runs:
            out.append(("imported references: tick 'Show reference rows'", int((runs["type"] == REFERENCE).sum())))
        chosen = RunFilters(self.methods, self.backbones, self.budgets, self.corpora, self.seeds, False, self.sweeps,
                            True, True)  # fmt: skip
        out.append(("left out by the 'Filter runs' selections: clear them", len(runs) - len(chosen.apply(runs))))
        return [(why, n) for why, n in out if n]



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



def split_scoring_versions(runs: pd.DataFrame, versions: pd.DataFrame) -> pd.DataFrame:
    """Runs whose scores of one suite came from different versions of its scoring (Score.info suite_version) never
    share a row: when the runs shown hold more than one version, each method is labelled with its version
    ("simcse [scoring v2]"). versions: (run_id, suite_version)."""
    if versions.empty or runs.empty:
        return runs
    of_run = runs["id"].map(versions.set_index("run_id")["suite_version"])
    if of_run.dropna().nunique() < 2:
        return runs
    out = runs.copy()
    known = of_run.notna().to_numpy()
    out.loc[known, "method"] = [f"{m} [scoring v{int(v)}]" for m, v in zip(out.loc[known, "method"], of_run[known])]
    out["scoring"] = [f"scoring v{int(v)}" if ok else "" for v, ok in zip(of_run, known)]  # the board's tables split on it
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



def shorten(text: str, width: int = 28) -> str:
    """A label cut to `width` characters with an ellipsis (the full text goes in the Run view and the downloads)."""
    text = str(text)
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"



def shorten_distinct(values: pd.Series, width: int = 28) -> pd.Series:
    """Each label cut to `width` characters, but never so that two different labels read alike: where cuts would
    collide ("vanilla (pooling=me…" twice), those labels are kept longer, up to whole."""
    texts = values.astype(str)
    unique = list(dict.fromkeys(texts))
    widths = {t: width for t in unique}
    while True:
        short = {t: shorten(t, widths[t]) for t in unique}
        seen: dict[str, list[str]] = {}
        for t, s in short.items():
            seen.setdefault(s, []).append(t)
        clashes = [ts for ts in seen.values() if len(ts) > 1]
        if not clashes:
            return texts.map(short)
        for ts in clashes:
            for t in ts:
                widths[t] = len(t) if widths[t] >= len(t) else widths[t] + 4


def group_label(frame: pd.DataFrame) -> pd.Series:
    """'method · backbone · budget · corpus', dropping the parts that are the same for every row, each part
    shortened; a subset row says its subset ('… · limit 100')."""
    varying = [k for k in GROUP_KEYS if frame[k].nunique() > 1] or ["method"]
    labels = shorten_distinct(frame[varying[0]].astype(str))
    for k in varying[1:]:
        labels = labels + " · " + shorten_distinct(frame[k].astype(str))
    if "subset" in frame:
        subset = frame["subset"].fillna("").astype(str)
        labels = labels + np.where(subset != "", " · " + subset, "")
    return labels



def with_group_keys(frame: pd.DataFrame, groups: pd.DataFrame) -> pd.DataFrame:
    """Replace the integer "group" column by the group's key columns (first)."""
    keys = groups.iloc[frame["group"].to_numpy()].reset_index(drop=True)
    return pd.concat([keys, frame.drop(columns="group").reset_index(drop=True)], axis=1)

