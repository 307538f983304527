"""Compare: two runs side by side, and whether their difference on each dataset is real (paired bootstrap)."""

from __future__ import annotations

import math

import altair as alt
import pandas as pd
import streamlit as st

from bench.evaluate.attacks import order_variants
from bench.report import stats
from bench.report.pooling import row_label
from leaderboard import cache, comparable, grouping
from leaderboard.queries import DBState
from leaderboard.numbers import p_text
from leaderboard.text import literal
from leaderboard.views import curves
from leaderboard.views.common import MISSING, csv_button, is_absent, pick_metric, pick_suite
from leaderboard.views.run import pick_run

RESAMPLES = stats.DEFAULT_RESAMPLES
CORRECTION = "holm"  # over the differences of the table shown, as `bench results` and the main board
REAL = f"difference is real ({stats.CORRECTION_NAMES[CORRECTION]}-corrected)"
NOT_REAL = "not shown to differ"
P_WIDTH = 90  # pixels: a p-value of 7 characters ("9.2e-08", "< 1e-12") and the sort arrow
ONE_SEED = "one seed of a trained run: no verdict (3+ seeds per method, `bench results`)"
SUMMARY_FIELDS = ("method", "backbone", "model", "budget_label", "train_corpus", "seed", "status", "code_version", "config_hash")


def comparison_table(location: str, version: tuple[int, ...], scores_a: pd.DataFrame, scores_b: pd.DataFrame,
                     imported: tuple[bool, bool] = (False, False), trained: tuple[bool, bool] = (False, False)
                     ) -> pd.DataFrame:  # fmt: skip
    """Rows for the (suite, dataset, variant, metric) both runs have: A, B, B − A, its 95% bootstrap CI
    (uncorrected) and p; 'note' says whether the difference is real after the Holm correction over this table's
    differences (`stats.corrected_stars`, as `bench results` and the main board).

    Scores on other items (a `--limit` subset against the full set, or two subsets) or of another scoring version
    get no difference and say why (`leaderboard.comparable`); imported: whether A / B are imported published
    results, whose differences below their stated rounding are ties; trained: whether A / B are training runs, one
    seed each, whose difference is never called real (`stats.seed_variance_estimated`, the rule of every star):
    'note' says so, the interval and p stay."""
    keys = ["suite", "dataset", "variant", "metric"]
    both = scores_a.merge(scores_b, on=keys, suffixes=(" A", " B"))
    if both.empty:
        return pd.DataFrame(columns=[*keys, "A", "B", "B − A", "CI low", "CI high", "p", "items", "note"])
    out = both[keys].copy()
    out["A"] = both["value A"]
    out["B"] = both["value B"]
    out["B − A"] = both["value B"] - both["value A"]
    lows, highs, ps, n_items, notes = [], [], [], [], []
    ones = [1] * len(both)
    scoring = (both.get("suite_version A", ones), both.get("suite_version B", ones))
    limits = (both.get("limit A", [None] * len(both)), both.get("limit B", [None] * len(both)))
    subsets = (both.get("subset_label A", [""] * len(both)), both.get("subset_label B", [""] * len(both)))
    apart = [comparable.why_apart(la, lb, va, vb, sa, sb) for la, lb, va, vb, sa, sb in zip(*limits, *scoring, *subsets)]
    out.loc[[bool(a) for a in apart], "B − A"] = math.nan
    for sid_a, sid_b, a, b, why in zip(both["score_id A"], both["score_id B"], out["A"], out["B"], apart):
        step_a = comparable.stated_step(a) if imported[0] else 0.0
        step_b = comparable.stated_step(b) if imported[1] else 0.0
        if not why and comparable.is_tie(a, b, step_a, step_b):
            why = f"tie: within the rounding of the imported score (±{comparable.tie_tolerance(step_a, step_b):.6f}".rstrip("0") + ")"
        result = why or cache.bootstrap(location, version, int(sid_a), int(sid_b))
        if isinstance(result, stats.BootstrapCI):
            lows.append(result.low)
            highs.append(result.high)
            ps.append(result.p)
            n_items.append(result.n_items)
            notes.append("")
        else:
            lows.append(math.nan)
            highs.append(math.nan)
            ps.append(math.nan)
            n_items.append(0)
            notes.append(result)
    judged = stats.seed_variance_estimated((1, 1), trained)
    stars = stats.corrected_stars(ps, CORRECTION, judged=[judged] * len(ps))
    out["CI low"] = lows
    out["CI high"] = highs
    out["p"] = ps
    out["items"] = n_items
    out["note"] = [note or (REAL if star else NOT_REAL if judged or math.isnan(p) else ONE_SEED)
                   for note, star, p in zip(notes, stars, ps)]  # fmt: skip
    order = out["dataset"].map(lambda d: grouping.DATASET_ORDER.get(d, len(grouping.DATASET_ORDER)))
    return out.assign(_o=order).sort_values(["suite", "metric", "variant", "_o", "dataset"]).drop(columns="_o").reset_index(drop=True)


