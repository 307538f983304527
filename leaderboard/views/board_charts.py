"""The main board's charts: each row's score per dataset with its 95% CI, model size against score, and for a
board of 2 or more datasets the aggregate table (leaderboard.aggregates) with its performance profile."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from leaderboard import aggregates, cache, colours, columns, grouping
from leaderboard.text import literal
from leaderboard.views.common import csv_button
from leaderboard.views.board_table import MAX_BARS, MAX_RANKED, BoardQuery, board_runs, main_table, reference_groups

MAX_SCATTER = 500  # rows drawn in the size-vs-score plot


@st.cache_data(show_spinner=False, max_entries=64)
def aggregate_view(query: BoardQuery) -> tuple[pd.DataFrame, dict | None]:
    """The full-set rows' aggregate over datasets (leaderboard.aggregates: mean, IQM, stratified-bootstrap CIs,
    probability of improvement over the reference) and the performance-profile chart's spec."""
    location, version, suite, metric, variant = query.location, query.version, query.suite, query.metric, query.variant
    filters, reference = query.filters, query.reference
    table = main_table(query)
    full = [part for label, part in table.board.partitions() if not label]  # every full-set row
    if not full or len(full[0].datasets) < 2:
        return pd.DataFrame(), None
    part = full[0]
    runs = board_runs(location, version, suite, filters, cache.score_limits(location, version, suite))
    scores = cache.suite_scores(location, version, suite, (metric,), (variant,))
    long, _ = grouping.latest_per_seed(scores[["run_id", "dataset", "value"]], runs, ["dataset"])
    groups = [int(g) for g in part.groups[:MAX_RANKED]]
    labels = dict(zip(groups, grouping.group_label(part.info).head(len(groups))))
    datasets = list(part.datasets)
    with_items = cache.item_scores(location, version, suite, metric, variant)
    score_ids = {(int(r), d): int(i) for i, r, d in with_items[["score_id", "run_id", "dataset"]].itertuples(index=False)}
    wanted = long[long["group"].isin(groups) & long["dataset"].isin(datasets)]
    ids = tuple(sorted({score_ids[(int(r), d)] for r, d in zip(wanted["run_id"], wanted["dataset"]) if (int(r), d) in score_ids}))
    items = cache.items_for_scores(location, version, ids)
    codes = reference_groups(table.board, reference)
    full_codes = [code for (_, subset), code in codes.items() if not subset]
    ref = full_codes[0] if len(full_codes) == 1 else None  # one reference row among the full-set rows
    types = dict(zip(part.groups.tolist(), part.info["type"])) if "type" in part.info else {}
    imported = {int(g) for g, t in types.items() if t == grouping.REFERENCE}
    stored = aggregates.StoredItems(score_ids, items, lambda i: cache.score_key(location, version, i))
    agg = aggregates.aggregate_table(long, groups, labels, datasets, stored, ref, imported)
    profile = aggregates.performance_profile(long, groups, labels, datasets)
    spec = None
    if not profile.empty:
        order = [labels[g] for g in groups if labels.get(g) in set(profile["row"])]
        method_of = dict(zip(grouping.group_label(part.info), part.info["method"]))
        scale = colours.colour_scale(order, [method_of.get(r, r) for r in order], cache.method_colours(location, version))
        spec = (alt.Chart(profile).mark_line(interpolate="step-after")
                .encode(x=alt.X("threshold:Q", title=f"{metric} threshold τ", scale=alt.Scale(zero=False)),
                        y=alt.Y("share:Q", title="share of runs with score > τ", scale=alt.Scale(domain=[0, 1])),
                        color=alt.Color("row:N", sort=order, scale=alt.Scale(**scale),
                                        legend=alt.Legend(orient="right", labelLimit=0, title=None)),  # inside the chart
                        tooltip=["row", alt.Tooltip("threshold:Q", format=".2f"), alt.Tooltip("share:Q", format=".2f")])
                .properties(height=260).to_dict())  # fmt: skip
    return agg, spec


def show_aggregates(query: BoardQuery) -> None:
    """The aggregate table and the performance profile, for a board of 2 or more datasets."""
    metric, variant, reference = query.metric, query.variant, query.reference
    agg, spec = aggregate_view(query)
    if agg.empty:
        return
    st.markdown(f"**Aggregate over {int(agg['datasets'].iloc[0])} datasets ({literal(metric)}, {literal(variant)})**")
    shown = pd.DataFrame({"row": agg["row"], "seeds": agg["seeds"]})
    for name in ("mean", "IQM"):
        shown[name] = [f"{v:.2f} [{lo:.2f}, {hi:.2f}]" for v, lo, hi in zip(agg[name], agg[f"{name} low"], agg[f"{name} high"])]
    if "P(> reference)" in agg:
        shown[f"P(> {reference})"] = ["" if np.isnan(p) else f"{p:.2f}" for p in agg["P(> reference)"]]
    st.dataframe(shown, hide_index=True, width="stretch")
    csv_button(agg, f"aggregate-{query.suite}-{metric}-{variant}", key="agg_csv")
    st.caption("Mean and IQM over the datasets every row scored, with 95% CIs, as `bench results`.",
               help="95% stratified-bootstrap CI (items within each dataset, seeds within each row); P(> reference): "
               "probability of improvement, per dataset the share of (seed, reference seed) pairs the row wins "
               "(Mann-Whitney, a tie within an imported score's rounding counts half), averaged over datasets.")  # fmt: skip
    if spec is not None:
        st.markdown("**Performance profile**")
        st.vega_lite_chart(spec=spec, width="stretch")
        st.caption("A curve above another is better across the whole distribution.",
                   help="For each threshold τ, the share of a row's runs (seeds × datasets, each dataset weighing the "
                   "same) scoring above τ.")  # fmt: skip


