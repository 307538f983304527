"""Child processes for the concurrency tests: started fresh (spawn), never forked, and never left behind.

A forked child inherits the test process's objects but not its threads: after earlier tests have built an ONNX
Runtime session (its thread pool) or run SQLAlchemy in a thread, the child's first garbage collection can wait forever
on a lock one of those threads held (seen: a child stuck in onnxruntime's destructor inside gc), and multiprocessing
then joins the stuck child at interpreter exit, so the whole test run never ends. Spawned children import what they
need; `finish` ends whatever is still alive after its wait, so a stuck child fails its test instead of the session.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from collections.abc import Iterable
from typing import Any

CONTEXT = mp.get_context("spawn")


def finish(procs: Iterable[Any], timeout: float) -> list[int | None]:
    """Wait up to `timeout` seconds in all for `procs`; kill the ones still running; their exit codes (None: killed
    after the wait, i.e. stuck)."""
    procs = list(procs)
    deadline = time.monotonic() + timeout
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
    codes = [p.exitcode for p in procs]
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join(10)
    return codes


def end_leftovers() -> list[int]:
    """Kill every multiprocessing child of this process still alive (pids); called when the session ends, so no
    child a failed test left running keeps pytest from exiting."""
    left = []
    for p in mp.active_children():
        p.kill()
        p.join(10)
        left.append(p.pid)
    return left
