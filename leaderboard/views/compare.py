"""Compare: two runs side by side, and whether their difference on each dataset is real (paired bootstrap)."""

from __future__ import annotations

import math

import altair as alt
import pandas as pd
import streamlit as st

from bench.evaluate.attacks import order_variants
from bench.report import stats
from leaderboard import cache, grouping
from leaderboard.queries import DBState
from leaderboard.text import literal
from leaderboard.views import curves
from leaderboard.views.common import csv_button, pick_metric, pick_suite
from leaderboard.views.run import pick_run

RESAMPLES = stats.DEFAULT_RESAMPLES
SUMMARY_FIELDS = ("method", "backbone", "model", "budget_label", "train_corpus", "seed", "status", "code_version", "config_hash")


def comparison_table(location: str, version: tuple[int, ...], scores_a: pd.DataFrame, scores_b: pd.DataFrame) -> pd.DataFrame:
    """Rows for the (suite, dataset, variant, metric) both runs have: A, B, B − A and its 95% bootstrap CI."""
    keys = ["suite", "dataset", "variant", "metric"]
    both = scores_a.merge(scores_b, on=keys, suffixes=(" A", " B"))
    if both.empty:
        return pd.DataFrame(columns=[*keys, "A", "B", "B − A", "CI low", "CI high", "items", "note"])
    out = both[keys].copy()
    out["A"] = both["value A"]
    out["B"] = both["value B"]
    out["B − A"] = both["value B"] - both["value A"]
    lows, highs, n_items, notes = [], [], [], []
    for sid_a, sid_b in zip(both["score_id A"], both["score_id B"]):
        result = cache.bootstrap(location, version, int(sid_a), int(sid_b))
        if isinstance(result, stats.BootstrapCI):
            lows.append(result.low)
            highs.append(result.high)
            n_items.append(result.n_items)
            notes.append("difference is real (CI excludes 0)" if result.excludes_zero else "CI includes 0")
        else:
            lows.append(math.nan)
            highs.append(math.nan)
            n_items.append(0)
            notes.append(result)
    out["CI low"] = lows
    out["CI high"] = highs
    out["items"] = n_items
    out["note"] = notes
    order = out["dataset"].map(lambda d: grouping.DATASET_ORDER.get(d, len(grouping.DATASET_ORDER)))
    return out.assign(_o=order).sort_values(["suite", "metric", "variant", "_o", "dataset"]).drop(columns="_o").reset_index(drop=True)


def _default_pair(runs: pd.DataFrame, reference: str = "vanilla") -> tuple[int, int]:
    """A = the latest finished full-set run of the reference method, B = the latest other finished full-set run
    (what `bench results` compares); without a reference run, the two latest finished runs."""
    full = runs[(runs["status"] == "finished") & ~runs["subset"].astype(bool)] if "subset" in runs else runs[runs["status"] == "finished"]
    ref = sorted(full.loc[full["method"] == reference, "id"].tolist())
    others = sorted(full.loc[full["method"] != reference, "id"].tolist())
    if ref and others:
        return ref[-1], others[-1]
    finished = sorted(runs.loc[runs["status"] == "finished", "id"].tolist())
    ids = finished if len(finished) > 1 else sorted(runs["id"].tolist())
    return (ids[-2], ids[-1]) if len(ids) > 1 else (ids[-1], ids[-1])


def show(state: DBState) -> None:
    st.header("Compare two runs")
    runs = cache.runs(state.location, state.version)
    first, second = _default_pair(runs)
    run_a = pick_run(runs, "cmp_a", "Run A", default=first, where=st.sidebar)
    run_b = pick_run(runs, "cmp_b", "Run B", default=second, where=st.sidebar)
    if run_a is None or run_b is None:
        return
    detail_a = cache.run_detail(state.location, state.version, run_a)
    detail_b = cache.run_detail(state.location, state.version, run_b)
    side = pd.DataFrame(
        {"field": SUMMARY_FIELDS, f"A: run {run_a}": [str(detail_a.get(f, "")) for f in SUMMARY_FIELDS],
         f"B: run {run_b}": [str(detail_b.get(f, "")) for f in SUMMARY_FIELDS]}
    )  # fmt: skip
    st.dataframe(side, hide_index=True, key="cmp_side", width="stretch")  # cells are stored text: no Markdown
    curves.show(state, [run_a, run_b], key="cmp")

    scores_a = cache.run_scores(state.location, state.version, run_a)
    scores_b = cache.run_scores(state.location, state.version, run_b)
    common = scores_a.merge(scores_b, on=["suite", "dataset", "variant", "metric"])
    if common.empty:
        st.info("These two runs share no scored (suite, dataset, variant, metric): nothing to compare.")
        return
    suite = pick_suite(common, "cmp")
    metric = pick_metric(common, suite, "cmp")
    variants = order_variants(common.loc[(common["suite"] == suite) & (common["metric"] == metric), "variant"].tolist())
    chosen = st.sidebar.multiselect("Variants", variants, default=variants[:1], key=f"cmp_variants_{suite}_{metric}")

    def pick(frame: pd.DataFrame) -> pd.DataFrame:
        keep = (frame["suite"] == suite) & (frame["metric"] == metric) & frame["variant"].isin(chosen)
        return frame.loc[keep, ["score_id", "suite", "dataset", "variant", "metric", "value"]]

    table = comparison_table(state.location, state.version, pick(scores_a), pick(scores_b))
    st.subheader(f"B − A on {literal(suite)} · {literal(metric)}")
    if table.empty:
        st.info("Pick at least one variant in the sidebar.")
        return
    st.dataframe(
        table.style.format({c: "{:.2f}" for c in ("A", "B", "B − A", "CI low", "CI high")}, na_rep="—"),
        hide_index=True,
        key="cmp_table",
        width="stretch",
    )
    st.caption(
        f"95% paired bootstrap CI of B − A ({RESAMPLES:,} resamples of the items both runs scored: queries, pairs "
        "or test examples): the computation the leaderboard's rank and `bench results` use, so they agree on every "
        "pair. Datasets without stored per-item scores have no CI and say so in 'note'."
    )
    csv_button(table, f"compare-{run_a}-{run_b}-{suite}-{metric}", key="cmp_csv")
    with_ci = table.dropna(subset=["CI low", "CI high"])
    if not with_ci.empty:
        frame = pd.DataFrame(
            {"label": with_ci["dataset"] + " · " + with_ci["variant"], "diff": with_ci["B − A"],
             "low": with_ci["CI low"], "high": with_ci["CI high"]}
        )  # fmt: skip
        points = alt.Chart(frame).mark_point(filled=True, size=70).encode(
            y=alt.Y("label:N", title=None, sort=None), x=alt.X("diff:Q", title=f"B − A ({metric}), 95% CI")
        )
        bars = alt.Chart(frame).mark_rule().encode(y=alt.Y("label:N", sort=None), x="low:Q", x2="high:Q")
        zero = alt.Chart(pd.DataFrame({"x": [0.0]})).mark_rule(strokeDash=[4, 4], color="#888").encode(x="x:Q")
        st.altair_chart((bars + points + zero).properties(height=max(140, 34 * len(frame))), width="stretch")