@st.cache_data(show_spinner=False, max_entries=16)
def chart_specs(query: BoardQuery) -> tuple[dict | None, dict | None]:
    """The two charts' Vega-Lite specs, built once per choice (Altair's build and validation cost more than the
    table itself on every rerun)."""
    metric = query.metric
    table = main_table(query)
    tables = table.board.tables()
    if not tables:
        return None, None
    part = tables[0][2]  # the first table shown: the full-set rows, or on a board of subsets only, the first subset's
    labels = grouping.group_label(part.info)
    rows = []
    for i, g in enumerate(part.groups[:MAX_BARS]):
        for d in part.datasets:
            value = float(part.mean[d].iloc[i])
            if np.isnan(value):
                continue
            lo, hi = table.bar_ci.get(int(g), {}).get(d, (np.nan, np.nan))
            rows.append({"row": labels.iloc[i], "dataset": d, "score": value, "low": lo, "high": hi})
    frame = pd.DataFrame(rows)
    palette = cache.method_colours(query.location, query.version)
    bars_spec = None
    if not frame.empty:
        order = labels.head(MAX_BARS).tolist()
        methods = part.info["method"].head(MAX_BARS).tolist()
        color = alt.Color("row:N", sort=order, scale=alt.Scale(**colours.colour_scale(order, methods, palette)),
                          legend=alt.Legend(orient="bottom", columns=1, labelLimit=0, title=None))  # fmt: skip
        x = alt.X("dataset:N", sort=grouping.order_datasets(frame["dataset"].unique().tolist()), title=None,
                  axis=alt.Axis(labelAngle=0))  # fmt: skip
        # A point per row and dataset, side by side, with its 95% interval, on an axis that spans the data and the
        # intervals (bars from 0 would make 82.05 and 81.91 look the same).
        domain = score_domain(frame[["score", "low", "high"]].to_numpy(dtype=float).ravel())
        y = alt.Y("score:Q", title=metric, scale=alt.Scale(domain=domain, zero=False, nice=False))
        base = alt.Chart(frame).encode(x=x, xOffset=alt.XOffset("row:N", sort=order), color=color)
        shape = {"shape": alt.Shape("row:N", sort=order, legend=None)} if colours.repeats(methods) else {}
        points = base.mark_point(filled=True, size=60).encode(
            **shape, y=y, tooltip=["row", "dataset", alt.Tooltip("score:Q", format=".2f"), alt.Tooltip("low:Q", format=".2f"),
                          alt.Tooltip("high:Q", format=".2f")])  # fmt: skip
        rules = base.mark_rule().encode(y=alt.Y("low:Q", scale=alt.Scale(domain=domain, zero=False, nice=False)),
                                        y2="high:Q")  # fmt: skip
        bars_spec = (rules + points).properties(height=260).to_dict()
    size = part.info[columns.PARAMS].to_numpy(dtype=float) if columns.PARAMS in part.info else np.array([])
    score = part.mean[table.headline].to_numpy(dtype=float)
    ok = ~np.isnan(size) & ~np.isnan(score) if len(size) else np.array([], dtype=bool)
    size_spec = None
    if ok.any():
        frame = pd.DataFrame({"row": labels.to_numpy()[ok], "params (M)": size[ok], "score": score[ok],
                              "method": part.info["method"].to_numpy()[ok]}).head(MAX_SCATTER)  # fmt: skip
        size_spec = (
            alt.Chart(frame)
            .mark_point(filled=True, size=80)
            .encode(
                x=alt.X("params (M):Q", scale=alt.Scale(type="log"), title="parameters (M, log scale)"),
                y=alt.Y("score:Q", title=table.headline, scale=alt.Scale(domain=score_domain(frame["score"]), zero=False, nice=False)),
                color=alt.Color("method:N", scale=alt.Scale(**colours.colour_scale(
                    sorted(set(frame["method"])), sorted(set(frame["method"])), palette)),
                                legend=alt.Legend(orient="bottom", columns=2, labelLimit=0, title=None)),
                tooltip=["row", alt.Tooltip("params (M):Q", format=".1f"), alt.Tooltip("score:Q", format=".2f")],
            )
            .properties(height=260)
            .to_dict()
        )  # fmt: skip
    return bars_spec, size_spec


def score_domain(values: np.ndarray | pd.Series) -> list[float]:
    """A score axis that spans the values with a margin of at least 1% of their size: two scores 1e-5 apart (an
    imported score beside its own eval) sit side by side on a readable axis, not at the two ends of 0.00001."""
    values = np.asarray(values, dtype=float)
    lo, hi = float(np.nanmin(values)), float(np.nanmax(values))
    pad = max(0.05 * (hi - lo), 0.01 * max(abs(hi), 1.0))
    return [round(lo - pad, 2), round(hi + pad, 2)]


def show_charts(specs: tuple[dict | None, dict | None], metric: str, headline: str) -> None:
    """Per-dataset scores with their CIs, and model size vs score (the full-set rows)."""
    bars_spec, size_spec = specs
    left, right = st.columns(2)
    with left:
        st.markdown(f"**Per dataset ({literal(metric)}), 95% CI**")
        if bars_spec is None:
            st.caption("No scores to draw.")
        else:
            st.vega_lite_chart(spec=bars_spec, width="stretch")
            st.caption("95% CI of each score.", help="Over seeds (Student t) from 3 seeds on, none for 2 seeds, else "
                       "the bootstrap interval of the score over its items.")  # fmt: skip
    with right:
        st.markdown(f"**Model size vs {literal(headline)}**")
        if size_spec is None:
            st.caption("No run recorded its model size (Run.model_info).")
        else:
            st.vega_lite_chart(spec=size_spec, width="stretch")
