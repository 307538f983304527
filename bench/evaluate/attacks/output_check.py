"""What an attack must return, checked at the boundary between an attack (built-in or plug-in) and the scoring:
one text per input text, of the input's kind (a string; for a word-level (title, body) document, a pair), and the
same texts for the same seed. The seed rule is checked before anything is scored: the attack runs twice on the
first `SAMPLE` texts of a dataset from the same seed, and must give the same output (an attack that draws from the
global `random` module instead of its `rng` argument would score differently on every run).

A broken attack is one line (`AttackError`, a ConfigError) naming the attack, where its code lives and the rule;
the run row is marked failed, the datasets scored before stay.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from bench.runtime.errors import ConfigError

SAMPLE = 8  # texts attacked twice for the seed check


class AttackError(ConfigError):
    """An attack broke its contract (wrong number or kind of texts, output that changes under one seed)."""


def attack_origin(attack: Any) -> str:
    """`'name' (module.Class)`: the variant as stored, and where the attack's code lives."""
    cls = type(attack)
    return f"{getattr(attack, 'name', '?')!r} ({cls.__module__}.{cls.__qualname__})"


def check_output(attack: Any, given: Sequence[Any], out: Any) -> list:
    """`out` as a list when it is one text per input text, each of its input's kind; else AttackError."""
    n = len(given)
    rule = "an attack must return a list with one text per input text, in order (a string for a string)"
    if not isinstance(out, (list, tuple)):
        raise AttackError(f"attack {attack_origin(attack)}: returned {type(out).__name__} for {n} texts; {rule}")
    if len(out) != n:
        raise AttackError(f"attack {attack_origin(attack)}: returned {len(out)} texts for {n}; {rule}")
    for i, (before, after) in enumerate(zip(given, out)):
        if isinstance(before, str) and not isinstance(after, str) or not isinstance(before, str) and not isinstance(after, (list, tuple)):
            raise AttackError(f"attack {attack_origin(attack)}: text {i} came back as {type(after).__name__} "
                              f"({after!r:.40}); {rule}")  # fmt: skip
    return list(out)


def check_deterministic(attack: Any, run: Callable[[Sequence[Any], random.Random], list], texts: Sequence[Any],
                        seed: int) -> None:  # fmt: skip
    """Run the attack twice on the first SAMPLE texts from `random.Random(seed)`; AttackError if the outputs differ.
    `run(texts, rng)` applies the attack as the scoring will (and checks each output)."""
    sample = list(texts[:SAMPLE])
    if not sample:
        return
    state = random.getstate()  # the global generator: an attack that draws from it must not look deterministic
    first = run(sample, random.Random(seed))
    second = run(sample, random.Random(seed))
    random.setstate(state)
    if first != second:
        i = next(k for k, (a, b) in enumerate(zip(first, second)) if a != b)
        raise AttackError(
            f"attack {attack_origin(attack)}: two runs from the same seed gave different texts (text {i} of the first "
            f"{len(sample)}); an attack must draw every random choice from its rng argument (not the global random "
            "module, the clock or a set's order), so one seed gives one score"
        )
