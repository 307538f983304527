"""What one table of the main board shows: its frame (shortened labels, a column per variant, the difference,
sizes), the cells highlighted as best, its title, and the notes under the tables that say how to read them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from bench.evaluate.attacks import CLEAN
from bench.report import stats
from leaderboard import attack_curves, columns, comparable, grouping, main_board, ranking
from leaderboard.text import literal
from leaderboard.views.board_table import MAX_RANKED, MainTable

LABEL_WIDTH = 20  # characters of a setting shown in the table (the full text: Run view, CSV / JSON)
MAX_VARIANT_COLUMNS = 4  # attacked variants shown one by one; more: one mean column per attack family


def table_frame(table: MainTable, part: main_board.Leaderboard, variant: str, rows: int) -> tuple[pd.DataFrame, list[str], dict]:
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


def best_cells(shown: pd.DataFrame, score_columns: list[str], part: main_board.Leaderboard, table: MainTable,
               variant: str) -> dict[str, list[bool]]:  # fmt: skip
    """Per score column, the rows to highlight as best: what the significance rank says, not the largest number.

    On the ranked variant's columns (its headline column and each dataset's), a row the rank judged is best when its
    rank on that dataset is 1: the top row and every row the Holm-corrected paired bootstrap does not call worse
    than it (`leaderboard.ranking`, the test `bench results` stars with), so rows that cannot be told apart are all
    best; on an average column, a row best on every dataset. A row the rank did not judge (no per-item scores, as an
    imported result; past the MAX_RANKED first rows) is best only when its value ties the column's top within the
    rounding its file stated (`leaderboard.comparable`). Another variant's columns have no test behind them (the rank
    runs on one variant): nothing is highlighted there."""
    groups = [int(g) for g in part.groups[: len(shown)]]
    imported = (part.info["type"] == grouping.REFERENCE).to_numpy()[: len(shown)] if "type" in part.info else np.zeros(len(shown), bool)

    def numbers(column: str) -> np.ndarray:
        return pd.to_numeric(shown[column].map(lambda v: float(v) if isinstance(v, float) else np.nan)).to_numpy(dtype=float)

    datasets = [c for c in score_columns if c in part.datasets]
    step_of = {c: comparable.steps(numbers(c), imported) for c in datasets}
    # an average of rounded scores is off by at most the largest of their half-steps: its own digits say nothing
    coarsest = np.nanmax(np.stack(list(step_of.values())), axis=0) if step_of else np.zeros(len(shown))
    out = {}
    for c in score_columns:
        judged_on = _judged_datasets(c, part, table, variant)
        if judged_on is None:
            out[c] = [False] * len(shown)
            continue
        values = numbers(c)
        steps = step_of.get(c)
        if steps is None:
            steps = np.maximum(comparable.steps(values, imported), coarsest)
        by_value = comparable.best_cells(values, steps)
        judged = [all(g in table.tested.get(d, ()) for d in judged_on) for g in groups]
        tied = [all(g in table.tied_best.get(d, ()) for d in judged_on) for g in groups]
        out[c] = [bool(t) if j else bool(v) for j, t, v in zip(judged, tied, by_value)]
    return out


def _judged_datasets(column: str, part: main_board.Leaderboard, table: MainTable, variant: str) -> list[str] | None:
    """The datasets the rank judged that a score column shows (an average column: all of them), None for a column
    with no test behind it (another variant's, a family mean)."""
    if column in part.datasets:
        return [column]
    if column == variant:  # the ranked variant's headline: one dataset, or the average over them
        return [table.headline] if table.headline in part.datasets else list(part.datasets)
    return None


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


def counted(n: int, noun: str) -> str:
    """'1 row', '3 rows'."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def notes_line(table: MainTable, highlight: bool) -> str:
    """The one line under the tables: what is shown and how to read it; the statistics go in the expander."""
    board = table.board
    seeds = int(board.info["seeds"].sum())
    parts = [f"{counted(len(board), 'row')}, {counted(seeds, 'seed run')}", "cell: mean ± 95% CI over seeds, to the digits its seeds support"]
    correction = stats.CORRECTION_NAMES[ranking.CORRECTION]
    parts.append(f"highlighted: best, and every row not significantly worse than it ({correction}), on the ranked variant"
                 if highlight else "geometry: no 'best' highlighted")  # fmt: skip
    if table.reference:
        parts.append(f"Δ vs {literal(table.reference)}: 95% CI, * = real after {stats.CORRECTION_NAMES[ranking.CORRECTION]}")
    parts.append("rank: 1 = not significantly worse than the best" if table.ranked_rows else "rank: – (no per-item scores stored)")
    return " · ".join(parts)


def show_notes(table: MainTable, highlight: bool, variant: str) -> None:
    st.caption(notes_line(table, highlight))
    with st.expander("How the cells, Δ and rank are computed"):
        _statistics(table, highlight, variant)


def _statistics(table: MainTable, highlight: bool, variant: str) -> None:
    board = table.board
    notes = ["A cell is the mean over seeds, shown as mean ± 95% CI half-width over the seeds (Student t) from 3 seeds "
             "on, the half-width to two significant digits and the mean to the same place; with 2 seeds as "
             "mean (2 seeds): their variance is not estimated. The ± covers the seeds only: the uncertainty of the "
             "items (queries, pairs, texts) is in the Δ column's interval and in the rank, which cover both."]  # fmt: skip
    if highlight:
        notes.append("Highlighted: on the ranked variant's columns, the rows of rank 1 on that dataset (the best and "
                     "every row the paired bootstrap, after the "
                     f"{stats.CORRECTION_NAMES[ranking.CORRECTION]} correction, does not call worse: rows that cannot "
                     "be told apart are all highlighted; on an average column, rows of rank 1 on every dataset). A row "
                     "without per-item scores is highlighted when its value ties the top within its stated rounding. "
                     "Other variants' columns are not tested, so not highlighted: rank on them to see theirs.")  # fmt: skip
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
