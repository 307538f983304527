"""Where an evaluation's time goes: seconds per pipeline stage, summed over the process's threads.

    with stages.timed("tokenise"):
        ...
    before = stages.snapshot(); ...; stages.since(before)  # {"read": 1.2, "tokenise": 30.5, ...}

Stages are named by what they do (`STAGES`): reading the corpus file, tokenising, the model's forward passes,
cache reads and writes (embedding and token-id caches), the exact search, and scoring the run (pytrec_eval). The
clock is process-wide, like a profiler's: the encoder tokenises the next chunk on a second thread while the model
runs this one, so the stages overlap and their sum may exceed the wall time. The runner stores each dataset's
share in its scores' info (`seconds_by_stage`, bench.evaluate.score_info); benchmarks/scale.py reads it there.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

STAGES = ("read", "tokenise", "forward", "cache reads", "cache writes", "search", "scoring")

_lock = threading.Lock()
_seconds: dict[str, float] = dict.fromkeys(STAGES, 0.0)


@contextmanager
def timed(stage: str) -> Iterator[None]:
    """Add the time spent inside the block to `stage` (one of STAGES)."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        spent = time.perf_counter() - t0
        with _lock:
            _seconds[stage] = _seconds.get(stage, 0.0) + spent


def snapshot() -> dict[str, float]:
    with _lock:
        return dict(_seconds)


def since(before: dict[str, float]) -> dict[str, float]:
    """Seconds per stage spent after `before` (a `snapshot()`), rounded to milliseconds."""
    now = snapshot()
    return {k: round(v - before.get(k, 0.0), 3) for k, v in now.items()}
