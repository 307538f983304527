"""Experiment-tracker logging (`bench run --report-to tensorboard|wandb|trackio|none`), through each tracker's own
library, installed as an optional extra (`pip install 'lenbench[tensorboard]'`, `[wandb]`, `[trackio]`).

One tracker run per lenbench run, named like the run's folder (`simcse-seed1 (run 7)`), with the run's config
(TensorBoard: as HParams, nested keys joined with '.', the final eval/ scores as its metrics).
What is logged, all against the training step:

    train/loss, train/learning_rate, train/examples_per_s   every step the trainer logs (TrainConfig.log_every)
    curve/DATASET/METRIC[/VARIANT]                          each learning-curve point (--eval-every)
    eval/DATASET/METRIC[/VARIANT]                           the final scores, at the last step

VARIANT is left out for clean scores; a `--limit` subset is named DATASET[N], as in every table. The database stays
the record (the leaderboard reads it); a tracker is a view for people who live in TensorBoard or W&B.

TensorBoard writes event files under RUN_FOLDER/tensorboard (torch.utils.tensorboard, which needs the tensorboard
package); W&B follows its own settings (WANDB_PROJECT, default "lenbench"; WANDB_MODE=offline writes under
RUN_FOLDER/wandb); trackio logs to its local project ("lenbench" unless TRACKIO_PROJECT is set).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from bench.runtime.errors import ConfigError

TRACKERS = ("tensorboard", "wandb", "trackio")
INSTALL = {"tensorboard": "tensorboard", "wandb": "wandb", "trackio": "trackio"}  # module -> PyPI extra


class Tracker(Protocol):
    def log(self, metrics: Mapping[str, float], step: int) -> None: ...

    def finish(self) -> None: ...


def parse_report_to(value: str | Sequence[str] | None) -> list[str]:
    """'tensorboard,wandb' -> ['tensorboard', 'wandb']; 'none' or empty -> []; an unknown name or a library that is
    not installed is a ConfigError naming what to install (checked before any run starts)."""
    if value is None:
        return []
    items = [v.strip().lower() for part in ([value] if isinstance(value, str) else value) for v in part.split(",")]
    names = [v for v in dict.fromkeys(items) if v and v != "none"]
    unknown = [n for n in names if n not in TRACKERS]
    if unknown:
        raise ConfigError(f"--report-to {', '.join(unknown)}: not a tracker; give one or more of {', '.join(TRACKERS)} "
                          "(comma-separated), or none")  # fmt: skip
    import importlib.util

    missing = [n for n in names if importlib.util.find_spec(INSTALL[n]) is None]
    if missing:
        extras = ",".join(missing)
        raise ConfigError(f"--report-to {', '.join(missing)}: the {' and '.join(missing)} package is not installed; "
                          f"pip install 'lenbench[{extras}]' (or pip install {' '.join(INSTALL[n] for n in missing)})")
    return names


def score_metrics(records: Iterable[Any], prefix: str) -> dict[str, float]:
    """{'eval/stsb/spearman': 82.03, 'eval/stsb/spearman/elong-2': ...} from ScoreRecords (subset: DATASET[N])."""
    out = {}
    for rec in records:
        limit = (getattr(rec, "info", None) or {}).get("limit")
        dataset = f"{rec.dataset}[{limit}]" if limit else rec.dataset
        variant = "" if rec.variant == "clean" else f"/{rec.variant}"
        out[f"{prefix}/{dataset}/{rec.metric}{variant}"] = float(rec.value)
    return out


def flat_hparams(config: Mapping[str, Any], prefix: str = "") -> dict[str, bool | int | float | str]:
    """The config as HParams values: nested keys joined with '.', numbers, booleans and strings as they are, None as
    'none', lists as JSON text (HParams holds no lists)."""
    import json

    out: dict[str, bool | int | float | str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flat_hparams(value, f"{name}."))
        elif isinstance(value, (bool, int, float, str)):
            out[name] = value
        else:
            out[name] = "none" if value is None else json.dumps(value, default=str)
    return out


class TensorBoardTracker:
    """Scalars, and the run's config as HParams (TensorBoard's HPARAMS tab: one row per run, its final scores as
    the metrics): the session's values when the run starts, the experiment with its metrics when it ends."""

    def __init__(self, folder: Path, name: str, config: Mapping[str, Any]):
        from torch.utils.tensorboard import SummaryWriter
        from torch.utils.tensorboard.summary import hparams

        self.folder = folder
        self.writer = SummaryWriter(log_dir=str(folder))
        self.hparams = flat_hparams(config)
        self.final: dict[str, float] = {}  # eval/... scores: the HParams metrics
        _, session_start, _ = hparams(self.hparams, {})
        self.writer.file_writer.add_summary(session_start)
        self.writer.add_text("lenbench/run", name, 0)

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        for key, value in metrics.items():
            self.writer.add_scalar(key, float(value), int(step))
            if key.startswith("eval/"):
                self.final[key] = float(value)

    def finish(self) -> None:
        from torch.utils.tensorboard.summary import hparams

        experiment, _, session_end = hparams(self.hparams, self.final)
        self.writer.file_writer.add_summary(experiment)
        self.writer.file_writer.add_summary(session_end)
        self.writer.flush()
        self.writer.close()


