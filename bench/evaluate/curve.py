"""Learning curves: score the encoder being trained at steps N, 2N, ... and at the end (`bench run --eval-every N`).

`CurveEvaluator` is the trainer's `EvalHook.evaluate` (bench.train.trainer keeps no evaluation imports: the command
builds this and hands it over). Each call wraps the in-memory model in an `Encoder` under the encoder options of the
final scores (`options`: pooling, max_len, batch size, precision, embedding dtype), on the model's device with the
torch backend and no embedding cache (the weights change between calls, so no ONNX export and nothing to reuse),
runs the curve suites through the same runner as the final evaluation (so under torchrun the encoding is sharded the
same way) and writes the scores, with the step, to the results database's `curve_points` table (rank 0). The trainer isolates the call (RNG states, no_grad,
train mode), so a run's losses and final weights are the same with and without curves.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from bench.encode.options import ENCODER_DEFAULTS, EncoderOptions
from bench.evaluate.suites.base import CLEAN, EvalContext, Suite


@dataclass
class CurveEvaluator:
    suites: list[tuple[Suite, bool]]
    ctx: EvalContext
    options: EncoderOptions = ENCODER_DEFAULTS  # the final scores' (RunSpec.encoder)
    name: str = "encoder"
    db: Any = None  # results_db.ResultsDB on rank 0, None elsewhere
    run_id: int | None = None
    say: Callable[[str], None] = print
    steps: list[int] = field(default_factory=list)  # steps evaluated by this process (for callers and tests)
    tracker: Any = None  # bench.runtime.trackers.Trackers (--report-to), rank 0

    @property
    def pooling(self) -> str:
        return self.options.pooling or "mean"

    @property
    def max_len(self) -> int:
        return self.options.max_len

    @property
    def batch_size(self) -> int | None:
        return self.options.batch_size  # None: the device's

    def __call__(self, model: Any, tokenizer: Any, step: int) -> None:
        from bench.encode.encoder import Encoder
        from bench.evaluate.runner import evaluate

        device = str(next(model.parameters()).device)
        options = replace(self.options, pooling=self.pooling, device=device, backend="torch", use_cache=False)
        encoder = Encoder(model, tokenizer, options, name=f"{self.name}@{step}", show_progress=False)
        # A fresh context each time: files_read/sources of the curve never mix with the final evaluation's.
        records = evaluate(encoder, self.suites, replace(self.ctx, files_read=set(), sources={}))
        self.steps.append(step)
        if self.db is not None and self.run_id is not None:
            self.db.add_curve_points(self.run_id, step, records)
        if self.tracker is not None:
            self.tracker.log_scores(records, "curve", step)
        shown = [f"{r.dataset} {r.metric} {r.value:.2f}" for r in records if r.variant == CLEAN][:4]
        self.say(f"[{self.name}] step {step}: {'; '.join(shown) or 'no clean score'}")
