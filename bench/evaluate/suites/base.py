"""What a suite is: a named list of datasets, each scored (clean and, when attacked, per elongation variant).

A suite module defines a class with `name`, `datasets()` and `evaluate(model, dataset, ctx)`, and registers a
parser in `bench.evaluate.suites.registry` for the suite strings it understands ("sts", "beir:scifact", ...).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Protocol

from results_db import ScoreRecord

CLEAN = "clean"


def variant_name(elong: str) -> str:
    """'2' -> 'elong-2', 'rand' -> 'elong-rand'."""
    return f"elong-{elong}"


@dataclass
class EvalContext:
    """Everything a suite needs besides the model; one per `bench eval` / evaluation phase of `bench run`."""

    data_dir: str | None = None
    max_len: int = 256
    seed: int = 0
    attacked: bool = False  # evaluate the @elong variants as well as clean
    elong: list[str] = field(default_factory=lambda: ["2", "4", "8", "rand"])
    limit: int | None = None  # use only the first N items of each dataset (smoke tests, CI slices)
    fetch: bool = False  # try downloading missing datasets from their sources
    files_read: set[str] = field(default_factory=set)
    batch_size: int = 64
    options: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)  # dataset -> where it was read from (printed by the CLI)

    def rng(self, salt: str = "") -> random.Random:
        return random.Random(f"{self.seed}|{salt}")

    def note_source(self, located: Any) -> None:
        """Remember where a dataset came from (a `bench.data.Located`), once per dataset."""
        self.sources.setdefault(located.info.name, located.describe())

    def variants(self) -> list[str]:
        return [CLEAN] + ([variant_name(e) for e in self.elong] if self.attacked else [])


class Suite(Protocol):
    name: str  # the suite string as the user wrote it, without '@elong'

    def datasets(self) -> list[str]: ...

    def evaluate(self, model: Any, dataset: str, ctx: EvalContext) -> list[ScoreRecord]: ...


class SuiteError(ValueError):
    """An unknown or malformed suite string."""
