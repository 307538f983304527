"""What a suite produces and the database stores: plain records, importable without SQLAlchemy or pandas (a suite,
an attack or a plug-in builds them without loading the database layer)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


def json_column(value: Any) -> dict[str, Any]:
    """A JSON column's value as a dict (SQLite hands back text, PostgreSQL a dict; anything else: empty)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


@dataclass
class ItemValues:
    """Per-item values of one score (see `ScoreItems`)."""

    aggregate: str  # "mean" | "spearman"
    item_ids: list[str]
    values: list[float]
    gold: list[float] | None = None


@dataclass
class ScoreRecord:
    suite: str
    dataset: str
    metric: str
    value: float
    n: int = 0
    variant: str = "clean"
    items: ItemValues | None = field(default=None, repr=False)
    info: dict[str, Any] | None = None  # see Score.info
