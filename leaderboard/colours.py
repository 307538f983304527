"""One colour per method, the same in every view and chart of a database: the methods the database holds (as the
board names them, leaderboard.grouping) in sorted order, each given the next colour of PALETTE. A chart's rows are
coloured by their method, so a method is blue in the board's chart, the robustness curves and the diagnostics alike,
whatever the filters keep; where one chart holds two rows of one method (two backbones, budgets or subsets), its
points also take a shape per row."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# Tableau 10, then the lighter halves of Tableau 20: 20 colours before one repeats
PALETTE = (
    "#4c78a8", "#f58518", "#e45756", "#72b7b2", "#54a24b", "#eeca3b", "#b279a2", "#ff9da6", "#9d755d", "#bab0ac",
    "#9ecae9", "#ffbf79", "#ff9d98", "#88d27a", "#83bcb6", "#f2cf5b", "#d6a5c9", "#fcbfd2", "#d8b5a5", "#79706e",
)  # fmt: skip


def method_colours(methods: Iterable[Any]) -> dict[str, str]:
    """Each method's colour: the methods in sorted order, PALETTE in turn."""
    names = sorted({str(m) for m in methods})
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(names)}


def colour_scale(labels: Sequence[str], methods: Sequence[Any], colours: Mapping[str, str]) -> dict[str, Any]:
    """An Altair/Vega-Lite scale for a colour channel over `labels` (a chart's rows, in its order), each row in the
    colour of its method (`methods`, one per label); a method the map does not know takes the next free colour."""
    shown = dict(colours)
    for method in methods:
        shown.setdefault(str(method), PALETTE[len(shown) % len(PALETTE)])
    return {"domain": list(labels), "range": [shown[str(m)] for m in methods]}


def repeats(methods: Sequence[Any]) -> bool:
    """Whether a chart holds two rows of one method: their colours alone would not tell them apart."""
    return len(set(map(str, methods))) < len(methods)
