"""Numbers as the board prints them: a p-value whole at any size (no streamlit, no pandas)."""

from __future__ import annotations

import math

P_FLOOR = 1e-12  # below it a p-value (the bootstrap's t approximation far in its tail) says only "very small"


def p_text(p: float | None) -> str:
    """'0.34', '0.012', '9.2e-08', '< 1e-12'; '' for a missing p. Two significant digits: the bootstrap's p is read
    off 1,000 resamples (or, past them, a normal approximation), so a third digit would be noise."""
    if p is None or not math.isfinite(float(p)):
        return ""
    p = float(p)
    if p < P_FLOOR:
        return f"< {P_FLOOR:.0e}"
    if p < 1e-3:
        mantissa, exponent = f"{p:.1e}".split("e")
        return f"{mantissa}e{exponent}"
    return f"{p:.2g}"
