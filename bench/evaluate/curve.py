"""Learning curves: score the encoder being trained at steps N, 2N, ... and at the end (`bench run --eval-every N`).

`CurveEvaluator` is the trainer's `EvalHook.evaluate` (bench.train.trainer keeps no evaluation imports: the command
builds this and hands it over). Each call wraps the in-memory model in an `Encoder` (torch backend: the weights
change between calls, so no ONNX export and no embedding cache), runs the curve suites through the same runner as
the final evaluation (so under torchrun the encoding is sharded the same way) and writes the scores, with the
step, to the results database's `curve_points` table (rank 0). The trainer isolates the call (RNG states, no_grad,
train mode), so a run's losses and final weights are the same with and without curves.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from bench.evaluate.suites.base import CLEAN, EvalContext, Suite


@dataclass
class CurveEvaluator:
    suites: list[tuple[Suite, bool]]
    ctx: EvalContext
    pooling: str = "mean"
    max_len: int = 256
    batch_size: int = 64
    name: str = "encoder"
    db: Any = None  # results_db.ResultsDB on rank 0, None elsewhere
    run_id: int | None = None
    say: Callable[[str], None] = print
    steps: list[int] = field(default_factory=list)  # steps evaluated by this process (for callers and tests)
    tracker: Any = None  # bench.runtime.trackers.Trackers (--report-to), rank 0

    def __call__(self, model: Any, tokenizer: Any, step: int) -> None:
        from bench.encode.encoder import Encoder
        from bench.evaluate.runner import evaluate

        device = str(next(model.parameters()).device)
        encoder = Encoder(model, tokenizer, name=f"{self.name}@{step}", pooling=self.pooling, max_len=self.max_len,
                          batch_size=self.batch_size, device=device, backend="torch", use_cache=False,
                          show_progress=False)  # fmt: skip
        # A fresh context each time: files_read/sources of the curve never mix with the final evaluation's.
        records = evaluate(encoder, self.suites, replace(self.ctx, files_read=set(), sources={}))
        self.steps.append(step)
        if self.db is not None and self.run_id is not None:
            self.db.add_curve_points(self.run_id, step, records)
        if self.tracker is not None:
            self.tracker.log_scores(records, "curve", step)
        shown = [f"{r.dataset} {r.metric} {r.value:.2f}" for r in records if r.variant == CLEAN][:4]
        self.say(f"[{self.name}] step {step}: {'; '.join(shown) or 'no clean score'}")
