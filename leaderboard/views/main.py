"""Leaderboard: which method wins on which suite, under which budget. One row per (method, backbone, budget,
training corpus); a column per dataset and the suite average."""

from __future__ import annotations

import streamlit as st

from leaderboard import cache, tables
from leaderboard.queries import DBState
from leaderboard.text import literal
from leaderboard.views.common import csv_button, pick_metric, pick_suite, run_filter_widgets, show_table


@st.cache_data(show_spinner=False, max_entries=64)
def leaderboard_for(location: str, version: tuple[int, ...], suite: str, metric: str, variant: str,
                    filters: tables.RunFilters, include_parts: bool) -> tables.Leaderboard:  # fmt: skip
    runs = filters.apply(cache.runs(location, version))
    scores = cache.suite_scores(location, version, suite, (metric,), (variant,))
    return tables.build_leaderboard(scores, runs, include_parts=include_parts)


def _has_parts(state: DBState, suite: str, metric: str, variant: str) -> bool:
    scores = cache.suite_scores(state.location, state.version, suite, (metric,), (variant,))
    return bool(tables.part_datasets(scores["dataset"].unique().tolist()))


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
    filters = run_filter_widgets(runs, "main")
    include_parts = _has_parts(state, suite, metric, variant) and st.sidebar.checkbox("Show the parts of averaged datasets (cqadupstack forums)", key="main_parts")

    board = leaderboard_for(state.location, state.version, suite, metric, variant, filters, include_parts)
    st.caption(f"suite **{literal(suite)}** · metric **{literal(metric)}** · variant **{literal(variant)}**")
    if board.empty:
        st.info("No run matches these filters. Clear a filter in the sidebar, or tick 'Include unfinished runs'.")
        return
    highlight = suite not in tables.NO_BEST_SUITES
    show_table(board.cells, board.score_columns, highlight=highlight, key="main_table")
    notes = [
        f"{len(board)} rows over {int(board.info['seeds'].sum())} (group, seed) pairs.",
        "A cell is the mean over seeds, shown as mean ± std (n=seeds) when there are several; click a column header to sort.",
    ]
    if highlight:
        notes.append("Highlighted: the best value in each column.")
    else:
        notes.append("diag measures describe geometry; no value is 'best', so none is highlighted.")
    if not board.complete_average:
        notes.append("'average' is left empty for rows missing a dataset, so averages compare like with like.")
    st.caption(" ".join(notes))
    csv_button(board.csv_frame(), f"leaderboard-{suite}-{metric}-{variant}", key="main_csv")
    st.caption("Open a run in the **Run** view by its id (column 'run ids').")
