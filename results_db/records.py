"""What a suite produces and the database stores: plain records, importable without SQLAlchemy or pandas (a suite,
an attack or a plug-in builds them without loading the database layer)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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
