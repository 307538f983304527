"""A background thread that stamps a running row's `heartbeat_at` every HEARTBEAT_SECONDS while the process works
on it (training and evaluation alike), so `bench results` can tell a run in progress from one whose process died
without a word (SIGKILL, out of memory, a lost node): see results_db.liveness.

It also records the last progress (`progressed()`: a progress bar moved, a pool chunk finished) as
`runtime["progress_at"]`: a process alive but making no progress for STALLED_AFTER shows as "stalled"."""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from typing import Any

from results_db.liveness import HEARTBEAT_SECONDS

log = logging.getLogger(__name__)

_last_progress = [time.time()]  # seconds since the epoch of the last progress of this process


def progressed() -> None:
    """The work moved on (cheap: called from every progress-bar update and pool chunk)."""
    _last_progress[0] = time.time()


def last_progress() -> dt.datetime:
    """The last progress, as a naive UTC datetime (the database's convention)."""
    return dt.datetime.fromtimestamp(_last_progress[0], dt.timezone.utc).replace(tzinfo=None)


class Heartbeat:
    def __init__(self, db: Any, run_id: int | None, every: float = HEARTBEAT_SECONDS):
        self.db, self.run_id, self.every = db, run_id, every
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "Heartbeat":
        if self.db is None or self.run_id is None:
            return self  # a rank that does not write, or no database
        progressed()  # starting a run is progress
        self._thread = threading.Thread(target=self._beat, name=f"heartbeat-run-{self.run_id}", daemon=True)
        self._thread.start()
        return self

    def _beat(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self.db.heartbeat(self.run_id)
                self.db.merge_runtime(self.run_id, {"progress_at": last_progress().isoformat()})
            except Exception as exc:  # noqa: BLE001 - a missed beat must never stop the run itself
                log.debug("heartbeat of run %s failed: %s", self.run_id, exc)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def __enter__(self) -> "Heartbeat":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
