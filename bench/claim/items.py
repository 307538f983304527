"""A score's per-item values as the statistics read them (`bench.report.stats`)."""

from __future__ import annotations

from typing import Any


def items_of(db: Any, score_id: int) -> dict | None:
    """{"aggregate", "item_ids", "values", "gold"} of one stored score, or None when it kept no items."""
    items = db.score_items(int(score_id))
    if items is None:
        return None
    return {"aggregate": items.aggregate, "item_ids": items.item_ids, "values": items.values, "gold": items.gold}
