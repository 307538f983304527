"""Robustness: how much each method loses under each length attack (elongation, distractor padding, sentence shuffle,
plug-ins), score against context length for the needle suite, and what the length diagnostics say.

Variant order, families and axis titles come from the attack registry (`bench.evaluate.attacks`); the sidebar
filters by attack family."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from bench.evaluate.attacks import CLEAN, family_ordered, order_variants
from bench.evaluate.suites.position import depth_of, position_sensitivity
from bench.report import stats
from leaderboard import attack_curves, cache, colours, diag_table, grouping, ranking, significance
from leaderboard.queries import DBState
from leaderboard.text import literal
from leaderboard.views.common import (
    ColumnLook, csv_button, pick_metric, pick_suite, run_filter_widgets, shorten_settings, show_table,
)  # fmt: skip

AVERAGE_CHOICE = "suite average"
MAX_DIAG_RUNS = 200  # runs offered for the pair-cosine distribution (newest first)
MAX_PLOT_GROUPS = 30  # groups drawn in a plot (the tables below them list every group)
MIN_SPAN_FRACTION = 0.10  # the robustness axis spans at least this share of the metric's scale


def family_variants(scores: pd.DataFrame, family: str | None) -> pd.DataFrame:
    """The clean rows and those of one attack family (None: every family)."""
    if family is None:
        return scores
    keep = [v for v in scores["variant"].unique() if v == CLEAN or attack_curves.variant_family(v) == family]
    return scores[scores["variant"].isin(keep)]


@st.cache_data(show_spinner=False, max_entries=64)
def robustness_for(location: str, version: tuple[int, ...], suite: str, metric: str, dataset: str | None,
                   filters: grouping.RunFilters, family: str | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:  # fmt: skip
    """(table, curve) of clean vs attacked scores (one attack family, or all) for the runs the filters keep. Variants
    without a clean score (needle's context lengths): the curve alone, its table the scores per length."""
    limits = cache.score_limits(location, version, suite)
    runs = filters.apply(grouping.mark_subsets(cache.runs(location, version), limits))
    # rows of different scoring versions of the suite stay apart, as on the main board
    runs = grouping.split_scoring_versions(runs.reset_index(drop=True), cache.suite_versions(location, version, suite))
    scores = family_variants(cache.suite_scores(location, version, suite, (metric,), ()), family)
    rates = cache.attack_rates(location, version, suite)
    if not (scores["variant"] == CLEAN).any():
        curve = attack_curves.length_curve(scores, runs, dataset)
        if curve.empty:
            return pd.DataFrame(columns=[*grouping.GROUP_KEYS, "seeds"]), curve
        table = curve.pivot_table(index=[*grouping.GROUP_KEYS, "label"], columns="variant", values="score", aggfunc="first")
        table = table.reindex(columns=order_variants(list(table.columns))).reset_index()
        seeds = curve.groupby("label", sort=False)["seeds"].max()
        table = table.assign(seeds=table["label"].map(seeds))
        depths = [v for v in table.columns if depth_of(str(v)) is not None]
        if len(depths) > 1:  # the position suite: Zeng et al.'s index of each row's depth curve
            table["PSI"] = position_sensitivity(table[depths].to_numpy(dtype=float))
        return table, curve
    table = attack_curves.build_robustness(scores, runs, dataset, rates)
    table = with_reference_differences(location, version, suite, metric, filters, table)
    curve = attack_curves.robustness_curve(scores, runs, dataset, rates)
    curve = _one_run_intervals(location, version, suite, metric, dataset, scores, runs, curve)
    # Subset runs are rows of their own ("subset" = "limit N"), never merged with a full-set row.
    return table, curve


REFERENCE = "vanilla"


def with_reference_differences(location: str, version: tuple[int, ...], suite: str, metric: str,
                               filters: grouping.RunFilters, table: pd.DataFrame) -> pd.DataFrame:  # fmt: skip
    """The table with 'Δ vs vanilla <variant>' per variant: each row minus the untrained row of its backbone and
    subset, with the 95% interval, on the suite's headline score (the main board's own Δ column, the same paired
    bootstrap, or `stats.seed_item_ci` over seeds as `bench results`), so the view shows what a method changed against its reference clean and
    under each attack."""
    if table.empty or "method" not in table:
        return table
    from leaderboard.views import main as main_view

    variants = [c for c in table.columns if c == CLEAN or (c in order_variants(list(table.columns)) and
                                                            not str(c).startswith(("change ", "changed ")))]  # fmt: skip
    variants = [v for v in variants if v not in (*grouping.GROUP_KEYS, "seeds", "label", "subset")]
    out = table.copy()
    keys = [*grouping.GROUP_KEYS, "subset"]
    for variant in variants:
        board = main_view.main_table(main_view.BoardQuery(location, version, suite, metric, variant, filters, False, REFERENCE))
        if board.board.empty or not any(board.delta):
            continue
        info = board.board.info
        found = {tuple(str(x) for x in key): delta for key, delta in zip(
            zip(*[info[k] for k in grouping.GROUP_KEYS], board.board.subsets), board.delta)}  # fmt: skip
        subset = out["subset"] if "subset" in out else pd.Series("", index=out.index)
        out[f"Δ vs {REFERENCE} {variant}"] = [found.get(tuple(str(x) for x in (*row, s)), "")
                                             for row, s in zip(out[grouping.GROUP_KEYS].itertuples(index=False), subset)]
    return out


def _one_run_intervals(location: str, version: tuple[int, ...], suite: str, metric: str, dataset: str | None,
                       scores: pd.DataFrame, runs: pd.DataFrame, curve: pd.DataFrame) -> pd.DataFrame:  # fmt: skip
    """Points of one seed get the bootstrap interval of their score over its items (`bench.report.stats`, the
    resamples every difference involving that score uses), where the point is one dataset's score: that dataset
    chosen, or a 'suite average' over the one dataset its row scored both clean and attacked (an average of several
    has no items)."""
    if curve.empty or "seeds" not in curve:
        return curve
    one = (curve["seeds"] == 1) & curve["low"].isna()
    if not one.any():
        return curve
    runs = runs.reset_index(drop=True)
    dataset_of = _single_dataset(scores, runs) if dataset is None else {}
    curve = curve.copy()
    for variant in curve.loc[one, "variant"].unique():
        with_items = cache.item_scores(location, version, suite, metric, variant)
        wanted = curve.loc[one & (curve["variant"] == variant), "row"].astype(int).tolist()[:MAX_PLOT_GROUPS]
        by_dataset: dict[str, set[int]] = {}
        for g in wanted:
            d = dataset if dataset is not None else dataset_of.get(g)
            if d is not None:
                by_dataset.setdefault(d, set()).add(g)
        for d, groups in by_dataset.items():
            reps = significance.representatives(with_items, runs, groups, [d]).get(d, {})
            items = cache.items_for_scores(location, version, tuple(sorted(reps.values())))
            for g, score_id in reps.items():
                if score_id not in items:
                    continue
                low, high = stats.score_interval(items[score_id], cache.score_key(location, version, score_id))
                at = (one & (curve["variant"] == variant) & (curve["row"] == g)).to_numpy()
                curve.loc[at, "low"], curve.loc[at, "high"] = low, high
    return curve


def _single_dataset(scores: pd.DataFrame, runs: pd.DataFrame) -> dict[int, str]:
    """Per row (group code) whose runs scored exactly one dataset under attack: that dataset (the one its clean and
    attacked points average over)."""
    codes, _ = grouping.coded_groups(runs)
    attacked = scores[scores["variant"] != CLEAN]
    position = pd.Index(runs["id"]).get_indexer(attacked["run_id"])
    mine = attacked[position >= 0].assign(group=codes[position[position >= 0]])
    per = mine.groupby("group")["dataset"].unique()
    return {int(g): str(ds[0]) for g, ds in per.items() if len(ds) == 1}


@st.cache_data(show_spinner=False, max_entries=64)
def diag_for(location: str, version: tuple[int, ...], filters: grouping.RunFilters) -> pd.DataFrame:
    runs = filters.apply(cache.runs(location, version))
    scores = cache.suite_scores(location, version, "diag", diag_table.DIAG_PLOT_METRICS, ())
    return diag_table.build_diag(scores, runs)


def show(state: DBState) -> None:
    st.header("Robustness to elongation")
    catalog = cache.score_catalog(state.location, state.version)
    runs = cache.runs(state.location, state.version)
    attacked = catalog[(catalog["variant"] != CLEAN) & (catalog["suite"] != "diag")]
    filters = None
    suite = pick_suite(attacked, "rob")
    if suite is not None:
        metric = pick_metric(attacked, suite, "rob")
        present = order_variants(attacked.loc[attacked["suite"] == suite, "variant"].tolist())
        family_names = list(dict.fromkeys(attack_curves.variant_family(v) for v in present))
        family = st.sidebar.selectbox("Attack family", family_names, key=f"rob_family_{suite}",
                                      help="elong: copies of the text; pad: distractor sentences at the start, middle "
                                      "or end; shuffle: sentence order; len: the needle suite's context lengths")  # fmt: skip
        datasets = list(cache.suite_datasets(state.location, state.version, suite, metric, None))
        dataset_choice = st.sidebar.selectbox("Dataset", [AVERAGE_CHOICE, *datasets], key=f"rob_dataset_{suite}")
        filters = run_filter_widgets(state, "rob")
        dataset = None if dataset_choice == AVERAGE_CHOICE else dataset_choice
        table, curve = robustness_for(state.location, state.version, suite, metric, dataset, filters, family)
        _attack_section(table, curve, suite, metric, dataset_choice, family,
                        cache.method_colours(state.location, state.version))
    else:
        st.info("No attacked scores yet: evaluate an attacked suite, e.g. `bench eval --model minilm --suite "
                "sts:stsb@elong,pad`, or the needle suite (`--suite needle`).")
    if "diag" in set(catalog["suite"]):
        if filters is None:
            filters = run_filter_widgets(state, "rob")
        _diag_section(state, filters, runs)
    else:
        st.subheader("Length diagnostics")
        st.info("No diag scores yet: `bench eval --model minilm --suite diag` adds them.")


def y_domain(low: float, high: float) -> list[float]:
    """The score axis: from a baseline that keeps a sub-point difference small on screen (the axis spans at least
    MIN_SPAN_FRACTION of the metric's scale: 0-100 for scores x100, 0-1 otherwise), below 0 only for values below 0,
    and always holding every value from `low` to `high`."""
    scale = 100.0 if max(abs(high), abs(low)) > 1.5 else 1.0
    span = max(high - low, MIN_SPAN_FRACTION * scale)
    top = min(scale, high + 0.05 * span) if high <= scale else high + 0.05 * span
    bottom = top - 1.1 * span
    if low >= 0:
        bottom = max(0.0, bottom)
    # every point and interval inside: a negative correlation (an untrained model) is drawn, not clipped at 0
    return [min(bottom, low - 0.05 * span), max(top, high)]


def _attack_section(table: pd.DataFrame, curve: pd.DataFrame, suite: str, metric: str, dataset_choice: str,
                    family: str | None = None, palette: dict[str, str] | None = None) -> None:  # fmt: skip
    clean_less = not curve.empty and not (curve["variant"] == CLEAN).any()
    title = ("Score vs depth of the fact" if suite == "position" else "Score vs context length") if clean_less else "Clean vs attacked"
    st.subheader(f"{title}: {literal(suite)} · {literal(metric)} · {literal(dataset_choice)}"
                 + (f" · {literal(family)}" if family else ""))  # fmt: skip
    if table.empty:
        st.info("No run matches these filters with both clean and attacked scores.")
        return
    order = table["label"].tolist() if "label" in table else grouping.group_label(table).tolist()
    if len(order) > MAX_PLOT_GROUPS:
        st.caption(f"The plot shows the {MAX_PLOT_GROUPS} best of {len(order)} groups by clean score; filter to see others.")
        order = order[:MAX_PLOT_GROUPS]
    plotted = curve[curve["label"].isin(order)].copy()
    # The x axis: m = 1 (clean), 2, 4, 8, then random m apart; under each m, the share of texts it changed.
    rates = plotted.groupby("m", sort=False)["changed_frac"].mean()
    m_order = [attack_curves.variant_m(v) for v in order_variants(plotted["variant"].unique().tolist())]
    axis_label = {m: (m if np.isnan(rates.get(m, np.nan)) else f"{m} ({rates[m]:.0%} changed)") for m in m_order}
    plotted["x"] = plotted["m"].map(axis_label)
    x_order = [axis_label[m] for m in m_order]
    low = np.nanmin(plotted[["score", "low"]].to_numpy(dtype=float))
    high = np.nanmax(plotted[["score", "high"]].to_numpy(dtype=float))
    y = alt.Y("score:Q", title=metric, scale=alt.Scale(domain=y_domain(low, high), clamp=True))
    axis_title = attack_curves.family_axis(family) if family else "variant"
    if not clean_less:
        axis_title += " (1 = clean; random m apart) and share of texts changed"
    x = alt.X("x:N", sort=x_order, title=axis_title, axis=alt.Axis(labelAngle=0, labelLimit=200))
    legend = alt.Legend(orient="bottom", columns=1, labelLimit=0, title=None)
    method_of = dict(zip(plotted["label"], plotted["method"]))
    methods = [method_of.get(label, label) for label in order]
    color = alt.Color("label:N", sort=order, legend=legend,
                      scale=alt.Scale(**colours.colour_scale(order, methods, palette or {})))
    shape = {"shape": alt.Shape("label:N", sort=order, legend=None)} if colours.repeats(methods) else {}
    tooltip = ["label", "m", alt.Tooltip("score:Q", format=".2f"), alt.Tooltip("low:Q", format=".2f"),
               alt.Tooltip("high:Q", format=".2f"), "seeds", alt.Tooltip("changed_frac:Q", format=".0%")]  # fmt: skip
    # methods side by side under each m (dodged), so no point or interval hides another's
    base = alt.Chart(plotted).encode(x=x, xOffset=alt.XOffset("label:N", sort=order), color=color)
    # a line joins the points of an ordered axis (the family declares it: AttackFamily.ordered); pad's positions and
    # shuffle are categories, random m and needle's mean points apart
    joined = bool(family) and family_ordered(family)
    line = base.transform_filter(alt.datum.on_axis).mark_line().encode(y=y)
    points = base.mark_point(filled=True, size=70).encode(**shape, y=y, tooltip=tooltip)
    bars = base.mark_rule().encode(y=alt.Y("low:Q", scale=alt.Scale(domain=y_domain(low, high), clamp=True)), y2="high:Q")
    layers = (line + bars + points) if joined else (bars + points)
    st.altair_chart(layers.properties(height=360), width="stretch")
    st.caption(
        "Score per method along the attack's axis, mean over seeds with its 95% interval; '% changed': texts the "
        "attack changed.",
        help="elong: length factor m, 1 = clean; pad: position-m; needle: context length in tokens. The interval: "
        "Student t over seeds from 3 seeds on; one seed on one dataset: the bootstrap interval of its score over its "
        "items (the resamples the leaderboard's differences use). Random m and needle's mean over lengths are "
        f"separate points, not joined to the line. The axis spans at least {MIN_SPAN_FRACTION:.0%} of the metric's "
        "scale so sub-point differences do not look large. '% changed': the share of texts whose model input the "
        "attack changed (a text already longer than max_len is truncated to the clean input).",
    )  # fmt: skip
    score_columns = [c for c in table.columns if c not in (*grouping.GROUP_KEYS, "seeds", "label", "subset")
                     and not c.startswith(("changed ", "Δ vs "))]  # fmt: skip
    if "subset" in table and table["subset"].astype(bool).any():
        st.warning("Rows with a 'subset' entry were scored on a subset (--limit): rows of their own, not comparable "
                   "with full-set rows.")  # fmt: skip
    elif "subset" in table:
        table = table.drop(columns="subset")
    show_table(shorten_settings(table), score_columns, highlight=False, key="rob_table",
               look=ColumnLook(formats={c: "%.2f" for c in table.columns if c.startswith("changed ")}))  # fmt: skip
    st.caption(
        "change = attacked − clean (closer to 0: more robust) · changed = share of texts the attack changed · "
        "Δ vs vanilla: the main board's difference, per variant.",
        help="'change elong-m' = attacked − clean, per seed over the datasets scored both ways, then averaged over "
        "seeds. 'changed elong-m': fraction of texts the attack changed (1 = all). 'Δ vs vanilla <variant>': the row "
        "minus the untrained row of its backbone and subset on that variant, with its 95% CI, uncorrected (the main "
        f"board's difference, on the suite's headline score); * = real after the "
        f"{stats.CORRECTION_NAMES[ranking.CORRECTION]} correction over the main board's differences on that variant, "
        "as there. Rows of two scoring versions of a suite are labelled '[scoring vN]' and never pooled.",
    )  # fmt: skip
    csv_button(table, f"robustness-{suite}-{metric}-{dataset_choice}", key="rob_csv")


def _diag_section(state: DBState, filters: grouping.RunFilters, runs: pd.DataFrame) -> None:
    st.subheader("Length diagnostics (diag, STS-B test)")
    diag = diag_for(state.location, state.version, filters)
    if diag.empty:
        st.info("No diag scores for runs matching these filters.")
        return
    variant_order = order_variants(diag["variant"].unique().tolist())
    plotted = diag
    labels = diag["label"].unique().tolist()
    if len(labels) > MAX_PLOT_GROUPS:
        st.caption(f"The plots show {MAX_PLOT_GROUPS} of {len(labels)} groups; filter to see others (the table lists all).")
        plotted = diag[diag["label"].isin(labels[:MAX_PLOT_GROUPS])]
    # Variants are categories (elong-rand is not "after" m=8): points side by side per variant, no joining line.
    legend = alt.Legend(orient="bottom", columns=2, labelLimit=420, title=None)
    method_of = dict(zip(plotted["label"], plotted["method"]))
    shown = list(method_of)
    scale = colours.colour_scale(shown, [method_of[label] for label in shown], cache.method_colours(state.location, state.version))
    chart = (
        alt.Chart(plotted)
        .mark_point(filled=True, size=70)
        .encode(
            x=alt.X("variant:N", sort=variant_order, title=None, axis=alt.Axis(labelAngle=0)),
            xOffset=alt.XOffset("label:N"),
            y=alt.Y("value:Q", title=None, scale=alt.Scale(zero=False)),
            color=alt.Color("label:N", title="method", legend=legend, scale=alt.Scale(**scale)),
            tooltip=["label", "metric", "variant", alt.Tooltip("value:Q", format=".4f"), "seeds"],
        )
        .properties(width=300, height=170)
        .facet(facet=alt.Facet("metric:N", title=None, sort=list(diag_table.DIAG_PLOT_METRICS)), columns=2)
        .resolve_scale(y="independent")
    )
    st.altair_chart(chart)
    st.caption(
        "The four length diagnostics of LA(SER)^3 per method and variant.",
        help="pair_cos_shift: mean change of STS-B pair cosines under the attack; intra_sim_adj: token-to-document "
        "similarity minus token anisotropy; anisotropy: mean cosine of random sentence pairs; positional_jsd: "
        "Jensen-Shannon distance between pair-cosine histograms with and without shuffled words "
        "(bench/evaluate/suites/diag.py).",
    )  # fmt: skip
    wide = diag.pivot_table(index=[*grouping.GROUP_KEYS, "metric"], columns="variant", values="value", aggfunc="first")
    wide = wide.reindex(columns=variant_order).reset_index()
    show_table(wide, variant_order, highlight=False, key="diag_table", digits=4)
    csv_button(wide, "diag-measures", key="diag_csv")
    _pair_cosine_distribution(state, filters, runs)


def _pair_cosine_distribution(state: DBState, filters: grouping.RunFilters, runs: pd.DataFrame) -> None:
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
            color=alt.Color("variant:N", sort=order_variants(frame["variant"].unique().tolist()),
                            legend=alt.Legend(orient="bottom", title=None)),
        )
        .properties(height=240)
    )
    st.altair_chart(chart, width="stretch")
    st.caption("Elongation pushes pair cosines up when a model is length-sensitive (LA(SER)^3, PoC 1).")
