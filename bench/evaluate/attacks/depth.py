"""`depth`: the position suite's needle depths as variant names (`depth-0`, `depth-25`, ..., `depth-100`: the share
of the context before the fact, in percent).

Not an attack on a dataset's own texts (the position suite builds its documents per depth) and not a suite suffix: it
is registered so that reports and the leaderboard order and label those variants like any other, on a depth axis.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.evaluate.attacks.base import Attack, AttackFamily, whole_number
from bench.runtime.errors import ConfigError


@dataclass(frozen=True)
class Depth(Attack):
    def apply(self, texts, tokenizer, max_len, rng, where):  # noqa: ANN001, ANN201
        raise ConfigError("'depth' variants name the position suite's needle depths; they attack no texts")


def make(param: str) -> Depth:
    depth = whole_number(param, 0, 100, f"depth {param!r}: use a whole percentage of the context, 0 to 100")
    return Depth(name=f"depth-{param}", family="depth", param=param, x=float(depth), order=depth)


FAMILY = AttackFamily(
    name="depth",
    summary="depth of the position suite's fact in its context (0 = start, 1 = end)",
    axis="depth of the fact (% of the context before it: 0 = start, 100 = end)",
    defaults=("0", "25", "50", "75", "100"),
    cite=("mohtashami2023landmark", "kamradt2023needle"),
    make=make,
    order=95,
    selectable=False,
)
