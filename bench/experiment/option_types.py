"""The value types of the declared options (bench.experiment.options): a numeric option's allowed `Range` (its owner's,
bench.runtime.ranges), the `positive_int` of --limit, and the error a bad value raises. Nothing here knows any option
by name."""

from __future__ import annotations

import argparse
from typing import Any

from bench.runtime.ranges import INT64_MAX, SEED_MAX, Range  # noqa: F401 - re-exported

FLAG = None  # the `type` of an option that is a flag (store_true)


class OptionValueError(argparse.ArgumentTypeError, ValueError):
    """A bad option value: argparse shows its message as it is, a sweep's RunSpec.from_options catches ValueError."""


def positive_int(text: Any) -> int:
    """--limit (`bench eval`, `bench run`, a sweep's options): a whole number >= 1 (0 or a negative would silently
    mean 'everything')."""
    try:
        value = int(text)
    except ValueError:
        raise OptionValueError(f"{text!r} is not a whole number; give a positive N, e.g. 300") from None
    if value < 1:
        raise OptionValueError(f"{value} is not positive; give N >= 1 (leave it out for the whole dataset)")
    return value
