"""`TrainConfig`: the training settings every method of a comparison shares (SPEC §1), checked when made.

A dataclass with no dependency beyond the standard library, the device names and the encoder's option defaults
(bench.encode.options: one precision default), so that parsing and checking a command's options (`RunSpec.settings`)
builds one without loading torch; the trainer (bench.train.trainer) reads it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from bench.encode.options import ENCODER_DEFAULTS
from bench.runtime.device import TRAIN_PRECISIONS
from bench.runtime.errors import ConfigError
from bench.runtime.ranges import INT64_MAX, SEED_MAX, Range, check_ranges

# The version of the shared training recipe: how the trainer turns a seed into batches (the text stream, each draw's
# generator, bench.train.loader) and steps. It is part of every trained run's identity (RunSpec.configs records it as
# `train_recipe` in the config, its hash and the comparison key), so a run trained by other recipe code is never
# reused or pooled with runs of this one. Bump it in the commit that changes what a seed trains (e.g. which randomness
# a batch draws); a change that leaves every batch and step the same (speed, logging) keeps it.
#   1: rows before the recipe was recorded (one generator for the whole run)
#   2: every draw has its own generator, draw_rng(seed, draw)
TRAIN_RECIPE_VERSION = 2


# The numbers' allowed values, checked when a TrainConfig is made; `bench run`'s options that fill these fields check
# their values against the same ranges (bench.experiment.options reads them here).
RANGES: dict[str, Range] = {
    "max_len": Range(8, 100_000, "256"),
    "batch_size": Range(2, 65_536, "64"),  # two texts at least: in-batch negatives
    "lr": Range(0, 1, "3e-5", low_open=True),
    "warmup_steps": Range(0, INT64_MAX, "100"),
    "seed": Range(0, SEED_MAX, "0"),
    "checkpoint_every": Range(0, INT64_MAX, "500"),  # 0 or None: no step rule
    "checkpoint_minutes": Range(0, 10**6, "10"),  # 0: no time rule
    "log_every": Range(1, INT64_MAX, "1"),
    "loader_workers": Range(0, 4096, "4"),
    "nan_check_every": Range(1, INT64_MAX, "10"),
}


@dataclass
class TrainConfig:
    """Settings every method of a comparison shares (SPEC §1). Defaults suit a CPU; papers use bs 64, max_len 256."""

    max_len: int = 64
    batch_size: int = 16
    lr: float = 3e-5
    weight_decay: float = 0.0  # SimCSE / LA(SER)^3 train with the HF Trainer default (no decay)
    warmup_steps: int = 0  # SPEC §1: linear warm-up 0, then linear decay
    max_grad_norm: float = 1.0  # HF Trainer default clipping, as the reference implementations
    seed: int = 0
    pooling: str = "mean"  # pooling the saved encoder declares (used at evaluation)
    checkpoint_every: int | None = None  # steps between checkpoints; None: no step rule (CheckpointSchedule)
    checkpoint_minutes: float = 10.0  # minutes of training between checkpoints (0: no time rule); and at the stop
    keep_checkpoints: int = 1
    # A run that stops normally before its first scheduled checkpoint saves one at its end only when this is set:
    # `bench run` sets it with --keep-checkpoints alone (it deletes a finished run's checkpoints, and its saved encoder
    # is what stays), so a short run writes no checkpoint of hundreds of MiB only to delete it.
    checkpoint_at_end: bool = True
    log_every: int = 1  # steps between training-log rows
    epochs_horizon: float = 1.0  # schedule horizon when the budget gives no step count
    precision: str = ENCODER_DEFAULTS.precision  # one --precision for training and scoring; auto: bf16 on CUDA, fp32 on CPU
    device: str | None = None  # None: cuda if available
    progress: bool = True
    loader_workers: int | None = None  # processes building batches ahead; None: the cores left (results never change)
    nan_check_every: int | None = None  # steps between reads of the loss; None: 1 on CPU, 10 on an accelerator

    def __post_init__(self) -> None:
        check_ranges(self, RANGES)
        if self.precision not in TRAIN_PRECISIONS:  # fp16 would need loss scaling: it is an evaluation precision
            raise ConfigError(f"training precision {self.precision!r} is not one of {', '.join(TRAIN_PRECISIONS)} "
                              "(fp16 is for evaluation only; train with --precision bf16 or auto)")

    def shared(self) -> dict[str, Any]:
        """The fields that define a comparison (progress/logging/device cadence excluded)."""
        d = asdict(self)
        for k in ("checkpoint_every", "checkpoint_minutes", "keep_checkpoints", "checkpoint_at_end", "log_every",
                  "device", "progress", "loader_workers", "nan_check_every"):
            d.pop(k)
        return d


TRAIN_DEFAULTS = TrainConfig()  # the `bench run` options' defaults (bench.experiment.options)
