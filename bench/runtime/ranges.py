"""`Range`: the values a numeric setting allows, written once by the object that uses the value (`TrainConfig`,
`EncoderOptions`, a command's own options) and read by everything that checks it before that object is made: the
command line's and the Python API's range check (bench.experiment.option_ranges), `--help` and the CLI reference.
Nothing here knows any option by name."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bench.runtime.errors import ConfigError

INT64_MAX = 2**63 - 1  # the largest integer SQLite stores
SEED_MAX = 2**32 - 1  # numpy's and torch's seeds


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
        if not self.holds(value):
            raise ConfigError(f"{option}{sep}{_fmt(value)}: must be {self.bounds()}; e.g. {option}{sep}{self.example}")

    def holds(self, value: float) -> bool:
        too_low = value <= self.low if self.low_open else value < self.low
        return not too_low and value <= self.high

    def bounds(self) -> str:
        """'>= 4 and <= 100,000', as an error says it."""
        return f"{'> ' if self.low_open else '>= '}{_fmt(self.low)} and <= {_fmt(self.high)}"

    def describe(self) -> str:
        """'1 to 65,536', '> 0 to 1' (the README's option table)."""
        return f"{'> ' if self.low_open else ''}{_fmt(self.low)} to {_fmt(self.high)}"


def _fmt(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() and abs(x) >= 10_000 else f"{x:g}"


def check_ranges(owner: Any, ranges: Mapping[str, Range]) -> None:
    """Each of `owner`'s fields named in `ranges` within its range, as the owner's `__post_init__` checks them (None:
    not set, allowed); a ConfigError naming the field. The same ranges are what the command line and the Python API
    check their options against (bench.experiment.options reads them), so a value is refused with one message
    before the owner is made and the owner refuses the same values when made directly."""
    for name, rule in ranges.items():
        value = getattr(owner, name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ConfigError(f"{name} {value!r} is not a number ({rule.describe()})")
        if isinstance(value, float) and not math.isfinite(value) or not rule.holds(value):
            raise ConfigError(f"{name} must be {rule.bounds()}, got {_fmt(value) if math.isfinite(value) else value}")
