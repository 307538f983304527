"""The main board's columns, declared once (source, format, help, section, views): the grouping computes the stored
ones per run, the board carries them per row, and the table orders, formats and explains every one, all by looping
over COLUMNS. A new column is one entry here (mteb's leaderboard declares its columns the same way).

No streamlit and no pandas here: a declaration and how to read one value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


BOARD = "board."  # a source under it is computed by the board (its grouping, ranking, seeds), not stored by a run


@dataclass(frozen=True)
class BoardColumn:
    """One main-board column.

    name: its header; source: where its value comes from: "model_info.KEY" (Run.model_info; MTEB's ModelMeta names
    accepted too) or a column of the run list ("seed"), the first one present wins, or "board.WHAT" for what the
    board computes itself (a row's settings, its rank, its seeds); format: the printf format the table shows a number
    with ("": text); section: where the table shows it ("settings": the row's settings, first; "rank": after them;
    "size": after the scores, with seeds, n and the other model facts); scale: a stored value is divided by it
    (parameters in millions); help: the header's tooltip; views: the views that show it ("main": the main board's
    table, "download": its CSV / JSON); label: a setting shown shortened (to the table's label width).
    """

    name: str
    source: tuple[str, ...]
    format: str = "%g"
    section: str = "size"
    scale: float = 1.0
    help: str = ""
    views: tuple[str, ...] = ("main", "download")
    label: bool = False

    @property
    def stored(self) -> bool:
        """Read from what a run stored (else: computed by the board)."""
        return not any(path.startswith(BOARD) for path in self.source)

    def value(self, run: dict[str, Any]) -> float:
        """This column's value for one run (its run-list row as a dict); NaN when no source holds a positive number."""
        for path in self.source:
            where, _, key = path.partition(".")
            found = (run.get(where) or {}).get(key) if key else run.get(where)
            if isinstance(found, dict):
                found = None
            if isinstance(found, (int, float)) and not isinstance(found, bool) and math.isfinite(found) and found > 0:
                return float(found) / self.scale
        return math.nan


PARAMS = "params (M)"

# Every fixed column of the main board, in the order the table shows each section's. The score columns (one per
# attacked variant, the difference from the reference, one per dataset) are the suite's, named by what it scored.
COLUMNS: tuple[BoardColumn, ...] = (
    BoardColumn("method", ("board.group",), "", "settings", label=True, help="The method, or the model scored"),
    BoardColumn("backbone", ("board.group",), "", "settings", label=True, help="The model the method trained from"),
    BoardColumn("budget", ("board.group",), "", "settings", label=True, help="The training budget ('–': untrained)"),
    BoardColumn("corpus", ("board.group",), "", "settings", label=True, help="The training corpus"),
    BoardColumn("rank", ("board.ranking",), "%.2f", "rank",
                help="Mean over datasets of the significance rank (1 = not significantly worse than the best)"),
    BoardColumn("rank 95% CI", ("board.ranking",), "", "rank",
                help="The best rank the row can have to the worst, by the paired bootstrap"),
    BoardColumn("seeds", ("board.seeds",), "%d", help="Seed runs the row's cells are the mean of"),
    BoardColumn("n", ("board.items",), "", help="Items each score rests on ('–': the source did not say)"),
    BoardColumn(PARAMS, ("model_info.parameters", "model_info.n_parameters", "model_info.params"), "%.1f",
                scale=1e6, help="Parameters of the model, in millions (Run.model_info)"),  # fmt: skip
    BoardColumn("dim", ("model_info.embedding_dim", "model_info.embed_dim", "model_info.dim"), "%d",
                help="Embedding dimension"),  # fmt: skip
    BoardColumn("max tokens", ("model_info.max_tokens", "model_info.max_seq_length", "model_info.max_len"), "%d",
                help="The longest input the model was scored with, in tokens"),  # fmt: skip
    BoardColumn("type", ("board.group",), "", help="trained, untrained, or reference (an imported published score)"),
    BoardColumn("subset", ("board.group",), "", help="The items the row was scored on when not the full sets"),
    BoardColumn("run ids", ("board.runs",), "", help="The runs of the row (click a row to open its latest)"),
)


def stored(columns: tuple[BoardColumn, ...] | None = None) -> tuple[BoardColumn, ...]:
    """The columns read from what runs stored (the grouping computes them per run, the board carries them per row)."""
    return tuple(c for c in (COLUMNS if columns is None else columns) if c.stored)


def names(section: str | None = None, columns: tuple[BoardColumn, ...] | None = None, view: str = "main",
          stored_only: bool = False) -> list[str]:  # fmt: skip
    """The names of a section's columns (every section: None) that `view` shows, in their order."""
    chosen = stored(columns) if stored_only else (COLUMNS if columns is None else columns)
    return [c.name for c in chosen if (section is None or c.section == section) and view in c.views]


def labels(columns: tuple[BoardColumn, ...] | None = None) -> list[str]:
    """The settings shown shortened."""
    return [c.name for c in (COLUMNS if columns is None else columns) if c.label]


def formats(columns: tuple[BoardColumn, ...] | None = None) -> dict[str, str]:
    return {c.name: c.format for c in (COLUMNS if columns is None else columns) if c.format}


def help_texts(columns: tuple[BoardColumn, ...] | None = None) -> dict[str, str]:
    return {c.name: c.help for c in (COLUMNS if columns is None else columns) if c.help}
