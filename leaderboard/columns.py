"""The main board's columns read from what a run stored, declared once: the grouping computes each of them per run,
the board carries them per row and the table shows them, all by looping over COLUMNS. A new column from a stored
field is one entry here (mteb's leaderboard declares its columns the same way).

No streamlit and no pandas here: a declaration and how to read one value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class BoardColumn:
    """One main-board column from a stored field of a run.

    name: its header; source: where a run stored it, "model_info.KEY" (Run.model_info; MTEB's ModelMeta names
    accepted too) or a column of the run list ("seed"), the first one present wins; format: the printf format the
    table shows it with; section: where the table shows it ("settings": after the row's settings, before the rank;
    "size": after the scores, with seeds, n and the other model facts);
    scale: the stored value is divided by it (parameters in millions); help: the header's tooltip.
    """

    name: str
    source: tuple[str, ...]
    format: str = "%g"
    section: str = "size"
    scale: float = 1.0
    help: str = ""

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

COLUMNS: tuple[BoardColumn, ...] = (
    BoardColumn(PARAMS, ("model_info.parameters", "model_info.n_parameters", "model_info.params"), "%.1f",
                scale=1e6, help="Parameters of the model, in millions (Run.model_info)"),  # fmt: skip
    BoardColumn("dim", ("model_info.embedding_dim", "model_info.embed_dim", "model_info.dim"), "%d",
                help="Embedding dimension"),  # fmt: skip
    BoardColumn("max tokens", ("model_info.max_tokens", "model_info.max_seq_length", "model_info.max_len"), "%d",
                help="The longest input the model was scored with, in tokens"),  # fmt: skip
)


def names(section: str | None = None, columns: tuple[BoardColumn, ...] | None = None) -> list[str]:
    return [c.name for c in (COLUMNS if columns is None else columns) if section is None or c.section == section]


def formats(columns: tuple[BoardColumn, ...] | None = None) -> dict[str, str]:
    return {c.name: c.format for c in (COLUMNS if columns is None else columns)}


def help_texts(columns: tuple[BoardColumn, ...] | None = None) -> dict[str, str]:
    return {c.name: c.help for c in (COLUMNS if columns is None else columns) if c.help}
