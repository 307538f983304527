"""What a `bench run` will cost before it starts (`bench run ... --estimate`): the total over its methods x seeds
(and the untrained backbone once), training from the budget and evaluation from the backbone's evaluation estimate
(bench.experiment.estimate.evaluation), in wall time on this machine and, on a GPU, GPU-hours.

Training is calibrated per method: a few real steps of `train_method` on the first texts of the training corpus
(made-up text when the corpus is not here yet) in a scratch folder give the seconds per step, and the rest of that
call (loading the backbone, building the adapter, saving the encoder) the fixed cost of a run. Steps come from the
budget (steps, or examples over the batch; a seconds budget is its own time; a tokens budget over the tokens a
calibration step saw). Every trained run is then scored like the backbone: its own model load and cold caches
(new weights share no cached embedding). Runs the database already holds are reused by `bench run` and cost
nothing: the estimate does not subtract them. Learning-curve points (--eval-every) are not included.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bench.experiment.estimate.evaluation import Estimate, estimate_evaluation
from bench.runtime.progress import duration

CALIBRATION_STEPS = 4
CALIBRATION_BATCHES = 5  # texts for the calibration: this many batches (preprocessing them is part of its time)


@dataclass
class TrainingEstimate:
    method: str
    seeds: int
    steps: int | None
    step_seconds: float
    fixed_seconds: float  # per run: backbone load, adapter, encoder save
    seconds_budget: float | None = None  # a seconds budget: training stops at it

    @property
    def seconds_per_run(self) -> float:
        train = self.seconds_budget if self.steps is None and self.seconds_budget else (self.steps or 0) * self.step_seconds
        if self.steps is not None and self.seconds_budget:
            train = min(train, self.seconds_budget)
        return self.fixed_seconds + train


@dataclass
class RunEstimate:
    evaluation: Estimate  # of one run's scoring (the backbone's, cold)
    training: list[TrainingEstimate] = field(default_factory=list)
    evaluated_runs: int = 0  # trained runs + the untrained backbone
    notes: list[str] = field(default_factory=list)

    @property
    def eval_seconds_per_run(self) -> float:
        return self.evaluation.load_seconds + sum(d.seconds or 0.0 for d in self.evaluation.datasets)

    @property
    def seconds(self) -> float:
        return (self.evaluation.start_seconds + sum(t.seconds_per_run * t.seeds for t in self.training)
                + self.evaluated_runs * self.eval_seconds_per_run)  # fmt: skip

    def lines(self) -> list[str]:
        from bench.experiment.estimate.report import size

        runs = sum(t.seeds for t in self.training)
        out = [f"run estimate: {runs} trained run(s) and {self.evaluated_runs - runs} untrained, each scored"]
        for t in self.training:
            steps = f"{t.steps:,} steps x {t.step_seconds:.3g} s" if t.steps is not None else f"budget {duration(t.seconds_budget or 0)}"
            out.append(f"  train {t.method:<16} {steps} + {duration(t.fixed_seconds)} per run = "
                       f"{duration(t.seconds_per_run)} x {t.seeds} seed(s)")  # fmt: skip
        out.append(f"  score each of {self.evaluated_runs} run(s): {duration(self.eval_seconds_per_run)} "
                   "(model load and datasets, as estimated below)")
        out += ["  " + line for line in self.evaluation.lines()[:-1]]
        out += [f"  note: {n}" for n in self.notes]
        gpu = self.evaluation.device.startswith("cuda")
        out.append(f"total: {self.seconds:.0f} s ({duration(self.seconds)}) wall"
                   + (f", {self.seconds / 3600:.2f} GPU-hours" if gpu else "")
                   + f", peak memory {size(self.evaluation.peak_memory_bytes)}, caches "
                   f"{size(self.evaluation.cache_bytes * self.evaluated_runs)} on disk"
                   + (f", downloads about {size(self.evaluation.download_bytes)}" if self.evaluation.download_bytes else ""))  # fmt: skip
        return out


def training_texts(spec: Any, notes: list[str]) -> list[str]:
    """The first texts of the run's training corpus, enough for the calibration's steps; made-up ones (and a note)
    when it is not here."""
    from bench.data.corpus import load_corpus
    from bench.data.errors import DataError
    from bench.experiment.estimate.data import filler_words

    n = max(CALIBRATION_STEPS, CALIBRATION_BATCHES) * spec.train.batch_size
    try:
        return list(load_corpus(spec.corpus, data_dir=spec.data_dir, limit=n).texts)
    except DataError as exc:
        notes.append(f"training corpus {spec.corpus!r} is not here ({str(exc).split('. ')[0]}); timed on made-up text")
        words = filler_words()
        return [" ".join(words[i : i + 30]) for i in range(0, 30 * n, 30)]


def calibrate_training(spec: Any, method: str, texts: list[str], scratch: Path) -> tuple[float, float, float]:
    """(seconds per step, fixed seconds of a run, tokens per step) from CALIBRATION_STEPS real steps."""
    from bench.train import Budget, TrainJob
    from bench.train.trainer import train_method

    settings = spec.settings
    config = replace(spec.train, progress=False, checkpoint_at_end=False, checkpoint_minutes=0,
                     checkpoint_every=None, loader_workers=0)  # fmt: skip
    started = time.monotonic()
    result = train_method(TrainJob(texts, Budget(steps=CALIBRATION_STEPS), config, scratch / method, method=method,
                                   backbone=spec.backbone, method_overrides=settings.overrides.get(method, {}),
                                   backbone_cache_dir=scratch / "backbones", allow_pickle=spec.encoder.allow_pickle,
                                   scoring_max_len=spec.encoder.max_len))  # fmt: skip
    wall = time.monotonic() - started
    steps = max(result.consumed.steps, 1)
    return result.consumed.seconds / steps, max(0.0, wall - result.consumed.seconds), result.consumed.tokens / steps


def estimate_run(spec: Any, *, say: Callable[..., None] = lambda *a, **k: None) -> RunEstimate:
    """The estimate of a `bench run` (a RunSpec, its preset applied here), calibrated in about
    spec.calibration_seconds: the training steps first, then the evaluation in what is left; see the module
    docstring."""
    from bench.experiment.eval_spec import EvalSpec
    from bench.experiment.run_job import with_preset
    from bench.train.backbone import load_backbone
    from bench.train.backbone_object import with_backbone_folder
    from bench.train.registry import get_method

    spec, _ = with_preset(spec)
    spec = with_backbone_folder(spec)
    settings = spec.settings  # a bad option: its ConfigError, before anything runs
    trained = [m for m in settings.methods if get_method(m).trains]
    notes: list[str] = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="lenbench-estimate-run-") as tmp:
        scratch = Path(tmp)
        backbone = load_backbone(spec.backbone, cache_dir=scratch / "backbones", allow_pickle=spec.encoder.allow_pickle)[2]
        texts = training_texts(spec, notes) if trained else []
        training = []
        for method in trained:
            say(f"estimate  calibrating training of {method} ...")
            step, fixed, tokens = calibrate_training(spec, method, texts, scratch)
            training.append(TrainingEstimate(method, len(settings.seeds), _steps(settings, spec.train.batch_size, tokens), step, fixed,
                                             settings.budget.seconds))  # fmt: skip
        left = spec.calibration_seconds - (time.monotonic() - started)
        evaluation = estimate_evaluation(EvalSpec(str(backbone), settings.suite_args, spec.eval_settings()),
                                         calibration_seconds=left, say=say)  # fmt: skip
    evaluated = len(trained) * len(settings.seeds) + (len(settings.rows) - len(trained))
    if spec.eval_every:
        notes.append("learning-curve points (--eval-every) are not included")
    notes.append("runs this database already holds are reused by bench run; they are counted here as if new")
    return RunEstimate(evaluation, training, evaluated, notes)


def _steps(settings: Any, batch_size: int, tokens_per_step: float) -> int | None:
    budget = settings.budget
    steps = budget.planned_steps(batch_size)
    if budget.tokens is not None and tokens_per_step > 0:
        by_tokens = int(-(-budget.tokens // tokens_per_step))
        steps = by_tokens if steps is None else min(steps, by_tokens)
    return steps
