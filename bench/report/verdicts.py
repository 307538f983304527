"""A claim's verdicts: each comparison of the treatment with a comparator (the reference row or a control) on one
(dataset, variant) is `holds`, `contradicted` or `inconclusive`, corrected over the claim's whole family (Holm).

Each comparison's difference (treatment minus comparator, the mean over seeds) and its interval come from
`stats.seed_item_ci` (between-seed variance plus the paired bootstrap over the items). A test names a direction:

* `higher` / `lower`: the claim is that the treatment scores higher (lower), by at least `min_effect` (default 0);
  its null is "the difference is `min_effect`" in the claimed direction;
* `not-lower` / `not-higher` (non-inferiority): the treatment is not worse than the comparator by more than `margin`;
  its null is "the difference is -margin" (+margin).

The p-value of each comparison is taken against its own null (the difference shifted by the threshold: the interval's
width does not change), and Holm's step-down runs over the family's p-values. The interval shown is the one at
Holm's level for that comparison: at rank r (by p) 1 - alpha / (m - r + 1), and every comparison after the first that
Holm keeps gets that one's level, so a row's interval clears its threshold exactly when Holm rejects its null.

    holds          the corrected interval lies beyond the threshold in the claimed direction;
    contradicted   it lies beyond the opposite bound (below 0 for `higher`, below -margin for `not-lower`);
    inconclusive   neither.

A claim holds only if every one of its comparisons holds: against the reference and against every control, on
every dataset and variant it names.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import math

import numpy as np
import pandas as pd

from bench.report import stats

DIRECTIONS = ("higher", "lower", "not-lower", "not-higher")
HOLDS, CONTRADICTED, INCONCLUSIVE, MISSING = "holds", "contradicted", "inconclusive", "missing"


@dataclass(frozen=True)
class Comparison:
    """One comparison's runs: each side's score on all shared items per run (k,) and on the item resamples (k, R)."""

    comparator: str
    dataset: str
    variant: str
    direction: str
    threshold: float  # the null: min_effect for higher (-min_effect for lower), -margin for not-lower (+ for not-higher)
    comparator_full: np.ndarray
    comparator_boot: np.ndarray
    treatment_full: np.ndarray
    treatment_boot: np.ndarray
    comparator_seeds_vary: bool = True  # False: an untrained model, one run without seed variance
    n_items: int | None = None


@dataclass(frozen=True)
class Verdict:
    comparator: str
    dataset: str
    variant: str
    direction: str
    threshold: float
    difference: float
    low: float  # the Holm-corrected interval
    high: float
    level: float  # the interval's level
    p: float  # two-sided, against the comparison's own null (the threshold)
    p_holm: float
    seeds: tuple[int, int]  # runs of (comparator, treatment)
    verdict: str
    note: str = ""

    def as_dict(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


def threshold_of(direction: str, min_effect: float = 0.0, margin: float = 0.0) -> float:
    if direction not in DIRECTIONS:
        raise ValueError(f"direction {direction!r} is not one of {', '.join(DIRECTIONS)}")
    return {"higher": min_effect, "lower": -min_effect, "not-lower": -margin, "not-higher": margin}[direction]


def _ci(c: Comparison, level: float) -> stats.DifferenceCI:
    """The difference minus the threshold (the treatment's scores shifted: the same variance), at `level`."""
    return stats.seed_item_ci(c.comparator_full, c.comparator_boot, np.asarray(c.treatment_full) - c.threshold,
                              np.asarray(c.treatment_boot) - c.threshold, level=level,
                              seeds_vary=(c.comparator_seeds_vary, True), n_items=c.n_items)  # fmt: skip


def holm_levels(p: Sequence[float], alpha: float) -> np.ndarray:
    """Each comparison's interval level under Holm's step-down: 1 - alpha / (m - r + 1) at rank r up to the first
    comparison Holm keeps, that one's level for every later one (NaN p-values are left out of the family)."""
    p = np.asarray(p, dtype=float)
    levels = np.full(p.shape, np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    m = len(ok)
    order = ok[np.argsort(p[ok], kind="stable")]
    stopped = None
    for r, i in enumerate(order):
        if stopped is None:
            levels[i] = 1.0 - alpha / (m - r)
            if p[i] >= alpha / (m - r):
                stopped = levels[i]
        else:
            levels[i] = stopped
    return levels


def _verdict(direction: str, threshold: float, low: float, high: float) -> str:
    if np.isnan(low) or np.isnan(high):
        return INCONCLUSIVE
    if direction in ("higher", "not-lower"):
        if low > threshold:
            return HOLDS
        return CONTRADICTED if high < (0.0 if direction == "higher" else threshold) else INCONCLUSIVE
    if high < threshold:
        return HOLDS
    return CONTRADICTED if low > (0.0 if direction == "lower" else threshold) else INCONCLUSIVE


def verdicts(comparisons: Sequence[Comparison], alpha: float = 0.05) -> list[Verdict]:
    """Every comparison's verdict, Holm-corrected over the whole family (module docstring)."""
    first = [_ci(c, 1.0 - alpha) for c in comparisons]
    p = [ci.p for ci in first]
    adjusted = stats.adjust_p(p, "holm")
    levels = holm_levels(p, alpha)
    out = []
    for c, ci, p_holm, level in zip(comparisons, first, adjusted, levels):
        at = _ci(c, float(level)) if np.isfinite(level) else ci
        low, high = at.low + c.threshold, at.high + c.threshold
        out.append(Verdict(c.comparator, c.dataset, c.variant, c.direction, c.threshold, at.difference + c.threshold,
                           low, high, float(level), ci.p, float(p_holm), ci.seeds,
                           _verdict(c.direction, c.threshold, low, high), ci.note))  # fmt: skip
    return out


def overall(rows: Sequence[Verdict | dict], expected: int) -> str:
    """holds (every comparison holds), does not hold, or incomplete (a comparison has no scores yet)."""
    got = [r.verdict if isinstance(r, Verdict) else r["verdict"] for r in rows]
    if len(got) < expected or MISSING in got:
        return "incomplete"
    return "holds" if got and all(v == HOLDS for v in got) else "does not hold"


SYMBOL = {"higher": ">", "lower": "<", "not-lower": ">=", "not-higher": "<="}


def _num(v: object, digits: int = 2, sign: bool = False) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    return f"{v:+.{digits}f}" if sign else f"{v:.{digits}f}"


def verdict_frame(rows: Sequence[dict], treatment: str) -> pd.DataFrame:
    """The rows as shown (`bench claim`, `bench results`, the leaderboard's Claims view)."""
    shown = []
    for r in rows:
        seeds = r.get("seeds") or ["", ""]
        level = r.get("level")
        shown.append({
            "comparator": r["comparator"], "role": r.get("role", ""), "dataset": r["dataset"], "variant": r["variant"],
            "claim": f"{treatment} {SYMBOL[r['direction']]} {r['comparator']}"
            + (f" {_num(r['threshold'], sign=True)}" if r.get("threshold") else ""),
            "diff": _num(r.get("difference"), sign=True),
            "interval": f"[{_num(r['low'])}, {_num(r['high'])}]" if r.get("low") is not None else "",
            "level": f"{100 * level:.1f}%" if isinstance(level, float) and not math.isnan(level) else "",
            "p": _num(r.get("p"), 3) if r.get("p") is not None else "", "p(Holm)": _num(r.get("p_holm"), 3),
            "seeds": f"{seeds[0]} vs {seeds[1]}" if seeds[0] != "" else "", "verdict": r["verdict"],
        })  # fmt: skip
    return pd.DataFrame(shown)


