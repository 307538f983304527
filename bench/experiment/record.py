"""A run row's life while its work runs, the same for `bench run` (per method) and `bench eval`:

    with Recording(db, run_id, files=lambda: ctx.files_read, lease=held):
        ...train, evaluate, write the run's files...

A heartbeat shows the row's process is alive (`bench results` tells it from one whose process died); on success the
row is finished with the data fingerprint of the files read; on any exception (SIGTERM and Ctrl-C included) it is
marked failed or interrupted (`--resume` continues it) and the exception goes on. `db=None` (ranks other than 0)
records nothing. The run's lease (`bench.experiment.run_lease`), if given, is released when the block ends, however
it ends. Everything the row promises (scores, results.json, model card, encoder) is written inside the block: a
row is finished only once all of it is on disk, and a stop while it is written leaves the row interrupted.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from bench.runtime.heartbeat import Heartbeat


class Recording:
    def __init__(self, db: Any, run_id: int | None, files: Callable[[], Iterable[str]] = lambda: (),
                 earlier_fingerprint: dict[str, str] | None = None, lease: Any = None,
                 artifacts: Callable[[Any], None] | None = None):  # fmt: skip
        self.db, self.run_id, self.files, self.lease = db, run_id, files, lease
        # Writes the run's files (results.json, model card) given the time it is finished at; a fault or a stop while
        # they are written leaves the row failed or interrupted, never finished without them.
        self.artifacts = artifacts
        # A resumed row: the files its first attempt read (datasets it scored are skipped now, so not read again).
        self.earlier = earlier_fingerprint if isinstance(earlier_fingerprint, dict) else {}
        self.beat: Heartbeat | None = None

    def __enter__(self) -> "Recording":
        self.beat = Heartbeat(self.db, self.run_id).start()
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        from bench.experiment.run_lease import release_run

        try:
            return self._end(exc)
        finally:
            release_run(self.db, self.lease)

    def _end(self, exc: BaseException | None) -> bool:
        if exc is not None:
            try:
                record_failure(self.db, self.run_id, exc, list(self.files()), self.earlier)
            finally:
                self.beat.stop()
            return False
        if self.db is not None and self.run_id is not None and self.artifacts is not None:
            from results_db.models import utcnow

            at = utcnow()
            try:
                self.artifacts(at)
            except BaseException as fault:
                self._end(fault)
                raise
        else:
            at = None
        self.beat.stop()
        if self.db is not None and self.run_id is not None:
            reason = mark_finished(self.db, self.run_id, "finished", "", {**self.earlier, **fingerprint_files(self.files())}, at)
            if reason is not None:  # every score is recorded; only the row's final status could not be written
                from results_db.errors import ResultsDBError

                raise ResultsDBError(f"run {self.run_id}: its scores are recorded but it could not be marked finished ({reason})")
        return False


RESUMABLE = ("failed", "interrupted", "stale")  # rows whose process is gone before they finished


def resume_row(db: Any, kind: str, config_hash: str, **fields: Any) -> dict[str, Any] | None:
    """The newest row of `kind` with this config hash that did not finish and whose process is gone (failed,
    interrupted, or 'running' with a dead process), taken over by this process: status running again, its pid and a
    fresh heartbeat, `fields` updated. Its scores stay, so the work it finished is skipped. None: no such row."""
    from results_db.liveness import with_liveness
    from results_db.store import liveness_fields

    runs = with_liveness(db.runs())
    if runs.empty:
        return None
    same = runs[(runs["kind"] == kind) & (runs["config_hash"] == config_hash) & runs["status"].isin(RESUMABLE)]
    if same.empty:
        return None
    row = same.sort_values("id").iloc[-1].to_dict()
    db.update_run(int(row["id"]), status="running", error="", finished_at=None, **liveness_fields(), **fields)
    return row


def record_failure(db: Any, run_id: int | None, exc: BaseException, files: Any, earlier: dict | None = None) -> None:
    """Mark a run row failed/interrupted after `exc`. A SIGTERM during the write is held until it is done: under
    torchrun the launcher sends one to the survivors just as their collectives fail, and the row must not be
    left 'running' half-way."""
    from bench.runtime import signals

    if db is None or run_id is None:
        return
    status = signals.run_status(exc)
    signals.defer_stops(True)
    try:
        # the files an earlier attempt read stay named (a resumed row that fails again), those read now win
        reason = mark_finished(db, run_id, status, f"{type(exc).__name__}: {exc}", {**(earlier or {}), **fingerprint_files(files)})
    finally:
        signals.defer_stops(False)
    if reason is not None:  # the run's own error (printed after this line) matters more; say why it is not recorded
        print(f"bench: run {run_id} could not be marked {status} ({reason}); until it is, `bench results` shows it "
              "'stale' once its heartbeat stops", file=sys.stderr)  # fmt: skip


MARK_ATTEMPTS = 3  # a database locked by another writer is tried again (each attempt waits its busy timeout)


def mark_finished(db: Any, run_id: int, status: str, error: str, fingerprint: dict, at: Any = None) -> str | None:
    """Write the run's final status, again while another process holds the lock; None when written, else why not
    (one line: the store names a locked, full, read-only database)."""
    import time

    from results_db.errors import ResultsDBError

    reason = ""
    for attempt in range(MARK_ATTEMPTS):
        try:
            db.finish_run(run_id, status=status, error=error, at=at, data_fingerprint=fingerprint)
            return None
        except ResultsDBError as db_exc:
            reason = str(db_exc)
            if "locked" not in reason or attempt == MARK_ATTEMPTS - 1:
                break
            time.sleep(1.0)
        except KeyError:
            shown = getattr(getattr(db, "location", None), "shown", "the database")
            reason = f"run {run_id} is no longer in {shown} (deleted by another process?)"
            break
        except Exception as db_exc:  # noqa: BLE001 - anything else: named, and the run's own error still shown
            reason = f"{type(db_exc).__name__}: {' '.join(str(db_exc).split())[:200]}"
            break
    return reason


def fingerprint_files(files: Any) -> dict:
    """Data fingerprint of the files a run read; {} when one cannot be read any more (the run's error says why)."""
    from bench.runtime.provenance import data_fingerprint

    try:
        return data_fingerprint(set(files))
    except OSError:
        return {}


_INVOKED: list[str] = []  # the command line of a job the Python API runs (`invoked_as`), innermost last


def command_line(argv: list[str] | None = None) -> str:
    """`bench ARGV` quoted for a shell, a password in a URL redacted: by default the command as invoked (this
    process's arguments, or inside `invoked_as` the command line equivalent to a Python API call)."""
    import shlex

    from results_db.redact import redact_args

    if argv is None and _INVOKED:
        return _INVOKED[-1]
    return " ".join(["bench"] + [shlex.quote(a) for a in redact_args(sys.argv[1:] if argv is None else argv)])


@contextmanager
def invoked_as(command: str) -> Iterator[None]:
    """Rows recorded inside this block name `command` (`command_line(argv)`) as theirs: the Python API's jobs
    record the equivalent command line, not the notebook's interpreter."""
    _INVOKED.append(command)
    try:
        yield
    finally:
        _INVOKED.pop()
