"""`bench method check FILE|NAME`: a method's contract tried in seconds, before a real run finds it broken.

What it runs, for each method the file defines (or the registered method NAME):
- loading the file (bench.train.method_file: it fails to import, defines no method, a name that is not a slug or
  clashes with a built-in, a config field without a default) and its `--hp` values (bench.experiment.run_spec's
  parse_overrides: a value out of its declared range);
- for a `@contrastive` method, its positives function on SAMPLE_TEXTS (bench.train.positives: a wrong return type,
  an exception, every text skipped, every positive empty or the text unchanged);
- two training steps of batch 4 on those texts, on the tiny random BERT (random-bert-tiny, written into a temporary
  folder, offline), through `train_method` as `bench run` trains: a non-finite loss, a loss that is not a
  scalar tensor with a grad, whatever the method's own code raises.

Each problem is one line naming the file and line and what was expected, the same line `bench run` gives.
"""

from __future__ import annotations

import logging
import random
import tempfile
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from bench.runtime.errors import ConfigError, ModelLoadError, TrainingError

# The errors that mean the method (or the check's input) is at fault: each is one problem line. MethodFileError is
# a ConfigError and MethodContractError a TrainingError; an unknown method NAME is a KeyError.
USER_ERRORS = (ConfigError, TrainingError, ModelLoadError, KeyError)
CHECK_BACKBONE = "random-bert-tiny"
CHECK_STEPS = 2
CHECK_BATCH = 4
CHECK_MAX_LEN = 32
# Texts of several lengths and kinds (one word, a question, a long sentence), so a method that only works on some
# of them still gets a batch, and one that gives no text a positive is found.
SAMPLE_TEXTS = (
    "A man is playing a guitar on the street.",
    "The cat sleeps on the warm sofa all afternoon.",
    "Stocks fell sharply after the central bank raised rates.",
    "How do I reset my password?",
    "Rain is expected tomorrow in the north, with strong winds along the coast.",
    "She finished the marathon in under four hours.",
    "Photosynthesis turns light, water and carbon dioxide into sugar and oxygen.",
    "Hello",
)


@dataclass(frozen=True)
class CheckReport:
    """What `check` found: the methods it tried and one line per problem (none: the method is fine)."""

    target: str
    methods: tuple[str, ...]
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        names = ", ".join(self.methods)
        return (f"ok: {self.target} ({names}): the contract holds on {len(SAMPLE_TEXTS)} texts and {CHECK_STEPS} "
                f"training steps on {CHECK_BACKBONE} gave a finite loss")  # fmt: skip


def check(target: str, hp: Sequence[str] = (), debug: bool = False) -> CheckReport:
    """Check the method file (or registered method) `target` with the `--hp METHOD.KEY=VALUE` values `hp`.
    `debug`: the first problem is raised with its traceback instead (`bench --debug method check`)."""
    from bench.experiment.run_spec import parse_overrides
    from bench.train.registry import methods_of

    try:
        specs = methods_of(target)
        overrides = parse_overrides(list(hp), [s.name for s in specs])
    except USER_ERRORS as exc:
        if debug:
            raise
        return CheckReport(target, (), (_line(exc),))
    problems: list[str] = []
    for spec in specs:
        problem = _check_one(spec, overrides.get(spec.name, {}), debug)
        if problem:
            problems.append(problem)
    return CheckReport(target, tuple(s.name for s in specs), tuple(problems))


def _check_one(spec: Any, overrides: dict[str, Any], debug: bool) -> str | None:
    from bench.runtime.errors import ConfigError
    from bench.train.loss_reader import NonFiniteLoss
    from bench.train.method_file import author_fault
    from bench.train.positives import PositivesContract

    try:
        config = spec.config_from(overrides)
    except (TypeError, ValueError) as exc:  # the config's own __post_init__
        if debug:
            raise
        fault = author_fault(spec, exc, "configuring", anywhere=True)
        return _line(fault or ConfigError(str(exc)))
    contract = getattr(spec.factory, "contract", None)
    try:
        if isinstance(contract, PositivesContract):
            positives = contract.call(SAMPLE_TEXTS, config, random.Random(0))
            contract.check_sample(SAMPLE_TEXTS, positives)
        _train_two_steps(spec, config)
    except NonFiniteLoss as exc:  # the run's line, less the checkpoint it kept (the check's folder is gone)
        if debug:
            raise
        where = f"{exc.where}: " if exc.where else ""
        return (f"{where}non-finite loss ({exc.value}) at step {exc.step} of {exc.label}; expected a finite loss "
                f"(batch {CHECK_BATCH}, {CHECK_BACKBONE}, the default --lr)")  # fmt: skip
    except USER_ERRORS as exc:
        if debug:
            raise
        return _line(exc)
    except Exception as exc:  # noqa: BLE001 - the method's own code: one line at its line; lenbench's bugs raise
        fault = author_fault(spec, exc, "training")
        if fault is None or debug:
            raise
        return _line(fault)
    return None


def _train_two_steps(spec: Any, config: Any) -> None:
    from bench.train.budget import Budget
    from bench.train.config import TrainConfig
    from bench.train.job import TrainJob
    from bench.train.trainer import train_method

    settings = TrainConfig(max_len=CHECK_MAX_LEN, batch_size=CHECK_BATCH, progress=False, checkpoint_minutes=0,
                           checkpoint_at_end=False, loader_workers=0, device="cpu")  # fmt: skip
    texts = list(SAMPLE_TEXTS) * 2  # two batches' worth without drawing the same text twice in one
    with tempfile.TemporaryDirectory(prefix="lenbench-method-check-") as out, _quiet():
        train_method(TrainJob(texts, Budget(steps=CHECK_STEPS), settings, Path(out) / "train", method=spec,
                              backbone=CHECK_BACKBONE, method_config=config,
                              backbone_cache_dir=Path(out) / "backbones", save_encoder_dir=None))  # fmt: skip


@contextmanager
def _quiet() -> Iterator[None]:
    """The trainer's progress lines are not the check's output: only problems (or one "ok") are."""
    logger = logging.getLogger("bench")
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


def _line(exc: BaseException) -> str:
    text = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    return " ".join(text.split())
