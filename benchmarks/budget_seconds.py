"""How close a `seconds=` budget stops to its limit on the wall clock: a probe adapter whose every step sleeps a known
time is trained under seconds budgets, and the overshoot past the limit is printed as a ratio of one step's time
(under 1 means the run stopped at the first step boundary past the limit, as the unit test checks on a fake clock).

    .venv/bin/python benchmarks/budget_seconds.py [--step 0.05] [--limits 0.4,1,2]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout: its tests' probe adapter


def main(argv: list[str] | None = None) -> int:
    from bench.train.budget import Budget
    from bench.train.trainer import TrainConfig, TrainJob, train
    from tests.test_budget import CountingAdapter  # the unit test's probe: each step sleeps `sleep` seconds

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--step", type=float, default=0.05, help="seconds each step sleeps")
    p.add_argument("--limits", default="0.4,1,2", help="comma-separated seconds budgets")
    args = p.parse_args(argv)
    texts = [f"text {i}" for i in range(10_000)]
    with tempfile.TemporaryDirectory() as tmp:
        for limit in (float(x) for x in args.limits.split(",")):
            cfg = TrainConfig(batch_size=4, progress=False, checkpoint_every=0, loader_workers=0)
            job = TrainJob(texts, Budget(seconds=limit), cfg, Path(tmp) / f"s{limit}", save_encoder_dir=None)
            result = train(CountingAdapter(sleep=args.step), torch.nn.Linear(4, 1), None, job)
            over = result.consumed.seconds - limit
            print(f"seconds={limit:<5g} stopped by {result.stopped_by:8s} after {result.consumed.steps:4d} steps at "
                  f"{result.consumed.seconds:.3f} s: overshoot {over:+.3f} s = {over / args.step:.2f} x one step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
