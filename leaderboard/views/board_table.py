"""The main board's numbers for one choice of suite, metric, variant, filters and reference: the ranked
leaderboard (leaderboard.main_board), each variant's headline score, the difference from the reference row with its
95% CI and the rank that respects significance (leaderboard.ranking, the same paired bootstrap as Compare and
`bench results`), the runs the filters hide, and the downloads. Cached per BoardQuery; nothing here draws.

Rows scored on a `--limit` subset are never ranked, compared or merged with full-set rows: each subset is a
partition of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import streamlit as st

from bench.evaluate.attacks import order_variants
from bench.report import stats
from leaderboard import cache, columns, grouping, main_board, significance

MAX_RANKED = 20  # rows (best averages first) per table ranked by bootstrap: each costs a re-scoring per resample
MAX_BARS = 10  # rows drawn in the per-dataset bar chart
DEFAULT_REFERENCE = "vanilla"


@dataclass(frozen=True)
class BoardQuery:
    """What one main board shows: the database (its location and version), the suite, metric and variant ranked on,
    the sidebar's run filters, whether parts of averaged datasets get columns, and the reference row (None: none).
    One value, so every cached step of the view is keyed by the same thing."""

    location: str
    version: tuple[int, ...]
    suite: str
    metric: str
    variant: str
    filters: grouping.RunFilters = field(default_factory=grouping.RunFilters)
    include_parts: bool = False
    reference: str | None = None


@dataclass
class MainTable:
    """What the main view shows for one choice of suite, metric, variant, filters and reference."""

    board: main_board.Leaderboard  # ranked variant; rows of every partition (full sets first)
    headline: str  # the score column the variant columns and the difference are taken on
    variants: list[str]
    variant_mean: dict[str, np.ndarray]  # per variant: the headline score of each row (row-aligned with board)
    variant_half: dict[str, np.ndarray]
    variant_count: dict[str, np.ndarray]
    delta: list[str]  # per row: difference from its reference row with its 95% CI
    reference: str | None
    ranked_rows: int = 0
    bar_ci: dict[int, dict[str, tuple[float, float]]] = field(default_factory=dict)  # group -> dataset -> CI
    better: dict[str, set[tuple[int, int]]] = field(default_factory=dict)  # dataset -> (h, g): h significantly better
    tested: dict[str, set[int]] = field(default_factory=dict)  # dataset -> the groups the rank judged on it
    tied_best: dict[str, set[int]] = field(default_factory=dict)  # dataset -> groups of rank 1 (not worse than the best)


def _headline(board: main_board.Leaderboard) -> str:
    return board.datasets[0] if len(board.datasets) == 1 else board.score_columns[len(board.datasets)]


@st.cache_data(show_spinner=False, max_entries=64)
def main_table(query: BoardQuery) -> MainTable:
    location, version, suite, metric, variant = query.location, query.version, query.suite, query.metric, query.variant
    filters, include_parts, reference = query.filters, query.include_parts, query.reference
    limits = cache.score_limits(location, version, suite)
    runs = board_runs(location, version, suite, filters, limits)
    catalog = cache.score_catalog(location, version)
    here = catalog[(catalog["suite"] == suite) & (catalog["metric"] == metric)]
    variants = order_variants(here["variant"].tolist())
    scores = cache.suite_scores(location, version, suite, (metric,), (variant,))
    board = main_board.build_leaderboard(scores, runs, include_parts=include_parts, limits=limits, suite=suite)
    if board.empty:
        return MainTable(board, "", variants, {}, {}, {}, [], reference)
    headline = _headline(board)
    position = pd.Index(board.groups)
    means, halves, counts = {}, {}, {}
    for v in variants:
        other = board if v == variant else main_board.build_leaderboard(
            cache.suite_scores(location, version, suite, (metric,), (v,)), runs, include_parts=include_parts,
            limits=limits, suite=suite)  # fmt: skip
        if other.empty or headline not in other.score_columns:
            continue
        rows = position.get_indexer(other.groups)
        for target, frame in ((means, other.mean), (halves, other.half), (counts, other.count)):
            column = np.full(len(board), np.nan)
            ok = rows >= 0
            column[rows[ok]] = frame[headline].to_numpy(dtype=float)[ok]
            target[v] = column

    # Significance: one paired bootstrap (bench.report.stats) per pair, shared by the rank and the difference.
    with_items = cache.item_scores(location, version, suite, metric, variant)
    wanted: set[int] = set()
    for _, _, part in board.tables():
        wanted |= set(part.groups[:MAX_RANKED].tolist())
    reference_codes = reference_groups(board, reference)
    wanted |= set(reference_codes.values())
    reps = significance.representatives(with_items, runs, wanted, board.datasets)
    diff_datasets = [headline] if headline in board.datasets else list(board.datasets)
    seed_reps = significance.seed_representatives(with_items, runs, wanted, list(board.datasets))
    ids = {s for per in reps.values() for s in per.values()} | {s for per in seed_reps.values() for ss in per.values() for s in ss}
    items = cache.items_for_scores(location, version, tuple(sorted(ids)))

    def key(score_id: int) -> tuple:
        return cache.score_key(location, version, score_id)

    mean_rank = pd.Series(dtype=float)
    low, high = pd.Series(dtype=float), pd.Series(dtype=float)
    better: dict[str, set[tuple[int, int]]] = {}
    tested: dict[str, set[int]] = {}
    tied_best: dict[str, set[int]] = {}
    trained = significance.trained_groups(runs)
    seeds = significance.seed_evidence(seed_reps, items, key, trained)
    for _, _, part in board.tables():  # ranked only among rows of the same backbone and subset
        ranks = significance.rank_partition(reps, items, key, set(part.groups[:MAX_RANKED].tolist()), seeds)
        mean_rank, low, high = (pd.concat([a, b]) for a, b in ((mean_rank, ranks.mean_rank), (low, ranks.low), (high, ranks.high)))
        for dataset, pairs in ranks.better.items():
            better.setdefault(dataset, set()).update(pairs)
        for dataset in ranks.per_dataset.columns:
            judged = ranks.per_dataset[dataset].dropna().index
            tested.setdefault(str(dataset), set()).update(int(g) for g in judged)
            tied_best.setdefault(str(dataset), set()).update(int(g) for g in judged if ranks.per_dataset.loc[g, dataset] == 1)
    ranked = int(mean_rank.notna().sum())
    board = board.with_ranks(mean_rank, low, high)

    long, _ = grouping.latest_per_seed(scores[["run_id", "dataset", "value"]], runs, ["dataset"])
    delta = [""] * len(board)
    for (backbone, subset), ref_code in reference_codes.items():
        rows = [int(g) for g, b, sub in zip(board.groups, board.info["backbone"], board.subsets) if b == backbone and sub == subset]
        evidence = significance.ItemEvidence(reps, items, key, seed_reps=seed_reps or {}, trained=trained)
        texts = significance.reference_differences(long, ref_code, rows, diff_datasets, evidence,
                                                   set(board.groups[:MAX_RANKED].tolist()))  # fmt: skip
        for i, g in enumerate(board.groups):
            if int(g) in texts:
                delta[i] = texts[int(g)]
    bar_ci = _score_cis(board, reps, items, key)
    return MainTable(board, headline, variants, means, halves, counts, delta, reference, ranked, bar_ci, better, tested, tied_best)


def board_runs(location: str, version: tuple[int, ...], suite: str, filters: grouping.RunFilters,
                limits: pd.DataFrame) -> pd.DataFrame:  # fmt: skip
    """The runs of the main board: filtered, subsets marked, scoring versions of the suite kept apart."""
    runs = filters.apply(grouping.mark_subsets(cache.runs(location, version), limits)).reset_index(drop=True)
    return grouping.split_scoring_versions(runs, cache.suite_versions(location, version, suite))


def reference_groups(board: main_board.Leaderboard, reference: str | None) -> dict[tuple[str, str], int]:
    """Per (backbone, subset): the group code of its reference row, scored on the same items (the best-scoring one
    when there are several; a reference method named with hyper-parameters, "vanilla (pooling=cls)", counts)."""
    if not reference:
        return {}
    out: dict[tuple[str, str], int] = {}
    rows = list(zip(board.groups, board.info["method"], board.info["backbone"], board.subsets,
                    board.info["type"] if "type" in board.info else [""] * len(board)))  # fmt: skip
    for g, method, backbone, subset, _ in rows:
        named = method == reference or str(method).startswith(f"{reference} (")
        if named and (backbone, subset) not in out:
            out[(backbone, subset)] = int(g)
    if reference == DEFAULT_REFERENCE:  # the untrained backbone scored by `bench eval --model BACKBONE` stands in
        for g, method, backbone, subset, kind in rows:
            if kind == "untrained" and method in (backbone, grouping.model_name(backbone)) and (backbone, subset) not in out:
                out[(backbone, subset)] = int(g)
    return out


def _score_cis(board: main_board.Leaderboard, reps: dict[str, dict[int, int]], items: dict[int, dict], key) -> dict:  # noqa: ANN001
    """95% CI of each of the first rows' score per dataset: over seeds (Student t) when it has several, else the
    bootstrap percentile interval of the score itself (the same resamples as every difference)."""
    out: dict[int, dict[str, tuple[float, float]]] = {}
    for i, g in enumerate(board.groups[:MAX_BARS]):
        per: dict[str, tuple[float, float]] = {}
        for d in board.datasets:
            mean, half, count = (float(f[d].iloc[i]) for f in (board.mean, board.half, board.count))
            if count > 1 and not np.isnan(half):
                per[d] = (mean - half, mean + half)
                continue
            if count > 1:  # 2 seeds: no interval (the seed variance is not estimated; one run's would mislead)
                continue
            score_id = reps.get(d, {}).get(int(g))
            if score_id in items:
                item = items[score_id]
                _, boot = stats.resampled(item, tuple(sorted(item["item_ids"])), key(score_id))
                boot = boot[~np.isnan(boot)]
                if len(boot):
                    lo, hi = np.quantile(boot, [0.025, 0.975])
                    per[d] = (float(lo), float(hi))
        out[int(g)] = per
    return out


@st.cache_data(show_spinner=False, max_entries=16)
def downloads(query: BoardQuery) -> tuple[bytes, bytes]:
    """The whole table (every row, mean / CI / std / seeds columns, ranks, difference) as CSV and as JSON."""
    table = main_table(query)
    frame = table.board.csv_frame()
    frame = frame.drop(columns=[c.name for c in columns.COLUMNS if "download" not in c.views], errors="ignore")
    frame.insert(list(frame.columns).index("corpus") + 1, f"difference vs {table.reference}", table.delta)
    for v, values in table.variant_mean.items():
        frame[f"{table.headline} · {v}"] = values
    csv = frame.to_csv(index=False).encode("utf-8")
    json_text = frame.to_json(orient="records", indent=1, force_ascii=False)
    return csv, json_text.encode("utf-8")


@st.cache_data(show_spinner=False, max_entries=64)
def hidden_runs(location: str, version: tuple[int, ...], suite: str, metric: str, variant: str,
                filters: grouping.RunFilters) -> str:  # fmt: skip
    """'Not shown: 2 runs scored on a subset (--limit): tick ...; 1 run unfinished ...': the runs with scores on this
    suite, metric and variant that the sidebar's filters hide, counted per filter with the switch that shows them."""
    limits = cache.score_limits(location, version, suite)
    runs = grouping.mark_subsets(cache.runs(location, version), limits)
    scored = set(cache.suite_scores(location, version, suite, (metric,), (variant,))["run_id"].astype(int))
    runs = runs[runs["id"].isin(scored)]
    parts = [f"{n} run{'s' if n > 1 else ''} {why}" for why, n in filters.hidden(runs)]
    return ("Not shown: " + "; ".join(parts) + ".") if parts else ""
