"""SIGTERM and SIGINT end a run cleanly: what Slurm, Kubernetes, `timeout` and Ctrl-C send.

`graceful_stop()` (around every `bench` command) installs handlers for both. Inside a training loop (between
`defer_stops(True)` and `defer_stops(False)`) the first signal only records the request: the trainer finishes its
step, saves a checkpoint and raises `StopRequested`. Anywhere else (evaluation, loading) the signal raises
`StopRequested` at once; every dataset already scored is its own committed transaction. A second signal always
stops at once. The command marks its run row "interrupted" (`run_status`), and `bench run --resume` continues it
from the checkpoint (`bench eval` continues by running the same command again: `RESUME_ADVICE`). The exit status is 128 + the signal number (143 for SIGTERM, 130 for SIGINT), as a shell
reports a process killed by that signal.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

log = logging.getLogger(__name__)

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopRequested(KeyboardInterrupt):
    """A run stopped by SIGTERM/SIGINT. A BaseException (as KeyboardInterrupt): no `except Exception` swallows it."""

    def __init__(self, signum: int, where: str = ""):
        self.signum = int(signum)
        self.where = where
        super().__init__(self.message())

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    def message(self, command: str = "run") -> str:
        """What happened and how `bench COMMAND` continues (only `bench run` takes --resume)."""
        name = signal.Signals(self.signum).name
        saved = f" ({self.where})" if self.where else ""
        advice = RESUME_ADVICE.get(command)
        return f"stopped by {name}{saved}" + (f"; {advice}" if advice else "")


# How each command that records work continues after a stop (a command not named here records nothing to continue).
RESUME_ADVICE = {
    "run": "the run is marked interrupted: continue it with the same command and --resume",
    "eval": "the run is marked interrupted: run the same command again to continue it (the datasets already scored are kept)",
    "sweep": "run the same command again to continue the sweep (finished points are skipped)",
    "import": "run the same command again to finish the import",
}


class _State:
    requested = 0  # the signal number of a pending stop request, 0 when none
    deferring = 0  # > 0 inside a training loop


_state = _State()


def _handle(signum: int, frame: Any) -> None:  # noqa: ARG001
    if _state.deferring and not _state.requested:
        _state.requested = signum
        log.warning("%s received: stopping after this training step, with a checkpoint (send it again to stop at once)",
                    signal.Signals(signum).name)
        return
    raise StopRequested(signum)


@contextmanager
def graceful_stop() -> Iterator[None]:
    """SIGTERM and SIGINT handled as above while the block runs (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, _handle) for s in SIGNALS}
    _state.requested = 0
    try:
        yield
    except KeyboardInterrupt:
        from bench.runtime import pools

        pools.end_all()  # a stopped job leaves no worker process behind, and never waits for one
        raise
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        _state.requested = 0


def defer_stops(active: bool) -> None:
    """Enter (True) or leave (False) a region where a stop request waits for `stop_requested()` to be polled."""
    _state.deferring = max(0, _state.deferring + (1 if active else -1))


def stop_requested() -> int:
    """The signal number of a pending stop request (0: none)."""
    return _state.requested


def run_status(exc: BaseException) -> str:
    """The status a run row gets when `exc` ends it."""
    return "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
