"""`len`: the needle suite's context lengths as variant names (`len-64`, ..., `len-1024`, and `len-mean`, their mean).

Not an attack on a dataset's own texts (the needle suite builds a haystack per length) and not a suite suffix: it is
registered so that reports and the leaderboard order and label those variants like any other, on a context-length
axis.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.evaluate.attacks.base import Attack, AttackFamily, whole_number
from bench.runtime.errors import ConfigError

MEAN = "mean"


@dataclass(frozen=True)
class ContextLength(Attack):
    def apply(self, texts, tokenizer, max_len, rng, where):  # noqa: ANN001, ANN201
        raise ConfigError("'len' variants name the needle suite's context lengths; they attack no texts")


MAX_CONTEXT = 1_000_000  # tokens: far beyond any encoder's positions


def make(param: str) -> ContextLength:
    if param == MEAN:
        return ContextLength(name=f"len-{MEAN}", family="len", param=MEAN, x=None, order=1e9)
    problem = f"context length {param!r}: use a positive number of tokens, at most {MAX_CONTEXT:,}"
    tokens = whole_number(param, 1, MAX_CONTEXT, problem)
    return ContextLength(name=f"len-{param}", family="len", param=param, x=float(tokens), order=tokens)


FAMILY = AttackFamily(
    name="len",
    summary="context length of the needle suite's documents (tokens)",
    axis="context length (tokens)",
    defaults=("64", "128", "256", "512", "1024"),
    cite=("mohtashami2023landmark", "kamradt2023needle"),
    make=make,
    order=90,
    selectable=False,
)
