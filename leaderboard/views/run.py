"""Run: everything about one run — config, provenance, budget asked vs consumed, loss curve, scores, and the
command that reproduces it."""

from __future__ import annotations

import json

import altair as alt
import pandas as pd
import streamlit as st

from bench.evaluate.attacks import CLEAN, order_variants
from bench.evaluate.subsets import labelled_dataset
from bench.report.pooling import row_label
from leaderboard import cache, grouping
from leaderboard.queries import DBState
from leaderboard.text import literal
from results_db.liveness import live_status
from leaderboard.views import curves
from leaderboard.views.common import csv_button, show_table

LONG_VALUE = 60  # characters: a summary value longer than this is also shown whole, wrapped


def score_table(scores: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """One row per (suite, dataset, metric, n): clean, each attacked variant and its change (attacked - clean); the
    dataset shows its subset (`stsb (sample of 300 of 1,379)`) when it was scored on one."""
    if scores.empty:
        return scores, []
    scores = scores.copy()
    if "info" in scores:  # a --limit subset beside its dataset: 'stsb (sample of 300 of 1,379)'
        scores["dataset"] = [labelled_dataset(d, info) for d, info in zip(scores["dataset"], scores["info"])]
    elif "limit" in scores:
        limit = pd.to_numeric(scores["limit"], errors="coerce")
        scores["dataset"] = [labelled_dataset(d, {"limit": x}) if pd.notna(x) and x > 0 else d
                             for d, x in zip(scores["dataset"], limit)]  # fmt: skip
    wide = scores.pivot_table(index=["suite", "dataset", "metric", "n"], columns="variant", values="value", aggfunc="first")
    variants = order_variants(list(wide.columns))
    wide = wide[variants]
    value_columns = list(variants)
    if CLEAN in wide.columns:
        for variant in variants:
            if variant != CLEAN:
                wide[f"change {variant}"] = wide[variant] - wide[CLEAN]
                value_columns.append(f"change {variant}")
    wide = wide.reset_index()
    wide["_order"] = wide["dataset"].map(lambda d: grouping.DATASET_ORDER.get(d.split(" (", 1)[0], len(grouping.DATASET_ORDER)))
    wide = wide.sort_values(["suite", "_order", "dataset", "metric"]).drop(columns="_order").reset_index(drop=True)
    return wide, value_columns


def budget_table(asked: dict | None, consumed: dict | None) -> pd.DataFrame:
    asked, consumed = asked or {}, consumed or {}
    kinds = list(dict.fromkeys([*asked, *consumed]))
    return pd.DataFrame(
        {"kind": kinds, "asked": [_text(asked.get(k)) for k in kinds], "consumed": [_text(consumed.get(k)) for k in kinds]}
    )


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:g}"
    return value if isinstance(value, str) else json.dumps(value)


def pick_run(runs: pd.DataFrame, key: str, label: str, default: int, where=st) -> int | None:  # noqa: ANN001
    """A run id input (runs can number in the thousands: a number box, not a list)."""
    if key in st.session_state:  # set elsewhere (a row clicked in the leaderboard): no second default
        run_id = where.number_input(label, min_value=1, step=1, key=key)
    else:
        run_id = where.number_input(label, min_value=1, value=int(default), step=1, key=key)
    if int(run_id) not in set(runs["id"].tolist()):
        where.warning(f"There is no run {int(run_id)} in this database.")
        return None
    return int(run_id)


