"""Leaderboard: which method wins on which suite, under which budget. One row per (method, backbone, budget,
training corpus) or reference model; the suite's headline score on the clean texts beside each attacked variant,
the difference from the reference row with its 95% CI, and a rank that respects significance (leaderboard.ranking,
the same paired bootstrap as Compare and `bench results`); then each dataset, model size and provenance.

Rows scored on a `--limit` subset are never ranked, compared or merged with full-set rows: when shown, each subset
gets its own table under the full-set one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from bench.evaluate.attacks import CLEAN, order_variants
from bench.report import stats
from leaderboard import aggregates, attack_curves, cache, columns, comparable, grouping, main_board, ranking, significance
from leaderboard.queries import DBState
from leaderboard.text import literal
from leaderboard.views.common import (
    CATEGORY_SCHEME, ColumnLook, csv_button, json_button, pick_metric, pick_suite, run_filter_widgets, show_table,
)  # fmt: skip

MAX_RANKED = 20  # rows (best averages first) per table ranked by bootstrap: each costs a re-scoring per resample
MAX_BARS = 10  # rows drawn in the per-dataset bar chart
MAX_SCATTER = 500  # rows drawn in the size-vs-score plot
ROWS_SHOWN = (100, 500, 2000)  # the table's length choices (styling every cell costs time; the CSV has all rows)
LABEL_WIDTH = 20  # characters of a setting shown in the table (the full text: Run view, CSV / JSON)
MAX_VARIANT_COLUMNS = 4  # attacked variants shown one by one; more: one mean column per attack family
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


def _headline(board: main_board.Leaderboard) -> str:
    return board.datasets[0] if len(board.datasets) == 1 else board.score_columns[len(board.datasets)]


@st.cache_data(show_spinner=False, max_entries=64)
def main_table(query: BoardQuery) -> MainTable:
    location, version, suite, metric, variant = query.location, query.version, query.suite, query.metric, query.variant
    filters, include_parts, reference = query.filters, query.include_parts, query.reference
    limits = cache.score_limits(location, version, suite)
    runs = _board_runs(location, version, suite, filters, limits)
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
    reference_codes = _reference_codes(board, reference)
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
    trained = significance.trained_groups(runs)
    seeds = significance.seed_evidence(seed_reps, items, key, trained)
    for _, _, part in board.tables():  # ranked only among rows of the same backbone and subset
        ranks = significance.rank_partition(reps, items, key, set(part.groups[:MAX_RANKED].tolist()), seeds)
        mean_rank, low, high = (pd.concat([a, b]) for a, b in ((mean_rank, ranks.mean_rank), (low, ranks.low), (high, ranks.high)))
        for dataset, pairs in ranks.better.items():
            better.setdefault(dataset, set()).update(pairs)
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
    return MainTable(board, headline, variants, means, halves, counts, delta, reference, ranked, bar_ci, better)


def _board_runs(location: str, version: tuple[int, ...], suite: str, filters: grouping.RunFilters,
                limits: pd.DataFrame) -> pd.DataFrame:  # fmt: skip
    """The runs of the main board: filtered, subsets marked, scoring versions of the suite kept apart."""
    runs = filters.apply(grouping.mark_subsets(cache.runs(location, version), limits)).reset_index(drop=True)
    return grouping.split_scoring_versions(runs, cache.suite_versions(location, version, suite))


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
    runs = _board_runs(location, version, suite, filters, cache.score_limits(location, version, suite))
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
    codes = _reference_codes(table.board, reference)
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
        spec = (alt.Chart(profile).mark_line(interpolate="step-after")
                .encode(x=alt.X("threshold:Q", title=f"{metric} threshold τ", scale=alt.Scale(zero=False)),
                        y=alt.Y("share:Q", title="share of runs with score > τ", scale=alt.Scale(domain=[0, 1])),
                        color=alt.Color("row:N", sort=order, scale=alt.Scale(scheme=CATEGORY_SCHEME),
                                        legend=alt.Legend(orient="right", labelLimit=0, title=None)),  # inside the chart
                        tooltip=["row", alt.Tooltip("threshold:Q", format=".2f"), alt.Tooltip("share:Q", format=".2f")])
                .properties(height=260).to_dict())  # fmt: skip
    return agg, spec


def _aggregates(query: BoardQuery) -> None:
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


def _reference_codes(board: main_board.Leaderboard, reference: str | None) -> dict[tuple[str, str], int]:
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


def _display(table: MainTable, part: main_board.Leaderboard, variant: str, rows: int) -> tuple[pd.DataFrame, list[str], dict]:
    """The frame one table shows, its score columns and the full text of shortened labels (for the headers' help)."""
    part = part.rows(np.arange(len(part)) < rows)  # SeedMean cells for the rows shown only
    cells = part.cells
    info = part.info
    full: dict[str, list[str]] = {}
    for column in columns.labels():
        values = info[column].astype(str)
        short = grouping.shorten_distinct(values, LABEL_WIDTH)  # two rows never read alike
        changed = sorted(set(values[values != short]))
        if changed:
            full[column] = changed
        cells[column] = short
    # Each variant's headline score: the SeedMean cells of the ranked variant, plain means (or ± CI) of the others.
    rows_of = pd.Index(table.board.groups).get_indexer(part.groups[:rows])
    variant_columns = []
    present = [v for v in table.variants if v in table.variant_mean]
    attacked = [v for v in present if v != CLEAN]
    by_family = len(attacked) > MAX_VARIANT_COLUMNS
    for v in present if not by_family else [v for v in present if v == CLEAN or v == variant]:
        mean, half, count = (getattr(table, f"variant_{k}")[v][rows_of] for k in ("mean", "half", "count"))
        cells[v] = pd.Series([np.nan if np.isnan(m) else main_board.SeedMean(m, h, int(c)) for m, h, c in zip(mean, half, count)],
                             index=cells.index, dtype=object)  # fmt: skip
        variant_columns.append(v)
    if by_family:  # too many to show one by one: the mean over each family's variants (elong-2 ... elong-rand)
        for family in dict.fromkeys(attack_curves.variant_family(v) for v in attacked):
            members = [v for v in attacked if attack_curves.variant_family(v) == family]
            with np.errstate(all="ignore"):
                cells[f"{family} (mean)"] = np.nanmean(np.stack([table.variant_mean[v][rows_of] for v in members]), axis=0)
            variant_columns.append(f"{family} (mean)")
    delta_column = f"Δ vs {table.reference}" if table.reference else None
    if delta_column:
        cells[delta_column] = [table.delta[i] for i in rows_of]
    datasets = [] if len(part.datasets) == 1 else [c for c in part.score_columns if c != table.headline]
    settings = [c for c in columns.names("settings") if c in cells]
    front = settings + [c for c in columns.names("rank") if c in cells] + variant_columns
    front += [delta_column] if delta_column else []
    front += [c for c in datasets if c not in front]
    rest = [c for c in columns.names("size") if c in cells]
    shown = cells[front + rest]
    # Columns with nothing in this table (a subset scored clean only, sizes never recorded) say nothing: left out.
    empty = [c for c in shown.columns if c not in settings and shown[c].isna().all()]
    shown = shown.drop(columns=empty)
    variant_columns = [c for c in variant_columns if c not in empty]
    datasets = [c for c in datasets if c not in empty]
    if (shown.get("type", pd.Series(dtype=str)) != grouping.REFERENCE).all():
        shown = shown.drop(columns="type", errors="ignore")
    if not shown["subset"].astype(bool).any():
        shown = shown.drop(columns="subset")
    # A variant column of the ranked variant is the headline column itself: one copy only.
    return shown, [*variant_columns, *[c for c in datasets if c in shown]], full


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
    # is labelled by its model's name (_reference_codes)
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
        shown, score_columns, full = _display(table, part, variant, rows)
        best = best_cells(shown, score_columns, part) if highlight and len(part) > 1 else None
        help_text = columns.help_texts()
        help_text.update({c: "shortened; full names: " + "; ".join(literal(t) for t in values) for c, values in full.items()})
        for v in table.variants:
            help_text.setdefault(v, f"{literal(headline)} on the {literal(v)} texts: mean over seeds (± 95% CI half-width, n=seeds)")
        event = show_table(shown, score_columns, highlight=highlight,
                           key=f"main_table_{label or 'full'}_{abs(hash(backbone)) % 10**8}_{number}_{_nonce()}",
                           look=ColumnLook(formats=columns.formats(), pinned="method", help_text=help_text),
                           best=best, selectable=True)  # fmt: skip
        selected = _selected_row(event)
        if selected is not None and selected < len(part):
            _open_run(int(part.info["latest run"].iloc[selected]))
        if rows < len(part):
            st.caption(f"The first {rows} of {len(part)} rows (best first); pick more in the sidebar.")
    _notes(table, highlight, variant)
    csv, json_bytes = downloads(query)
    left, right = st.columns(2)
    with left:
        csv_button(csv, f"leaderboard-{suite}-{metric}-{variant}", key="main_csv")
    with right:
        json_button(json_bytes, f"leaderboard-{suite}-{metric}-{variant}", key="main_json")
    _charts(chart_specs(query), metric, table.headline)
    _aggregates(query)


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


def best_cells(shown: pd.DataFrame, score_columns: list[str], part: main_board.Leaderboard) -> dict[str, list[bool]]:
    """Per score column, the rows to highlight: the best value and every value tied with it, where an imported
    reference row's score ties within the rounding its file stated (`leaderboard.comparable`)."""
    imported = (part.info["type"] == grouping.REFERENCE).to_numpy()[: len(shown)] if "type" in part.info else np.zeros(len(shown), bool)

    def numbers(column: str) -> np.ndarray:
        return pd.to_numeric(shown[column].map(lambda v: float(v) if isinstance(v, float) else np.nan)).to_numpy(dtype=float)

    datasets = [c for c in score_columns if c in part.datasets]
    step_of = {c: comparable.steps(numbers(c), imported) for c in datasets}
    # an average of rounded scores is off by at most the largest of their half-steps: its own digits say nothing
    coarsest = np.nanmax(np.stack(list(step_of.values())), axis=0) if step_of else np.zeros(len(shown))
    out = {}
    for c in score_columns:
        values = numbers(c)
        steps = step_of.get(c)
        if steps is None:
            steps = np.maximum(comparable.steps(values, imported), coarsest)
        out[c] = comparable.best_cells(values, steps).tolist()
    return out


def table_title(subset: str, backbone: str, part: main_board.Leaderboard) -> str:
    """'Backbone minilm · full datasets' or 'Backbone random-bert-mini · subset limit 300 (n = 300)', then what its
    rows are ranked among (Markdown: the stored names are shown, not interpreted)."""
    where = f"Backbone {literal(backbone)}"
    scoring = str(part.info["scoring"].iloc[0]) if "scoring" in part.info and len(part) else ""
    if scoring:  # rows of another version of the suite's scoring: a table of their own
        where += f" · {literal(scoring)}"
    if subset:
        n_text = part.info["n"].iloc[0] if "n" in part.info else ""
        return f"{where} · scored on a subset ({literal(subset)}, n = {literal(n_text)}): ranked only among themselves"
    return f"{where} · full datasets: ranked among themselves"


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


def counted(n: int, noun: str) -> str:
    """'1 row', '3 rows'."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def notes_line(table: MainTable, highlight: bool) -> str:
    """The one line under the tables: what is shown and how to read it; the statistics go in the expander."""
    board = table.board
    seeds = int(board.info["seeds"].sum())
    parts = [f"{counted(len(board), 'row')}, {counted(seeds, 'seed run')}", "cell: mean ± 95% CI (n = seeds)"]
    parts.append("highlighted: best per column, ties included" if highlight else "geometry: no 'best' highlighted")
    if table.reference:
        parts.append(f"Δ vs {literal(table.reference)}: 95% CI, * = real after {stats.CORRECTION_NAMES[ranking.CORRECTION]}")
    parts.append("rank: 1 = not significantly worse than the best" if table.ranked_rows else "rank: – (no per-item scores stored)")
    return " · ".join(parts)


def _notes(table: MainTable, highlight: bool, variant: str) -> None:
    st.caption(notes_line(table, highlight))
    with st.expander("How the cells, Δ and rank are computed"):
        _statistics(table, highlight, variant)


def _statistics(table: MainTable, highlight: bool, variant: str) -> None:
    board = table.board
    notes = ["A cell is the mean over seeds, shown as mean ± 95% CI half-width (n=seeds, Student t) from 3 seeds on; "
             "with 2 seeds as mean (n=2): their variance is not estimated."]  # fmt: skip
    if highlight:
        notes.append("Highlighted: the best value in each column of each table, and every value tied with it (an "
                     "imported score is known to the digits its file gave: a difference below half a step of them "
                     "is a tie).")  # fmt: skip
    else:
        notes.append("diag measures describe geometry; no value is 'best', so none is highlighted.")
    if not board.complete_average:
        notes.append("Averages are left empty for rows missing a dataset, so averages compare like with like.")
    st.caption(" ".join(notes))
    if table.reference:
        st.caption(
            f"Δ vs {literal(table.reference)}: each row minus the {literal(table.reference)} row of the same backbone and subset on "
            f"{literal(variant)}, with its 95% CI: a paired bootstrap ({stats.DEFAULT_RESAMPLES:,} resamples of the "
            "items both scored) for one run against one run; for several seeds, the seeds' variance plus that "
            "bootstrap over the items (t, Welch-Satterthwaite; under 3 seeds the items alone: seed variance not "
            f"estimated), as `bench results` computes it, for the {MAX_RANKED} best rows. The CI is uncorrected; * = the difference is real after the "
            f"{stats.CORRECTION_NAMES[ranking.CORRECTION]} correction over this table's differences from its "
            "reference (every row and dataset; `bench results` corrects its table's the same way). With several "
            "datasets: the mean difference and on how many datasets it is starred."
        )
    if table.ranked_rows:
        st.caption(
            "rank: per dataset, rows not significantly worse than the best are tied with it (rank 1); any other row "
            "is 1 + the rows significantly better than it; the mean over datasets. rank 95% CI: the best rank a row "
            "can have (1 + rows significantly better) to the worst (rows − rows significantly worse). Every verdict "
            f"is the paired bootstrap Compare and `bench results` give the same pair ({ranking.RESAMPLES:,} "
            f"resamples), significant after the {stats.CORRECTION_NAMES[ranking.CORRECTION]} correction over every "
            f"pair of rows on every dataset of the table; a row trained with fewer than 3 seeds is never called "
            f"different (one seed says nothing of the next). The {MAX_RANKED} best rows of each table are ranked; subset "
            "rows only among themselves. A row without per-item scores (an imported published result) has no rank: '–'."
        )
    else:
        st.caption("rank: no per-item scores stored for these runs, so no significance rank.")
    st.caption("n: the items each row's scores rest on ('–' where the source did not say, as for imported results). "
               "Size columns come from the model ('–' when the run did not record them).")  # fmt: skip


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
    bars_spec = None
    if not frame.empty:
        order = labels.head(MAX_BARS).tolist()
        color = alt.Color("row:N", sort=order, scale=alt.Scale(scheme=CATEGORY_SCHEME),
                          legend=alt.Legend(orient="bottom", columns=1, labelLimit=0, title=None))  # fmt: skip
        x = alt.X("dataset:N", sort=grouping.order_datasets(frame["dataset"].unique().tolist()), title=None,
                  axis=alt.Axis(labelAngle=0))  # fmt: skip
        # A point per row and dataset, side by side, with its 95% interval, on an axis that spans the data and the
        # intervals (bars from 0 would make 82.05 and 81.91 look the same).
        domain = score_domain(frame[["score", "low", "high"]].to_numpy(dtype=float).ravel())
        y = alt.Y("score:Q", title=metric, scale=alt.Scale(domain=domain, zero=False, nice=False))
        base = alt.Chart(frame).encode(x=x, xOffset=alt.XOffset("row:N", sort=order), color=color)
        points = base.mark_point(filled=True, size=60).encode(
            y=y, tooltip=["row", "dataset", alt.Tooltip("score:Q", format=".2f"), alt.Tooltip("low:Q", format=".2f"),
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
                color=alt.Color("method:N", scale=alt.Scale(scheme=CATEGORY_SCHEME),
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


def _charts(specs: tuple[dict | None, dict | None], metric: str, headline: str) -> None:
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