class WandbTracker:
    def __init__(self, folder: Path, name: str, config: Mapping[str, Any]):
        import wandb

        folder.parent.mkdir(parents=True, exist_ok=True)  # W&B makes its own wandb/ folder in `dir`
        self.run = wandb.init(project=os.environ.get("WANDB_PROJECT", "lenbench"), name=name, config=dict(config),
                              dir=str(folder.parent), reinit="finish_previous")  # fmt: skip

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        self.run.log(dict(metrics), step=int(step))

    def finish(self) -> None:
        self.run.finish()


class TrackioTracker:
    def __init__(self, folder: Path, name: str, config: Mapping[str, Any]):
        import trackio

        self.trackio = trackio
        trackio.init(project=os.environ.get("TRACKIO_PROJECT", "lenbench"), name=name, config=dict(config))

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        self.trackio.log(dict(metrics), step=int(step))

    def finish(self) -> None:
        self.trackio.finish()


MAKERS = {"tensorboard": TensorBoardTracker, "wandb": WandbTracker, "trackio": TrackioTracker}


class Trackers:
    """Every tracker of one run, logged together; the last step logged is kept for the final scores. A tracker that
    fails (its service gone mid-run) is dropped with one warning: it never stops the run."""

    def __init__(self, names: Sequence[str], folder: str | os.PathLike[str], name: str, config: Mapping[str, Any]):
        self.active: list[tuple[str, Tracker]] = []
        self.last_step = 0
        for tracker in names:
            self.active.append((tracker, MAKERS[tracker](Path(folder) / tracker, name, config)))

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        self.last_step = max(self.last_step, int(step))
        for name, tracker in list(self.active):
            try:
                tracker.log(metrics, step)
            except Exception as exc:  # noqa: BLE001 - a tracker is a view; the database is the record
                self._drop(name, tracker, exc)

    def log_scores(self, records: Iterable[Any], prefix: str, step: int | None = None) -> None:
        self.log(score_metrics(records, prefix), self.last_step if step is None else step)

    def finish(self) -> None:
        for name, tracker in list(self.active):
            try:
                tracker.finish()
            except Exception as exc:  # noqa: BLE001
                self._drop(name, tracker, exc)
        self.active = []

    def _drop(self, name: str, tracker: Tracker, exc: Exception) -> None:
        import logging

        logging.getLogger(__name__).warning("--report-to %s stopped logging (%s: %s); the run goes on", name,
                                            type(exc).__name__, exc)  # fmt: skip
        self.active = [(n, t) for n, t in self.active if t is not tracker]