def show(state: DBState) -> None:
    st.header("Run")
    runs = cache.runs(state.location, state.version)
    run_id = pick_run(runs, "run_id", "Run id", default=int(runs["id"].max()), where=st.sidebar)
    if run_id is None:
        return
    run = cache.run_detail(state.location, state.version, run_id)
    if run is None:
        st.warning(f"Run {run_id} is gone from the database.")
        return
    # Everything below that came from the database is shown literally (leaderboard.text).
    label = row_label(run)  # a `bench eval` row by the model it scored, as the main board names it
    st.subheader(f"run {run_id} · {literal(label or grouping.NONE_LABEL)} · {literal(run['backbone'] or run['model'])}", anchor=False)
    status = live_status(dict(run))  # "stale" (process gone) or "stalled" (no progress for minutes) apart from running
    show_status = st.error if status == "failed" else st.warning if status in ("stale", "stalled") else st.info if status == "running" else st.success
    show_status(f"status: {literal(status)}")
    if run.get("error"):
        st.code(run["error"], language=None, wrap_lines=True)
    summary = pd.DataFrame(
        [
            ("kind", run["kind"]), ("model", run["model"]), ("method", run["method"]), ("backbone", run["backbone"]),
            ("suite", run["suite"]), ("training corpus", run["train_corpus"] or grouping.NONE_LABEL),
            ("budget", run["budget_label"] or grouping.NONE_LABEL), ("seed", str(run["seed"])),
            ("config hash", run["config_hash"]), ("output dir", run["output_dir"]),
            ("started", str(run["started_at"])), ("finished", str(run["finished_at"] or "")),
            ("sweep", run.get("sweep") or ""), ("sweep point", run.get("sweep_point") or ""),
        ],
        columns=["field", "value"],
    )  # fmt: skip
    summary["value"] = summary["value"].astype(str)
    st.dataframe(summary, hide_index=True, key="run_summary", width="stretch",
                 column_config={"field": st.column_config.TextColumn(width="small")})  # fmt: skip
    long = summary[summary["value"].str.len() > LONG_VALUE]
    if not long.empty:  # what the table (and the leaderboard) cut short, whole
        st.code("\n".join(f"{f}: {v}" for f, v in zip(long["field"], long["value"])), language=None, wrap_lines=True)

    st.markdown("**Reproduce**")
    st.code(run["command"] or "(no command recorded)", language="bash", wrap_lines=True)  # wrapped; copy button

    left, right = st.columns(2)
    with left:
        st.markdown("**Budget: asked vs consumed**")
        budget = budget_table(run.get("budget_asked"), run.get("budget_consumed"))
        if budget.empty:
            st.caption("No budget: this run did not train.")
        else:
            st.dataframe(budget, hide_index=True, key="run_budget")
            csv_button(budget, f"run-{run_id}-budget", key="run_budget_csv")
        st.markdown("**Config**")
        st.json(run.get("config") or {}, expanded=False)
    with right:
        st.markdown("**Provenance**")
        st.caption("code version")
        st.code(run["code_version"] or "unknown", language=None)
        packages = pd.DataFrame(sorted((run.get("package_versions") or {}).items()), columns=["package", "version"])
        st.dataframe(packages, hide_index=True, key="run_packages")
        st.markdown("data fingerprint")
        st.json(run.get("data_fingerprint") or {}, expanded=False)

    st.markdown("**Training loss**")
    log = cache.train_log(state.location, state.version, run_id)
    if log.empty:
        st.caption("No training log: an evaluation-only run, or training logged nothing yet.")
    else:
        chart = (
            alt.Chart(log)
            .mark_line()
            .encode(x=alt.X("step:Q"), y=alt.Y("loss:Q", scale=alt.Scale(zero=False)), tooltip=["step", "loss", "lr", "examples_per_s"])
            .properties(height=260)
        )
        st.altair_chart(chart, width="stretch")
        csv_button(log, f"run-{run_id}-train-log", key="run_log_csv")

    curves.show(state, [run_id], key="run")

    st.markdown("**Scores**")
    scores = cache.run_scores(state.location, state.version, run_id)
    table, value_columns = score_table(scores)
    if table.empty:
        st.caption("No scores yet.")
    else:
        show_table(table, value_columns, highlight=False, key="run_scores")
        csv_button(table, f"run-{run_id}-scores", key="run_scores_csv")
        show_items(state, run_id, scores)


def show_items(state: DBState, run_id: int, scores: pd.DataFrame) -> None:
    """The per-item values of one score of the run, where they are stored (queries, pairs or test texts: each one's
    value and gold), as a table and a CSV: what the bootstrap intervals resample."""
    stored = scores[scores["has_items"].astype(bool)] if "has_items" in scores else scores.iloc[0:0]
    with st.expander("Per-item values", expanded=False):
        if stored.empty:
            st.caption("No per-item values stored for this run's scores (an imported score, or one older than them).")
            return
        labels = [f"{r.suite} · {r.dataset} · {r.metric} · {r.variant}" for r in stored.itertuples()]
        choice = st.selectbox("Score", range(len(labels)), format_func=lambda i: labels[i], key="run_items_score")
        score_id = int(stored["score_id"].iloc[int(choice or 0)])
        items = cache.items_for_scores(state.location, state.version, (score_id,)).get(score_id)
        if not items:
            st.caption("This score's per-item values are gone from the database.")
            return
        table = item_table(items)
        st.dataframe(table, hide_index=True, key="run_items", width="stretch")
        rebuilt = "100 x Spearman of value against gold" if items.get("aggregate") == "spearman" else "their mean"
        st.caption(f"{len(table):,} items; the score is {rebuilt} (what the bootstrap intervals resample).")
        csv_button(table, f"run-{run_id}-items-{labels[int(choice or 0)]}", key="run_items_csv")


def item_table(items: dict) -> pd.DataFrame:
    """One row per stored item: its id, its value and, where the score keeps one, its gold."""
    values = list(items.get("values") or [])
    ids = list(items.get("item_ids") or range(len(values)))
    table = pd.DataFrame({"item": [str(i) for i in ids], "value": values})
    gold = items.get("gold")
    if gold is not None and len(gold) == len(values):
        table["gold"] = list(gold)
    return table
