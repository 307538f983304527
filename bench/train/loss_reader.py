"""The trainer's loss reader: when the host reads the losses (one sync for the last steps), what a non-finite loss
does, and the training-log rows that go with each loss (buffered, written to the results DB in groups).

No step waits on the device: a loss stays a device tensor until `read` reads every unread one at once (every
`check_every` steps, before every checkpoint and at the end). On CPU, where reading costs nothing, `check_every` is
1 and the loss is read before the backward pass, so a non-finite loss stops the run with a checkpoint of the weights
before the offending step. Elsewhere a non-finite loss found by `read` stops the run without checkpointing the
damaged weights: the previous checkpoint stays.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from bench.runtime import distributed
from bench.runtime.errors import TrainingError
from bench.train.budget import Consumption
from bench.train.checkpoint import CheckpointWriter, latest_checkpoint

LOG_ROWS_PER_WRITE = 20  # training-log rows buffered before one database write


@dataclass(frozen=True)
class LossLog:
    """Where the logged steps go besides the training log file: the run's row in `db` (rank 0) and `tracker`
    (bench.runtime.trackers.Trackers, rank 0); None: nowhere."""

    db: Any = None
    run_id: int | None = None
    tracker: Any = None


class NonFiniteLoss(TrainingError):
    """A loss that is NaN or infinite stopped the run: one line, the method file's line first when it has one."""

    def __init__(self, value: float, step: int, label: str, where: str, kept: str):
        self.value, self.step, self.label, self.where = value, step, label, where
        prefix = f"{where}: " if where else ""
        super().__init__(f"{prefix}non-finite loss ({value}) at step {step} of {label}; {kept} (lower --lr or check "
                         "the data)")  # fmt: skip


class LossReader:
    """Reads and records the losses of one training run (see the module docstring)."""

    def __init__(self, *, check_every: int, consumed: Consumption, method: Any, out: Path, writer: CheckpointWriter,
                 checkpoint: Callable[[], Path | None], bar: Any, log: LossLog = LossLog()):  # fmt: skip
        """`method`: what names the run's method in a message (the trainer's hooks): its `label`, and its `where`
        (FILE:LINE of a method file's code, '' for a registered method)."""
        self.check_every = check_every
        self.consumed = consumed  # the run's counters: the step a loss belongs to
        self.label = method.label
        self.where = getattr(method, "where", "")  # a method file's line: the message starts with it
        self.out = out
        self.writer = writer
        self.checkpoint = checkpoint  # writes a checkpoint of the current weights (None on ranks > 0)
        self.bar = bar
        self.db, self.run_id, self.tracker = log.db, log.run_id, log.tracker
        self.main = distributed.is_main()
        self.world = distributed.world_size()
        self.losses: list[float] = []  # every loss read, in step order
        self.pending_logs: list[dict[str, Any]] = []
        self.unread: list[tuple[torch.Tensor, dict[str, Any] | None]] = []  # losses not read yet, with their log rows

    def check_before_step(self, loss: torch.Tensor) -> float | None:
        """With `check_every == 1`: the loss now, before the backward pass (a non-finite one stops the run with a
        checkpoint of the last good weights). Otherwise None: the loss is read later."""
        if self.check_every != 1:
            return None
        # Under several processes the global loss is the mean over ranks (losses normalise for it).
        value = distributed.mean_over_ranks([float(loss.detach().float())])[0]
        if not math.isfinite(value):
            path = self.checkpoint()
            self.writer.wait()
            self.flush()
            raise NonFiniteLoss(value, self.consumed.steps + 1, self.label, self.where,
                                f"stopped, checkpoint saved at {path or self.out}")  # fmt: skip
        return value

    def add(self, loss: torch.Tensor, value: float | None, row: dict[str, Any] | None) -> None:
        """The loss of the step just taken (`value`: as read by `check_before_step`), with its log row if any."""
        if self.check_every == 1:
            self.record([value], [row])  # type: ignore[list-item]
            return
        self.unread.append((loss.detach(), row))
        if len(self.unread) >= self.check_every:
            self.read()

    def read(self) -> None:
        """Read the losses of the steps since the last read (one host sync); a non-finite one stops the run."""
        if not self.unread:
            return
        stacked = torch.stack([loss for loss, _ in self.unread]).float().cpu().tolist()
        values = distributed.mean_over_ranks(stacked) if self.world > 1 else stacked
        rows = [row for _, row in self.unread]
        self.unread.clear()
        self.record(values, rows)

    def record(self, values: list[float], rows: list[dict[str, Any] | None]) -> None:
        """The losses (means over ranks) of the last len(values) steps: stop on a non-finite one, else keep them."""
        first_step = self.consumed.steps - len(values) + 1
        for i, (value, row) in enumerate(zip(values, rows)):
            if not math.isfinite(value):
                self.writer.wait()
                self.flush()
                saved = latest_checkpoint(self.out)
                raise NonFiniteLoss(value, first_step + i, self.label, self.where, "stopped, "
                                    + (f"last checkpoint at {saved}" if saved else "no checkpoint was written"))
            self.losses.append(value)
            if row is not None:
                self._log(value, row)
        if values:
            self.bar.set_postfix({"loss": f"{values[-1]:.3e}"})  # the last step read
        if len(self.pending_logs) >= LOG_ROWS_PER_WRITE:
            self.flush()

    def _log(self, value: float, row: dict[str, Any]) -> None:
        row["loss"] = value
        row.update({k: float(v) for k, v in row.pop("_extras", {}).items()})
        self.pending_logs.append(row)
        if self.tracker is not None and self.main:  # --report-to: the same points as the database's train_log
            self.tracker.log({"train/loss": value, "train/learning_rate": row["lr"],
                              "train/examples_per_s": row["examples_per_s"]}, row["step"])  # fmt: skip

    def flush(self) -> None:
        """Write the buffered training-log rows (rank 0, when there is a database)."""
        if self.main and self.db is not None and self.run_id is not None and self.pending_logs:
            self.db.log_train(self.run_id, self.pending_logs)
        self.pending_logs.clear()
