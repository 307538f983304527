"""Which scores may be set against each other, and which differences are ties (pandas only, no streamlit).

Two scores are compared (a difference, a "best", a probability of improvement) only when they rest on the same
items scored the same way: the same subset (`--limit`: none, or the same N) and the same version of the suite's
scoring. A score imported from published results (`bench import`, Run.kind "reference") is known only to the digits
its file gave (MTEB writes fractions to 6 decimals: 82.0325 after lenbench's x100), so a difference smaller than
half a step of those digits is a tie, not a win.
"""

from __future__ import annotations

import math

import numpy as np

MAX_DECIMALS = 6  # digits after the point (x100 scale) an imported score can state; past them it is a float's noise


def stated_step(value: float) -> float:
    """The rounding step an imported score was written with: 1e-4 for 82.0325, 0.01 for 80.75; 0.0 when the value
    carries more digits than MAX_DECIMALS (a score computed here, or a mean of several)."""
    if value is None or not math.isfinite(float(value)):
        return 0.0
    value = float(value)
    for decimals in range(MAX_DECIMALS + 1):
        if abs(round(value, decimals) - value) <= 1e-9 * max(1.0, abs(value)):
            return 10.0 ** -decimals
    return 0.0


def steps(values: np.ndarray, imported: np.ndarray) -> np.ndarray:
    """Per value: its stated step when it is imported, else 0 (lenbench's own scores keep every digit)."""
    values = np.asarray(values, dtype=float)
    imported = np.asarray(imported, dtype=bool)
    return np.array([stated_step(v) if i else 0.0 for v, i in zip(values, imported)], dtype=float)


def tie_tolerance(step_a: float, step_b: float) -> float:
    """How far apart two scores may be and still be equal: half a step of each one's rounding."""
    return (float(step_a or 0.0) + float(step_b or 0.0)) / 2.0


def is_tie(a: float, b: float, step_a: float = 0.0, step_b: float = 0.0) -> bool:
    tolerance = tie_tolerance(step_a, step_b)
    return tolerance > 0 and abs(float(a) - float(b)) <= tolerance + 1e-12


def best_cells(values: np.ndarray, step_of: np.ndarray) -> np.ndarray:
    """True where a value is the column's best or tied with it within the rounding of either (NaN: never)."""
    values = np.asarray(values, dtype=float)
    step_of = np.asarray(step_of, dtype=float)
    out = np.zeros(len(values), dtype=bool)
    if np.isnan(values).all():
        return out
    top = int(np.nanargmax(values))
    for i, v in enumerate(values):
        if not np.isnan(v):
            out[i] = v == values[top] or v + tie_tolerance(step_of[i], step_of[top]) + 1e-12 >= values[top]
    return out


def items_label(limit: float | int | None) -> str:
    """'the full set' or 'a 100-item subset (--limit 100)'."""
    limit = _limit(limit)
    return "the full set" if not limit else f"a {limit}-item subset (--limit {limit})"


def _limit(limit: float | int | None) -> int:
    try:
        value = float(limit)
    except (TypeError, ValueError):
        return 0
    return int(value) if math.isfinite(value) and value > 0 else 0


def why_apart(limit_a: float | int | None, limit_b: float | int | None, version_a: int | None = 1,
              version_b: int | None = 1, subset_a: str = "", subset_b: str = "") -> str:  # fmt: skip
    """Why two scores of one dataset are not compared ('' when they are): other items (another N, or a sample
    against the first N or another seed's sample: `subset_a`/`subset_b`, bench.evaluate.subsets.subset_label), or
    another scoring."""
    if _limit(limit_a) != _limit(limit_b):
        return f"scored on other items (A on {items_label(limit_a)}, B on {items_label(limit_b)}): not compared"
    if str(subset_a or "") != str(subset_b or ""):
        return f"scored on other items (A on the {subset_a or 'full set'}, B on the {subset_b or 'full set'}): not compared"
    va, vb = int(version_a or 1), int(version_b or 1)
    if va != vb:
        return f"scoring versions differ (v{va} vs v{vb}): not compared"
    return ""
