"""What a suite is: a named list of datasets, each scored clean and, when attacked, per attack variant.

A suite module defines a class with `name`, `datasets()` and `evaluate(model, dataset, ctx)`, and registers a
parser in `bench.evaluate.suites.registry` for the suite strings it understands ("sts", "beir:scifact", ...).
It reads its data through `load_dataset` and runs its variants through `bench.evaluate.suites.variants`.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from bench.encode.options import ENCODER_DEFAULTS
from bench.evaluate.attacks import CLEAN, Attack, attacks_for, parse_elong_variants
from bench.evaluate.subsets import SAMPLE, Subset, draw
from results_db.records import ScoreRecord

T = TypeVar("T")
log = logging.getLogger(__name__)


def variant_name(elong: str) -> str:
    """'2' -> 'elong-2', 'rand' -> 'elong-rand'."""
    return f"elong-{elong}"


@dataclass
class EvalContext:
    """Everything a suite needs besides the model; one per `bench eval` / evaluation phase of `bench run`."""

    data_dir: str | None = None  # (how many tokens a model reads is the model's own max_len, never the context's)
    seed: int = 0
    attacked: bool = False  # evaluate the attacked variants of `families` as well as clean
    elong: list[str] = field(default_factory=lambda: parse_elong_variants(None))  # the elong family's parameters
    families: tuple[str, ...] = ("elong",)  # the suite's suffix: `@elong,pad` -> ("elong", "pad")
    attack_params: dict[str, list[str]] = field(default_factory=dict)  # `--attack pad=start-2`; absent: defaults
    limit: int | None = None  # score N items of each dataset (smoke tests, CI slices): see bench.evaluate.subsets
    limit_mode: str = SAMPLE  # which N: a seeded sample (SAMPLE) or the first N in file order (FIRST)
    limit_seed: int = 0  # the sample's seed (--limit-seed: not --seed, so every training seed scores the same items)
    fetch: bool = False  # try downloading missing datasets from their sources
    files_read: set[str] = field(default_factory=set)
    batch_size: int | None = ENCODER_DEFAULTS.batch_size  # texts per encoding batch (the encoder's option; None: the device's)
    options: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)  # dataset -> where it was read from (printed by the CLI)
    limit_applies: bool | None = None  # per dataset: False when `limit` reaches its whole set (see `limit_for`)
    limit_of: int | None = None  # per dataset: how many items the --limit was drawn from

    def rng(self, salt: str = "") -> random.Random:
        return random.Random(f"{self.seed}|{salt}")

    def limit_for(self, dataset: str, size: int, unit: str) -> int | None:
        """The --limit to apply to `dataset` of `size` items, None when there is none or it is not below the size:
        then the dataset is scored whole, a line says so, and its scores are labelled as the full set's (a
        `--limit 1000000` score of a 1,379-pair set is the full-set score, not `stsb[1000000]`)."""
        if not self.limit:
            return None
        if self.limit < size:
            self.limit_applies = True
            self.limit_of = size
            return self.limit
        if self.limit_applies is not False:  # once per dataset
            log.warning("%s: --limit %d is not below its %s %s; scored the whole set (recorded as the full set, not "
                        "as a subset)", dataset, self.limit, f"{size:,}", unit)  # fmt: skip
        self.limit_applies = False
        return None

    def subset(self, dataset: str, size: int, unit: str, strata: list[str] | None = None) -> Subset | None:
        """The items of `dataset` (`size` of them) that --limit scores (bench.evaluate.subsets.draw; `strata`: one
        class per item, for a stratified sample), None when it is scored whole (see `limit_for`)."""
        limit = self.limit_for(dataset, size, unit)
        return None if limit is None else draw(size, limit, self.limit_seed, dataset, self.limit_mode, strata)

    def subset_info(self) -> dict[str, Any]:
        """What a score of this context's dataset records of its --limit (Score.info): the subset's N, M, mode and
        seed, or `limit_above_size` when the limit reached the whole set; {} without --limit."""
        if not self.limit:
            return {}
        if self.limit_applies is False:
            return {"limit_above_size": self.limit}
        seed = {"limit_seed": self.limit_seed} if self.limit_mode == SAMPLE else {}
        of = {"limit_of": self.limit_of} if self.limit_of else {}
        return {"limit": self.limit, **of, "limit_mode": self.limit_mode, **seed}

    def note_source(self, located: Any) -> None:
        """Remember where a dataset came from (a `bench.data.Located`), once per dataset."""
        self.sources.setdefault(located.info.name, located.describe())

    def attacks(self, families: tuple[str, ...] | None = None) -> list[Attack]:
        """The attacks of `families` (default: the suite's, and none for a clean-only suite), in report order."""
        if families is None:
            if not self.attacked:
                return []
            families = self.families
        out: list[Attack] = []
        for family in dict.fromkeys(families):
            out += attacks_for(family, self.elong if family == "elong" else self.attack_params.get(family))
        return out

    def variants(self) -> list[str]:
        return [CLEAN] + [a.name for a in self.attacks()]


class Suite(Protocol):
    name: str  # the suite string as the user wrote it, without '@elong'

    def datasets(self) -> list[str]: ...

    def evaluate(self, model: Any, dataset: str, ctx: EvalContext) -> list[ScoreRecord]: ...


@dataclass
class NamedDatasets:
    """What the built-in suites share: the datasets a suite scores, named in `names` (its `datasets()`)."""

    names: tuple[str, ...] = ()

    def datasets(self) -> list[str]:
        return list(self.names)


class SuiteError(ValueError):
    """An unknown or malformed suite string."""


def load_dataset(dataset: str, ctx: EvalContext, kind: str, what: str, read: Callable[[Any], T]) -> T:
    """A catalog (or local) dataset of `kind` read with `read(located)`: checked to be that kind (else SuiteError
    '{dataset} is not {what}'), found in the data folders, its source and files noted in `ctx`."""
    from bench.data import find, get_info

    info = get_info(dataset, kind=kind)
    if info.kind != kind:
        raise SuiteError(f"{dataset!r} is not {what}")
    located = find(dataset, ctx.data_dir, ctx.fetch, kind=kind)
    ctx.note_source(located)
    data = read(located)
    ctx.files_read.update(data.files)
    return data
