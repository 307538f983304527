"""Widgets several views share: run filters, suite / metric pickers, tables with a CSV download."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st

from bench.evaluate.suites.metadata import main_metric
from leaderboard import cache, grouping, main_board
from leaderboard.grouping import RunFilters

MISSING = "–"  # what a table shows for a value a row does not have
BEST_STYLE = "background-color: rgba(33, 195, 84, 0.25); font-weight: 700"
# Colours of categories (methods, rows) in every chart: ten clearly distinct hues (Tableau 10), not shades of one.


def options(values: pd.Series) -> list:
    return sorted(values.dropna().unique().tolist(), key=lambda v: (str(type(v)), v))


FILTER_COLUMNS = (("method", "Method"), ("backbone", "Backbone"), ("budget", "Budget"), ("corpus", "Training corpus"),
                  ("seed", "Seed"))  # fmt: skip


@st.cache_data(show_spinner=False, max_entries=16)
def filter_options(location: str, version: tuple[int, ...]) -> dict[str, list]:
    """The choices of each run filter (sorting 10,000 runs' values once per database change, not per rerun)."""
    runs = cache.runs(location, version)
    out = {column: options(runs[column]) for column, _ in FILTER_COLUMNS}
    out["sweep"] = options(runs.loc[runs["sweep"] != "", "sweep"]) if "sweep" in runs else []
    out["has_references"] = bool("type" in runs and (runs["type"] == grouping.REFERENCE).any())
    return out


def _carried(prefix: str, name: str) -> str:
    """The widget key of a run filter in one view, primed with the value it had in any view: Streamlit forgets a
    widget's value once a rerun does not draw it, so the choice is also kept under a key no widget owns."""
    key = f"{prefix}_{name}"
    kept = f"filter_{name}"
    if key not in st.session_state and kept in st.session_state:
        st.session_state[key] = st.session_state[kept]
    return key


def _keep(prefix: str, name: str) -> None:
    st.session_state[f"filter_{name}"] = st.session_state.get(f"{prefix}_{name}")


def run_filter_widgets(state, prefix: str) -> RunFilters:  # noqa: ANN001 - a DBState
    """Sidebar multiselects for the group columns and the seed; an empty selection means all. The choices carry
    from one view to the next."""
    choices = filter_options(state.location, state.version)
    st.sidebar.markdown("**Filter runs** (empty = all)")
    chosen = {}
    for column, label in FILTER_COLUMNS:
        key = _carried(prefix, column)
        if key in st.session_state:  # a value carried from another view must be one of the choices here
            st.session_state[key] = [v for v in st.session_state[key] or [] if v in choices[column]]
        chosen[column] = st.sidebar.multiselect(label, choices[column], key=key, on_change=_keep, args=(prefix, column))
    sweeps = choices["sweep"]
    chosen_sweeps = []
    if sweeps:
        chosen_sweeps = st.sidebar.multiselect(
            "Sweep (one comparison group)", sweeps, key=f"{prefix}_sweep",
            help="Only the runs of this `bench sweep` grid: every method, seed and budget of one comparison.",
        )  # fmt: skip
    finished_only = not st.sidebar.checkbox(
        "Include unfinished runs (running / failed)",
        key=_carried(prefix, "unfinished"), on_change=_keep, args=(prefix, "unfinished"),
        help="Runs still running or that failed may have only some datasets scored.",
    )  # fmt: skip
    include_subsets = st.sidebar.checkbox(
        "Include runs scored on a subset (--limit)",
        key=_carried(prefix, "subsets"), on_change=_keep, args=(prefix, "subsets"),
        help="A subset score is not comparable with full-set scores: such runs form their own rows and tables, "
        "ranked only among themselves, never the reference.",
    )  # fmt: skip
    include_references = True
    if choices["has_references"]:
        include_references = st.sidebar.checkbox(
            "Show reference rows (imported results)", value=True, key=f"{prefix}_references",
            help="Published results imported with `bench import` (type 'reference'), beside trained methods.",
        )  # fmt: skip
    return RunFilters(
        methods=chosen["method"],
        backbones=chosen["backbone"],
        budgets=chosen["budget"],
        corpora=chosen["corpus"],
        seeds=[int(s) for s in chosen["seed"]],
        finished_only=finished_only,
        sweeps=chosen_sweeps,
        include_subsets=include_subsets,
        include_references=include_references,
    )


def pick_suite(catalog: pd.DataFrame, prefix: str, label: str = "Suite", where=st.sidebar) -> str | None:  # noqa: ANN001
    suites = options(catalog["suite"])
    if not suites:
        return None
    default = suites.index("sts") if "sts" in suites else 0
    return where.selectbox(label, suites, index=default, key=f"{prefix}_suite")


def pick_metric(catalog: pd.DataFrame, suite: str, prefix: str, where=st.sidebar) -> str | None:  # noqa: ANN001
    metrics = options(catalog.loc[catalog["suite"] == suite, "metric"])
    if not metrics:
        return None
    default = metrics.index(main_metric(suite, metrics))
    # The key carries the suite: switching suite starts from that suite's primary metric.
    return where.selectbox("Metric", metrics, index=default, key=f"{prefix}_metric_{suite}")


def slug(*parts: object) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", "-".join(str(p) for p in parts if p not in (None, ""))).strip("-")


def csv_button(frame: pd.DataFrame | bytes, name: str, key: str, label: str = "Download CSV") -> None:
    """frame: a table, or its CSV bytes already made (and cached)."""
    st.download_button(
        label,
        frame if isinstance(frame, bytes) else frame.to_csv(index=False).encode("utf-8"),
        file_name=f"{slug(name)}.csv",
        mime="text/csv",
        key=key,
        on_click="ignore",  # downloading must not rerun (and recompute) the page
    )


def shorten_settings(frame: pd.DataFrame, width: int = 24) -> pd.DataFrame:
    """The setting columns (method, backbone, budget, corpus) cut to `width` characters, so the scores stay in view;
    the full text is in the Run view and the downloads."""
    out = frame.copy()
    for column in grouping.GROUP_KEYS:
        if column in out:
            out[column] = out[column].astype(str).map(lambda t: grouping.shorten(t, width))
    return out


def json_button(data: bytes, name: str, key: str, label: str = "Download JSON") -> None:
    st.download_button(label, data, file_name=f"{slug(name)}.json", mime="application/json", key=key, on_click="ignore")


def best_mask(column: pd.Series) -> list[str]:
    values = pd.to_numeric(column.map(lambda v: float(v) if isinstance(v, float) else np.nan), errors="coerce")
    if values.notna().sum() < 2:
        return [""] * len(column)
    best = values.max()
    return [BEST_STYLE if (not math.isnan(v) and v == best) else "" for v in values]


@dataclass(frozen=True)
class ColumnLook:
    """How a table's other columns are shown: formats, printf formats ("%.1f") of other numeric columns present
    (size columns, rank), shown narrow; pinned, a column kept in view while the table scrolls sideways (the row's
    name); help_text, a header tooltip per column."""

    formats: dict[str, str] | None = None
    pinned: str | None = None
    help_text: dict[str, str] | None = None


def show_table(frame: pd.DataFrame, score_columns: list[str], highlight: bool, key: str, digits: int = 2,
               look: ColumnLook = ColumnLook(), best: dict[str, list[bool]] | None = None,
               selectable: bool = False):  # noqa: ANN201 - the dataframe's selection event when selectable  # fmt: skip
    """A sortable table: score cells sort by their value and show mean ± CI; the best per column highlighted.

    look: the other columns' formats, the pinned column and the header tooltips (`ColumnLook`);
    best: per score column, which rows to highlight (the best and the rows tied with it: `leaderboard.comparable`);
    selectable: a click on a row selects it (the event is returned).
    Only a table that needs it (a highlight, or mean ± CI cells) goes through a pandas Styler, whose cost grows
    with every cell; plain numbers are formatted by the grid itself.
    """
    formats, pinned, help_text = look.formats, look.pinned, look.help_text
    formats = {c: f for c, f in (formats or {}).items() if c in frame.columns}
    config: dict = {}
    help_text = {c: h for c, h in (help_text or {}).items() if c in frame.columns}
    if pinned in frame.columns:
        config[pinned] = st.column_config.TextColumn(pinned=True, help=help_text.pop(pinned, None))
    for col, text in help_text.items():
        if col not in score_columns and col not in formats:
            config[col] = st.column_config.Column(help=text)
    # a click on any cell (or the row's tick box) selects its row
    select = {"on_select": "rerun", "selection_mode": ["single-row", "single-cell"]} if selectable else {}
    seed_cells = any(isinstance(v, main_board.SeedMean) for col in score_columns for v in frame[col].head(1000))
    # a missing value (a variant a row was not scored on): such a table goes through the Styler, whose display text
    # shows it as MISSING
    missing = bool(frame.isna().to_numpy().any())
    if not highlight and not seed_cells and not missing:
        config.update({col: st.column_config.NumberColumn(format=fmt, width="small") for col, fmt in formats.items()})
        config.update({col: st.column_config.NumberColumn(format=f"%.{digits}f", help=help_text.get(col)) for col in score_columns})
        return st.dataframe(frame, hide_index=True, key=key, width="stretch", column_config=config, placeholder=MISSING,
                            **select)  # fmt: skip
    frame = absent_as_null(frame, score_columns)
    styler = frame.style.format(na_rep=MISSING)
    styler = styler.format(lambda v: MISSING if is_absent(v) else main_board.format_cell(v, digits), subset=score_columns,
                           na_rep=MISSING)  # fmt: skip
    for col, fmt in formats.items():
        styler = styler.format(lambda v, fmt=fmt: MISSING if is_absent(v) else fmt % v, subset=[col])
    if highlight and score_columns and best is not None:
        styler = styler.apply(lambda column: [BEST_STYLE if b else "" for b in best.get(column.name, [False] * len(column))],
                              subset=score_columns, axis=0)  # fmt: skip
    elif highlight and score_columns:
        styler = styler.apply(best_mask, subset=score_columns, axis=0)
    config.update({col: st.column_config.Column(help=help_text[col]) for col in score_columns if col in help_text})
    return st.dataframe(styler, hide_index=True, key=key, width="stretch", column_config=config, placeholder=MISSING,
                        **select)  # fmt: skip


def is_absent(value: object) -> bool:
    return value is None or (isinstance(value, float) and (math.isnan(value) or math.isinf(value)))


def absent_as_null(frame: pd.DataFrame, score_columns: list[str]) -> pd.DataFrame:
    """Missing scores (None, NaN, an infinity) as null cells, which the grid draws as its placeholder (MISSING).

    A cell's raw value is what the grid's accessible table (screen readers) and a copied cell read, whatever its
    display text: an infinity held there to sort it last was read out as 'Infinity'. The rows reach the page in
    their order already (missing scores last); a click on a header sorts a null cell as the grid does (with 0)."""
    out = frame.copy()
    for column in score_columns:
        out[column] = pd.Series([None if is_absent(v) else v for v in out[column]], index=out.index, dtype=object)
    return out
