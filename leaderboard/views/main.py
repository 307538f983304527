"""Leaderboard: which method wins on which suite, under which budget. One row per (method, backbone, budget,
training corpus) or reference model; a column per dataset, the suite averages as its papers report them, model
size, subset flags and a rank that respects significance (leaderboard.ranking)."""

from __future__ import annotations

import hashlib

import pandas as pd
import streamlit as st

from leaderboard import cache, ranking, tables
from leaderboard.queries import DBState
from leaderboard.text import literal
from leaderboard.views.common import csv_button, pick_metric, pick_suite, run_filter_widgets, show_table

MAX_RANKED = 20  # rows (best averages first) ranked by bootstrap: each costs a re-scoring per resample
N_CAPTION_ROWS = 50  # the n caption reads the scores of this many rows' runs
ROWS_SHOWN = (100, 500, 2000)  # the table's length choices (styling every cell costs time; the CSV has all rows)


@st.cache_data(show_spinner=False, max_entries=64)
def leaderboard_for(location: str, version: tuple[int, ...], suite: str, metric: str, variant: str,
                    filters: tables.RunFilters, include_parts: bool) -> tuple[tables.Leaderboard, str]:  # fmt: skip
    """The table (with ranks) and its n caption."""
    limits = cache.score_limits(location, version, suite)
    runs = filters.apply(tables.mark_subsets(cache.runs(location, version), limits))
    scores = cache.suite_scores(location, version, suite, (metric,), (variant,))
    board = tables.build_leaderboard(scores, runs, include_parts=include_parts, limits=limits, suite=suite)
    if board.empty:
        return board, ""
    ranks = _ranks(location, version, suite, metric, variant, board, runs)
    return board.with_ranks(ranks.mean_rank, ranks.low, ranks.high), _n_caption(location, version, suite, metric, variant, board)


@st.cache_data(show_spinner=False, max_entries=16)
def leaderboard_csv(location: str, version: tuple[int, ...], suite: str, metric: str, variant: str,
                    filters: tables.RunFilters, include_parts: bool) -> bytes:  # fmt: skip
    """The whole table as CSV (every row, mean / CI / std / seeds columns), made once per choice."""
    board, _ = leaderboard_for(location, version, suite, metric, variant, filters, include_parts)
    return board.csv_frame().to_csv(index=False).encode("utf-8")


def _ranks(location: str, version: tuple[int, ...], suite: str, metric: str, variant: str,
           board: tables.Leaderboard, runs: pd.DataFrame) -> ranking.Ranks:  # fmt: skip
    """Ranks of the first MAX_RANKED rows, each group represented by its latest run with per-item values."""
    with_items = cache.item_scores(location, version, suite, metric, variant)
    runs = runs.reset_index(drop=True)
    codes, _ = tables.coded_groups(runs)
    ranked = set(board.groups[:MAX_RANKED].tolist())
    position = pd.Index(runs["id"]).get_indexer(with_items["run_id"])
    mine = with_items[position >= 0].assign(group=codes[position[position >= 0]])
    mine = mine[mine["group"].isin(ranked) & mine["dataset"].isin(board.datasets)]
    latest = mine.sort_values("run_id").drop_duplicates(["group", "dataset"], keep="last")
    values = cache.items_for_scores(location, version, tuple(int(i) for i in latest["score_id"]))
    items: dict[str, dict[int, tuple[int, dict]]] = {}
    for score_id, group, dataset in latest[["score_id", "group", "dataset"]].itertuples(index=False):
        if int(score_id) in values:
            items.setdefault(dataset, {})[int(group)] = (int(score_id), values[int(score_id)])
    scores: dict[str, dict[int, tuple[float, object]]] = {}
    for dataset, per in items.items():
        common = ranking.common_items({g: item for g, (_, item) in per.items()})
        if len(common) < ranking.MIN_ITEMS:
            continue
        key = hashlib.sha1("\n".join(common).encode("utf-8")).hexdigest()
        scores[dataset] = {g: cache.score_resamples(location, version, sid, key, item, common) for g, (sid, item) in per.items()}
    empty = pd.Series(dtype=float)
    if not scores:
        return ranking.Ranks(pd.DataFrame(), empty, empty, empty, 0)
    return ranking.ranks_from_scores(scores)


def _has_parts(state: DBState, suite: str, metric: str, variant: str) -> bool:
    return bool(tables.part_datasets(list(cache.suite_datasets(state.location, state.version, suite, metric, variant))))


def _n_caption(location: str, version: tuple[int, ...], suite: str, metric: str, variant: str, board: tables.Leaderboard) -> str:
    """'n: sts12 80 · stsb 80': the usual number of items behind each dataset's score in the first rows."""
    ids = sorted({int(i) for text in board.info["run ids"].head(N_CAPTION_ROWS) for i in text.split(", ") if i})
    n = cache.score_n(location, version, suite, metric, variant, tuple(ids))
    n = n[n["dataset"].isin(board.datasets)]
    if n.empty:
        return ""
    usual = n.groupby("dataset")["n"].agg(lambda v: int(v.mode().iloc[0]))
    parts = [f"{literal(d)} {usual[d]:,}" for d in board.datasets if d in usual.index and usual[d] > 0]
    return ("n (items per dataset): " + " · ".join(parts)) if parts else ""


