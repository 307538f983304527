"""p-values as the board prints them: whole, at every size."""

from __future__ import annotations

import math

import pytest

from leaderboard.numbers import p_text


@pytest.mark.parametrize(
    ("p", "text"),
    [(0.34, "0.34"), (0.012, "0.012"), (0.0012, "0.0012"), (9.2e-08, "9.2e-08"), (9.24e-08, "9.2e-08"),
     (1.0e-5, "1.0e-05"), (3e-13, "< 1e-12"), (0.0, "< 1e-12"), (1.0, "1"), (math.nan, ""), (None, "")],
)  # fmt: skip
def test_p_values_are_printed_whole(p, text):
    assert p_text(p) == text