def why_not_comparable(scores_a: pd.DataFrame, scores_b: pd.DataFrame) -> str:
    """'' when two runs share a (suite, dataset, variant, metric) scored on the same items the same way, else why
    not, in a sentence."""
    keys = ["suite", "dataset", "variant", "metric"]
    both = scores_a.merge(scores_b, on=keys, suffixes=(" A", " B"))
    if both.empty:
        return "they share no scored (suite, dataset, variant, metric)"
    ones = [1] * len(both)
    blank = [""] * len(both)
    reasons = [comparable.why_apart(la, lb, va, vb, sa, sb) for la, lb, va, vb, sa, sb in zip(
        both.get("limit A", [None] * len(both)), both.get("limit B", [None] * len(both)),
        both.get("suite_version A", ones), both.get("suite_version B", ones),
        both.get("subset_label A", blank), both.get("subset_label B", blank))]  # fmt: skip
    if any(not r for r in reasons):
        return ""
    return reasons[0].removesuffix(": not compared")


def _summary(detail: dict | None, field: str) -> str:
    """One field of a run as the side-by-side table shows it; a `bench eval` row's method is the model it scored,
    as the main board names it (bench.report.pooling.row_label)."""
    detail = detail or {}
    return str(row_label(detail) if field == "method" else detail.get(field, ""))


def _is_reference(runs: pd.DataFrame, reference: str) -> pd.Series:
    """Rows of the reference method; a backbone scored by `bench eval --model BACKBONE` (labelled by its model's name)
    stands in for 'vanilla', as on the main board."""
    named = runs["method"] == reference
    if reference == "vanilla" and "kind" in runs and "backbone" in runs:
        named |= (runs["kind"] == "eval") & (runs["method"] == runs["backbone"])
    return named


def _default_pair(runs: pd.DataFrame, headline: pd.Series | None = None, reference: str = "vanilla") -> tuple[int, int]:
    """A = the reference row (the latest finished full-set run of the reference method), B = the best run of the same
    backbone and subset by its headline score (`headline`: run id -> its mean over the datasets of the suite's main
    metric on clean texts; the latest such run where none is scored); without a reference run, the two latest finished
    runs."""
    finished = runs[runs["status"] == "finished"]
    full = finished[~finished["subset"].astype(bool)] if "subset" in finished else finished
    ref = full[_is_reference(full, reference)].sort_values("id")
    if not ref.empty:
        a = ref.iloc[-1]
        same = full[(full["backbone"] == a["backbone"]) & (full["id"] != a["id"]) & ~_is_reference(full, reference)]
        if same.empty:
            same = full[(full["id"] != a["id"]) & ~_is_reference(full, reference)]
        if not same.empty:
            scored = same.assign(_score=same["id"].map(headline) if headline is not None else float("nan"))
            best = scored.dropna(subset=["_score"]).sort_values(["_score", "id"])
            return int(a["id"]), int((best if not best.empty else scored.sort_values("id"))["id"].iloc[-1])
    ids = sorted(finished["id"].tolist()) if len(finished) > 1 else sorted(runs["id"].tolist())
    return (ids[-2], ids[-1]) if len(ids) > 1 else (ids[-1], ids[-1])


MAX_PAIRS_TRIED = 200  # pairs of recent finished runs tried for one scored on the same items, when the default is not


def _apart(state: DBState, run_a: int, run_b: int) -> str:
    return why_not_comparable(cache.run_scores(state.location, state.version, run_a),
                              cache.run_scores(state.location, state.version, run_b))  # fmt: skip


def opening_pair(state: DBState, runs: pd.DataFrame) -> tuple[int, int, str]:
    """(A, B, what the view says): the default pair (`_default_pair`) when its runs share scores on the same items
    scored the same way; else the first such pair among the newest finished runs (the default's A first), and a
    sentence saying why the default was left; with no such pair, the default and why it cannot be compared."""
    first, second = _default_pair(runs, _headline_scores(state))
    why = _apart(state, first, second) if first != second else ""
    if not why:
        return first, second, ""
    finished = runs.loc[runs["status"] == "finished", "id"].astype(int).tolist()
    recent = sorted(finished, reverse=True)
    ordered = [first, *[r for r in recent if r != first]] if first in finished else recent
    tried = 0
    for i, a in enumerate(ordered):
        for b in ordered[i + 1:]:
            tried += 1
            if tried > MAX_PAIRS_TRIED:
                break
            if not _apart(state, a, b):
                a, b = sorted((a, b)) if a != first else (a, b)
                return a, b, (f"Runs {first} and {second} cannot be compared: {why}. Opened on runs {a} and {b}, "
                              "which were scored on the same items.")  # fmt: skip
    return first, second, f"Runs {first} and {second} cannot be compared: {why}. No two finished runs here were scored on the same items."


