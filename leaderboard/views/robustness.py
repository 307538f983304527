"""Robustness: how much each method loses when texts are elongated, and what the length diagnostics say."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from leaderboard import cache, tables
from leaderboard.queries import DBState
from leaderboard.text import literal
from leaderboard.views.common import csv_button, pick_metric, pick_suite, run_filter_widgets, show_table

AVERAGE_CHOICE = "suite average"
MAX_DIAG_RUNS = 200  # runs offered for the pair-cosine distribution (newest first)
MAX_PLOT_GROUPS = 30  # groups drawn in a plot (the tables below them list every group)


@st.cache_data(show_spinner=False, max_entries=64)
def robustness_for(location: str, version: tuple[int, ...], suite: str, metric: str, dataset: str | None,
                   filters: tables.RunFilters) -> pd.DataFrame:  # fmt: skip
    runs = filters.apply(cache.runs(location, version))
    scores = cache.suite_scores(location, version, suite, (metric,), ())
    return tables.build_robustness(scores, runs, dataset)


@st.cache_data(show_spinner=False, max_entries=64)
def diag_for(location: str, version: tuple[int, ...], filters: tables.RunFilters) -> pd.DataFrame:
    runs = filters.apply(cache.runs(location, version))
    scores = cache.suite_scores(location, version, "diag", tables.DIAG_PLOT_METRICS, ())
    return tables.build_diag(scores, runs)


def show(state: DBState) -> None:
    st.header("Robustness to elongation")
    catalog = cache.score_catalog(state.location, state.version)
    runs = cache.runs(state.location, state.version)
    attacked = catalog[(catalog["variant"] != tables.CLEAN) & (catalog["suite"] != "diag")]
    filters = None
    suite = pick_suite(attacked, "rob")
    if suite is not None:
        metric = pick_metric(attacked, suite, "rob")
        datasets = tables.order_datasets(
            [d for d in cache.suite_scores(state.location, state.version, suite, (metric,), ())["dataset"].unique()]
        )
        dataset_choice = st.sidebar.selectbox("Dataset", [AVERAGE_CHOICE, *datasets], key=f"rob_dataset_{suite}")
        filters = run_filter_widgets(runs, "rob")
        dataset = None if dataset_choice == AVERAGE_CHOICE else dataset_choice
        table = robustness_for(state.location, state.version, suite, metric, dataset, filters)
        _attack_section(table, suite, metric, dataset_choice)
    else:
        st.info("No attacked scores yet: evaluate with an @elong suite, e.g. `bench eval --model minilm --suite sts@elong`.")
    if "diag" in set(catalog["suite"]):
        if filters is None:
            filters = run_filter_widgets(runs, "rob")
        _diag_section(state, filters, runs)
    else:
        st.subheader("Length diagnostics")
        st.info("No diag scores yet: `bench eval --model minilm --suite diag` adds them.")


def _attack_section(table: pd.DataFrame, suite: str, metric: str, dataset_choice: str) -> None:
    st.subheader(f"Clean vs attacked: {literal(suite)} · {literal(metric)} · {literal(dataset_choice)}")
    if table.empty:
        st.info("No run matches these filters with both clean and attacked scores.")
        return
    long = tables.robustness_long(table)
    order = long[long["variant"] == tables.CLEAN].sort_values("score", ascending=False)["label"].tolist()
    if len(order) > MAX_PLOT_GROUPS:
        st.caption(f"The plot shows the {MAX_PLOT_GROUPS} best of {len(order)} groups by clean score; filter to see others.")
        order = order[:MAX_PLOT_GROUPS]
        long = long[long["label"].isin(order)]
    variant_order = tables.order_variants(long["variant"].unique().tolist())
    y_axis = alt.Axis(labelLimit=360)  # group labels are long ("laser3-self · bert-base-uncased · steps=1000")
    base = alt.Chart(long).encode(
        y=alt.Y("label:N", sort=order, title=None, axis=y_axis),
        x=alt.X("score:Q", title=metric, scale=alt.Scale(zero=False)),
    )
    # A dumbbell per method: the line spans clean to the worst attack, a dot per variant.
    spans = long.groupby("label")["score"].agg(["min", "max"]).reset_index()
    rules = alt.Chart(spans).mark_rule(color="#999").encode(y=alt.Y("label:N", sort=order, axis=y_axis), x="min:Q", x2="max:Q")
    dots = base.mark_circle(size=90).encode(
        color=alt.Color("variant:N", sort=variant_order, title="variant"),
        tooltip=["label", "variant", alt.Tooltip("score:Q", format=".2f")],
    )
    st.altair_chart((rules + dots).properties(height=max(140, 32 * len(order))), width="stretch")
    change_columns = [c for c in table.columns if c.startswith("change ")]
    score_columns = [c for c in table.columns if c not in (*tables.GROUP_KEYS, "seeds")]
    show_table(table, score_columns, highlight=False, key="rob_table")
    st.caption(
        "'change elong-m' = attacked − clean, per seed over the datasets scored both ways, then averaged over seeds; "
        "closer to 0 is more robust." if change_columns else ""
    )
    csv_button(table, f"robustness-{suite}-{metric}-{dataset_choice}", key="rob_csv")


def _diag_section(state: DBState, filters: tables.RunFilters, runs: pd.DataFrame) -> None:
    st.subheader("Length diagnostics (diag, STS-B test)")
    diag = diag_for(state.location, state.version, filters)
    if diag.empty:
        st.info("No diag scores for runs matching these filters.")
        return
    variant_order = tables.order_variants(diag["variant"].unique().tolist())
    plotted = diag
    labels = diag["label"].unique().tolist()
    if len(labels) > MAX_PLOT_GROUPS:
        st.caption(f"The plots show {MAX_PLOT_GROUPS} of {len(labels)} groups; filter to see others (the table lists all).")
        plotted = diag[diag["label"].isin(labels[:MAX_PLOT_GROUPS])]
    chart = (
        alt.Chart(plotted)
        .mark_line(point=True)
        .encode(
            x=alt.X("variant:N", sort=variant_order, title=None),
            y=alt.Y("value:Q", title=None, scale=alt.Scale(zero=False)),
            color=alt.Color("label:N", title="method"),
            tooltip=["label", "metric", "variant", alt.Tooltip("value:Q", format=".4f"), "seeds"],
        )
        .properties(width=220, height=180)
        .facet(facet=alt.Facet("metric:N", title=None, sort=list(tables.DIAG_PLOT_METRICS)), columns=4)
        .resolve_scale(y="independent")
    )
    st.altair_chart(chart)
    st.caption(
        "pair_cos_shift: mean change of STS-B pair cosines under the attack; intra_sim_adj: token-to-document "
        "similarity minus token anisotropy; anisotropy: mean cosine of random sentence pairs; positional_jsd: "
        "Jensen-Shannon distance between pair-cosine histograms with and without shuffled words (bench/suites/diag.py)."
    )
    wide = diag.pivot_table(index=[*tables.GROUP_KEYS, "metric"], columns="variant", values="value", aggfunc="first")
    wide = wide.reindex(columns=variant_order).reset_index()
    show_table(wide, variant_order, highlight=False, key="diag_table", digits=4)
    csv_button(wide, "diag-measures", key="diag_csv")
    _pair_cosine_distribution(state, filters, runs)


def _pair_cosine_distribution(state: DBState, filters: tables.RunFilters, runs: pd.DataFrame) -> None:
    diag_runs = cache.suite_scores(state.location, state.version, "diag", ("pair_cos_mean",), ())["run_id"].unique()
    chosen_runs = filters.apply(runs)
    candidates = chosen_runs[chosen_runs["id"].isin(diag_runs)].sort_values("id", ascending=False).head(MAX_DIAG_RUNS)
    if candidates.empty:
        return
    labels = {int(r.id): f"run {r.id}: {r.method} · {r.backbone} · seed {r.seed}" for r in candidates.itertuples()}
    run_id = st.selectbox("Pair-cosine distribution of run", list(labels), format_func=labels.get, key="diag_run")
    scores = cache.run_scores(state.location, state.version, int(run_id))
    wanted = scores[(scores["suite"] == "diag") & (scores["metric"] == "pair_cos_mean") & scores["has_items"]]
    items = cache.items_for_scores(state.location, state.version, tuple(int(i) for i in wanted["score_id"]))
    rows = [
        pd.DataFrame({"variant": variant, "cosine": np.asarray(items[sid]["values"], dtype=float)})
        for sid, variant in zip(wanted["score_id"], wanted["variant"])
        if int(sid) in items
    ]
    if not rows:
        st.caption("This run stored no per-pair cosines.")
        return
    frame = pd.concat(rows, ignore_index=True)
    chart = (
        alt.Chart(frame)
        .transform_density("cosine", groupby=["variant"], as_=["cosine", "density"], extent=[-1, 1])
        .mark_line()
        .encode(
            x=alt.X("cosine:Q", title="cosine of an STS-B pair"),
            y=alt.Y("density:Q"),
            color=alt.Color("variant:N", sort=tables.order_variants(frame["variant"].unique().tolist())),
        )
        .properties(height=240)
    )
    st.altair_chart(chart, width="stretch")
    st.caption("Elongation pushes pair cosines up when a model is length-sensitive (LA(SER)^3, PoC 1).")