def show(state: DBState) -> None:
    st.header("Leaderboard")
    runs = cache.runs(state.location, state.version)
    catalog = cache.score_catalog(state.location, state.version)
    suite = pick_suite(catalog, "main")
    if suite is None:
        st.info("The runs in this database have no scores yet (runs still running, or failed before a dataset was scored).")
        return
    metric = pick_metric(catalog, suite, "main")
    here = catalog[(catalog["suite"] == suite) & (catalog["metric"] == metric)]
    variants = tables.order_variants(here["variant"].tolist())
    variant = st.sidebar.selectbox(
        "Variant (clean or attacked)", variants, key=f"main_variant_{suite}", help="elong-m: texts elongated m times (SPEC §3)"
    )
    filters = run_filter_widgets(state, "main")
    include_parts = _has_parts(state, suite, metric, variant) and st.sidebar.checkbox("Show the parts of averaged datasets (cqadupstack forums)", key="main_parts")

    with st.spinner("Ranking (paired bootstrap)…"):
        board, n_caption = leaderboard_for(state.location, state.version, suite, metric, variant, filters, include_parts)
    st.caption(f"suite **{literal(suite)}** · metric **{literal(metric)}** · variant **{literal(variant)}**")
    if board.empty:
        st.info("No run matches these filters. Clear a filter in the sidebar, or tick 'Include unfinished runs' "
                "or 'Include runs scored on a subset'.")  # fmt: skip
        return
    highlight = suite not in tables.NO_BEST_SUITES
    shown = len(board)
    if len(board) > ROWS_SHOWN[0]:
        choices = [n for n in ROWS_SHOWN if n < len(board)] + [len(board)]
        shown = st.sidebar.selectbox("Rows shown (the CSV has all)", choices, key="main_rows")
    cells = board.cells.head(shown)
    # Columns that say nothing here stay out of the (wide) table: type without reference rows, an empty subset.
    if (cells["type"] != tables.REFERENCE).all():
        cells = cells.drop(columns="type")
    if not cells["subset"].astype(bool).any():
        cells = cells.drop(columns="subset")
    # The averages and then each dataset right after the row's name and rank (what a reader compares, visible
    # without scrolling sideways); provenance columns after them.
    averages = [c for c in board.score_columns if c not in board.datasets]
    front = [c for c in (*tables.GROUP_KEYS, "rank", "rank 95% CI") if c in cells] + averages + board.datasets
    cells = cells[front + [c for c in cells.columns if c not in front]]
    size_format = {"params (M)": "%.1f", "dim": "%d", "max tokens": "%d", "rank": "%.2f", "seeds": "%d"}
    # The best of each column over every row, not only the rows shown.
    best = {c: float(board.mean[c].max()) for c in board.score_columns} if highlight and len(board) > 1 else None
    show_table(cells, board.score_columns, highlight=highlight, key="main_table", formats=size_format, pinned="method", best=best)
    if shown < len(board):
        st.caption(f"The first {shown} of {len(board)} rows (best average first); pick more in the sidebar.")
    notes = [
        f"{len(board)} rows over {int(board.info['seeds'].sum())} (group, seed) pairs.",
        "A cell is the mean over seeds, shown as mean ± 95% CI half-width (n=seeds, Student t) when there are "
        "several; click a column header to sort.",
    ]
    if highlight:
        notes.append("Highlighted: the best value in each column.")
    else:
        notes.append("diag measures describe geometry; no value is 'best', so none is highlighted.")
    if not board.complete_average:
        notes.append("Averages are left empty for rows missing a dataset, so averages compare like with like.")
    st.caption(" ".join(notes))
    ranked = board.info["rank"].notna().sum() if "rank" in board.info else 0
    if ranked:
        st.caption(
            f"rank: per dataset, rows whose paired-bootstrap 95% CI against the best covers 0 are tied with it (rank "
            f"1); any other row is 1 + the rows significantly better than it; shown as the mean over datasets. "
            f"rank 95% CI: from the same pairwise CIs ({ranking.RESAMPLES} resamples), the best rank a row can have "
            "(1 + rows significantly better) to the worst (rows − rows significantly worse), averaged over datasets. "
            f"Needs per-item scores; the {MAX_RANKED} best rows by average are ranked."
        )
    else:
        st.caption("rank: no per-item scores stored for these runs, so no significance rank.")
    if n_caption:
        st.caption(n_caption)
    if board.info["subset"].astype(bool).any():
        st.warning("Rows with a 'subset' entry were scored on a subset (--limit): not comparable with full-set rows.")
    csv = leaderboard_csv(state.location, state.version, suite, metric, variant, filters, include_parts)
    csv_button(csv, f"leaderboard-{suite}-{metric}-{variant}", key="main_csv")
    st.caption("Open a run in the **Run** view by its id (column 'run ids'). Size columns come from the model "
               "(blank when the run did not record them).")  # fmt: skip

