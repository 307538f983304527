"""Leaderboard: which method wins on which suite, under which budget. One row per (method, backbone, budget,
training corpus) or reference model; the suite's headline score on the clean texts beside each attacked variant,
the difference from the reference row with its 95% CI, and a rank that respects significance; then each dataset,
model size and provenance. This module draws the view from its parts: the numbers (board_table), each table's
frame and notes (board_cells) and the charts (board_charts).

Rows scored on a `--limit` subset are never ranked, compared or merged with full-set rows: when shown, each subset
gets its own table under the full-set one.
"""

from __future__ import annotations

import streamlit as st

from bench.evaluate.attacks import order_variants
from leaderboard import cache, columns, grouping, main_board
from leaderboard.queries import DBState
from leaderboard.text import literal
from leaderboard.views.board_cells import best_cells, show_notes, table_frame, table_title
from leaderboard.views.board_charts import chart_specs, show_aggregates, show_charts
from leaderboard.views.board_table import DEFAULT_REFERENCE, BoardQuery, MainTable, downloads, hidden_runs, main_table
from leaderboard.views.common import ColumnLook, csv_button, json_button, pick_metric, pick_suite, run_filter_widgets, show_table

__all__ = ["BoardQuery", "MainTable", "downloads", "main_table", "show"]

ROWS_SHOWN = (100, 500, 2000)  # the table's length choices (styling every cell costs time; the CSV has all rows)


def show(state: DBState) -> None:
    st.header("Leaderboard")
    catalog = cache.score_catalog(state.location, state.version)
    suite = pick_suite(catalog, "main")
    if suite is None:
        st.info("The runs in this database have no scores yet (runs still running, or failed before a dataset was scored).")
        return
    metric = pick_metric(catalog, suite, "main")
    here = catalog[(catalog["suite"] == suite) & (catalog["metric"] == metric)]
    variants = order_variants(here["variant"].tolist())
    variant = st.sidebar.selectbox(
        "Rank and compare on", variants, key=f"main_variant_{suite}",
        help="The variant the rank and the difference vs the reference use (elong-m: each text copied and concatenated m times). "
        "Every variant's score is shown either way.",
    )  # fmt: skip
    filters = run_filter_widgets(state, "main")
    runs = cache.runs(state.location, state.version)
    methods = sorted(runs["method"].unique().tolist())
    # "vanilla": a bench run comparison's untrained row, or (standing in) a backbone scored by `bench eval`, which
    # is labelled by its model's name (reference_groups)
    stands_in = "kind" in runs and bool(((runs["kind"] == "eval") & (runs["method"] == runs["backbone"])).any())
    default_ref = DEFAULT_REFERENCE if DEFAULT_REFERENCE in methods or stands_in else None
    reference_choices = [None, *dict.fromkeys([*([DEFAULT_REFERENCE] if default_ref else []), *methods])]
    reference = st.sidebar.selectbox(
        "Reference row (difference vs)", reference_choices, index=reference_choices.index(default_ref),
        format_func=lambda m: "none" if m is None else m, key="main_reference",
        help="Each row's difference from this method's row with the same backbone and subset (the untrained backbone "
        "by default, as `bench results`).",
    )  # fmt: skip
    has_parts = bool(grouping.part_datasets(list(cache.suite_datasets(state.location, state.version, suite, metric, variant))))
    include_parts = has_parts and st.sidebar.checkbox("Show the parts of averaged datasets (cqadupstack forums)", key="main_parts")

    query = BoardQuery(state.location, state.version, suite, metric, variant, filters, include_parts, reference)
    with st.spinner("Ranking (paired bootstrap)…"):
        table = main_table(query)
    board = table.board
    hidden = hidden_runs(state.location, state.version, suite, metric, variant, filters)
    if board.empty:
        st.info("No run matches these filters. Clear a filter in the sidebar, or tick 'Include unfinished runs' "
                "or 'Include runs scored on a subset'." + (f" {hidden}" if hidden else ""))  # fmt: skip
        return
    if hidden:
        st.caption(hidden)
    headline = table.headline
    st.caption(f"suite **{literal(suite)}** · metric **{literal(metric)}** · score columns: **{literal(headline)}** per "
               f"variant · rank and Δ on **{literal(variant)}** · click a row to open its run")  # fmt: skip
    highlight = suite not in main_board.NO_BEST_SUITES
    rows = ROWS_SHOWN[0]
    if len(board) > ROWS_SHOWN[0]:
        choices = [n for n in ROWS_SHOWN if n < len(board)] + [len(board)]
        rows = st.sidebar.selectbox("Rows shown per table (the downloads have all)", choices, key="main_rows")
    tables = board.tables()
    for number, (label, backbone, part) in enumerate(tables):
        if len(tables) > 1 or label:  # each table says what its rows share (and are ranked among)
            st.subheader(table_title(label, backbone, part))
        shown, score_columns, full = table_frame(table, part, variant, rows)
        best = best_cells(shown, score_columns, part, table, variant) if highlight and len(part) > 1 else None
        help_text = columns.help_texts()
        help_text.update({c: "shortened; full names: " + "; ".join(literal(t) for t in values) for c, values in full.items()})
        for v in table.variants:
            help_text.setdefault(v, f"{literal(headline)} on the {literal(v)} texts: mean over seeds (± 95% CI half-width over the seeds)")
        event = show_table(shown, score_columns, highlight=highlight,
                           key=f"main_table_{label or 'full'}_{abs(hash(backbone)) % 10**8}_{number}_{_nonce()}",
                           look=ColumnLook(formats=columns.formats(), pinned="method", help_text=help_text),
                           best=best, selectable=True)  # fmt: skip
        selected = _selected_row(event)
        if selected is not None and selected < len(part):
            _open_run(int(part.info["latest run"].iloc[selected]))
        if rows < len(part):
            st.caption(f"The first {rows} of {len(part)} rows (best first); pick more in the sidebar.")
    show_notes(table, highlight, variant)
    csv, json_bytes = downloads(query)
    left, right = st.columns(2)
    with left:
        csv_button(csv, f"leaderboard-{suite}-{metric}-{variant}", key="main_csv")
    with right:
        json_button(json_bytes, f"leaderboard-{suite}-{metric}-{variant}", key="main_json")
    show_charts(chart_specs(query), metric, table.headline)
    show_aggregates(query)


def _nonce() -> int:
    return int(st.session_state.get("main_table_nonce", 0))


def _selected_row(event) -> int | None:  # noqa: ANN001
    try:
        rows, cells = event.selection.rows, event.selection.cells
    except AttributeError:
        return None
    if rows:
        return int(rows[0])
    return int(cells[0][0]) if cells else None


def _open_run(run_id: int) -> None:
    """Go to the Run view on this run (the app applies it before drawing the view picker)."""
    st.session_state["goto_run"] = run_id
    st.session_state["main_table_nonce"] = _nonce() + 1  # a fresh table: no row stays selected on the way back
    st.rerun()
