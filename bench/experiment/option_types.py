"""The value types of the declared options (bench.experiment.options): a numeric option's allowed `Range`, the
`positive_int` of --limit, and the error a bad value raises. Nothing here knows any option by name."""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from typing import Any

from bench.runtime.errors import ConfigError

INT64_MAX = 2**63 - 1  # the largest integer SQLite stores
SEED_MAX = 2**32 - 1  # numpy's and torch's seeds
FLAG = None  # the `type` of an option that is a flag (store_true)


class OptionValueError(argparse.ArgumentTypeError, ValueError):
    """A bad option value: argparse shows its message as it is, a sweep's RunSpec.from_options catches ValueError."""


@dataclass(frozen=True)
class Range:
    """The values a numeric option allows, and an example shown when one is refused."""

    low: float
    high: float
    example: str
    low_open: bool = False  # low itself is refused (a learning rate of 0)

    def check(self, option: str, value: Any, sep: str = " ") -> None:
        """A ConfigError naming `option` (a flag, or a keyword with sep "=") when `value` is outside the range."""
        if value is None:
            return
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{option}{sep}{value}: must be a finite number; e.g. {option}{sep}{self.example}")
        too_low = value <= self.low if self.low_open else value < self.low
        if too_low or value > self.high:
            low = f"> {_fmt(self.low)}" if self.low_open else f">= {_fmt(self.low)}"
            raise ConfigError(f"{option}{sep}{_fmt(value)}: must be {low} and <= {_fmt(self.high)}; "
                              f"e.g. {option}{sep}{self.example}")  # fmt: skip

    def describe(self) -> str:
        """'1 to 65,536', '> 0 to 1' (the README's option table)."""
        return f"{'> ' if self.low_open else ''}{_fmt(self.low)} to {_fmt(self.high)}"


def _fmt(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() and abs(x) >= 10_000 else f"{x:g}"


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