def _headline_scores(state: DBState) -> pd.Series:
    """Run id -> its mean clean score over the datasets of the headline suite ('sts' when scored, else the first) on
    that suite's main metric: what Compare opens on."""
    from bench.evaluate.suites.metadata import main_metric

    catalog = cache.score_catalog(state.location, state.version)
    if catalog.empty:
        return pd.Series(dtype=float)
    suites = sorted(catalog["suite"].unique().tolist())
    suite = "sts" if "sts" in suites else suites[0]
    metrics = sorted(catalog.loc[catalog["suite"] == suite, "metric"].unique().tolist())
    metric = main_metric(suite, metrics) or metrics[0]
    scores = cache.suite_scores(state.location, state.version, suite, (metric,), ("clean",))
    return scores.groupby("run_id")["value"].mean() if not scores.empty else pd.Series(dtype=float)


def show(state: DBState) -> None:
    st.header("Compare two runs")
    runs = cache.runs(state.location, state.version)
    first, second, opened = opening_pair(state, runs)
    if opened:
        st.info(opened)
    run_a = pick_run(runs, "cmp_a", "Run A", default=first, where=st.sidebar)
    run_b = pick_run(runs, "cmp_b", "Run B", default=second, where=st.sidebar)
    if run_a is None or run_b is None:
        return
    detail_a = cache.run_detail(state.location, state.version, run_a)
    detail_b = cache.run_detail(state.location, state.version, run_b)
    side = pd.DataFrame(
        {"field": SUMMARY_FIELDS, f"A: run {run_a}": [_summary(detail_a, f) for f in SUMMARY_FIELDS],
         f"B: run {run_b}": [_summary(detail_b, f) for f in SUMMARY_FIELDS]}
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
    chosen = st.sidebar.multiselect("Variants", variants, default=variants, key=f"cmp_variants_{suite}_{metric}")  # all: clean beside each attack

    def pick(frame: pd.DataFrame) -> pd.DataFrame:
        keep = (frame["suite"] == suite) & (frame["metric"] == metric) & frame["variant"].isin(chosen)
        return frame.loc[keep, ["score_id", "suite", "dataset", "variant", "metric", "value", "suite_version", "limit"]]

    imported = tuple(bool((runs.loc[runs["id"] == r, "type"] == grouping.REFERENCE).any()) if "type" in runs else False
                     for r in (run_a, run_b))  # fmt: skip
    trained = tuple(bool((runs.loc[runs["id"] == r, "kind"] == "train").any()) if "kind" in runs else False
                    for r in (run_a, run_b))  # fmt: skip
    table = comparison_table(state.location, state.version, pick(scores_a), pick(scores_b), imported, trained)
    st.subheader(f"B − A on {literal(suite)} · {literal(metric)}")
    if table.empty:
        st.info("Pick at least one variant in the sidebar.")
        return
    numbers = {c: "{:.2f}".format for c in ("A", "B", "B − A", "CI low", "CI high")} | {"p": p_text}
    # a missing number stays a null cell, which the grid draws as its placeholder: its raw value is what the grid's
    # accessible table and a copied cell read (an infinity there was read out as 'Infinity')
    st.dataframe(
        table.style.format({c: (lambda v, f=f: MISSING if is_absent(v) else f(v)) for c, f in numbers.items()}),
        hide_index=True,
        key="cmp_table",
        width="stretch",
        placeholder=MISSING,
        column_config={"p": st.column_config.Column(width=P_WIDTH)},  # '9.2e-08' whole (a 1-letter header sized it)
    )
    st.caption(
        f"95% paired bootstrap CI of B − A, uncorrected; note: real after {stats.CORRECTION_NAMES[CORRECTION]} over "
        f"the {int(table['p'].notna().sum())} differences of this table"
        + ("; a training run is one seed, so no verdict (run 3+ seeds)." if any(trained) else "."),
        help=f"{RESAMPLES:,} resamples of the items both runs scored (queries, pairs or test examples), and its "
        "two-sided p: the computation the leaderboard's rank and `bench results` use. The main board and `bench "
        "results` correct theirs the same way. Datasets without stored per-item scores, scores on other items (a "
        "`--limit` subset against the full set) or of another scoring version have no difference or CI and say "
        "why in 'note'; a difference within the rounding of an imported score is a tie.",
    )  # fmt: skip
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
