"""Running one point: `bench run --resume` of the point's command as a child process, retried on failure.

This is the one function every executor runs (a local thread, a submitit job on Slurm, submitit's local and
debug executors), so a point behaves the same wherever it runs. `--resume` makes it idempotent: a finished run
of the same config hash is reported, not redone (`bench sweep --rerun`: redone in a new row); an unfinished one
continues from its last checkpoint. The child's output goes to the point's log file under the sweep's folder (appended, one header per attempt).

The local executor hands each job slot a `SlotProcess` (`SlotProcesses`): one long-lived child
(bench.sweep.serve) that runs the slot's points one after another, so the interpreter start and imports are paid
once per slot. A point that fails, and every retry, gets a fresh process (nothing a failure left behind reaches the
next point); so does a slot whose process died.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any
from pathlib import Path

from bench.runtime import pools
from bench.sweep.points import Point
from results_db.redact import redact, redact_args


@dataclass
class PointResult:
    key: str
    status: str  # finished | failed | interrupted | not started | running elsewhere
    attempts: int
    returncode: int | None
    log: str
    seconds: float
    last_line: str = ""


@dataclass
class WorkerSettings:
    db: str
    out: str  # the sweep's runs folder (bench run --out)
    log_dir: str
    retries: int = 1
    threads: int | None = None  # torch/OMP threads of the child (None: leave the environment's)
    rerun: bool = False  # `bench sweep --rerun`: every point trains and scores again (`bench run --rerun`)


class ChildRegistry:
    """The live children of this process, so Ctrl-C can interrupt each of them once and wait for them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.children: set[subprocess.Popen] = set()
        self.stopping = threading.Event()

    def interrupt_all(self) -> None:
        self.stopping.set()
        with self.lock:
            for child in self.children:
                if child.poll() is None:
                    child.send_signal(signal.SIGINT)

    def kill_all(self) -> list[int]:
        """SIGKILL every child still running; returns their pids (their rows cannot mark themselves)."""
        killed = []
        with self.lock:
            for child in self.children:
                if child.poll() is None:
                    child.kill()
                    killed.append(child.pid)
        for pid in killed:  # reaped, so that their pids are gone when the rows are checked
            for child in list(self.children):
                if child.pid == pid:
                    try:
                        child.wait(timeout=10)
                    except subprocess.TimeoutExpired:
                        pass
        return killed


def mark_killed(db: str, pids: list[int], reason: str) -> list[int]:
    """Rows still 'running' on this host under one of `pids` (children killed before they could record their
    state) marked interrupted, so none is left 'running'; the same `bench sweep` resumes them. Returns their ids."""
    import socket

    from results_db import ResultsDB

    if not pids:
        return []
    writer = ResultsDB(db, create=False)
    try:
        runs = writer.runs()
        held = runs[(runs["status"] == "running") & (runs["host"] == socket.gethostname()) & runs["pid"].isin(pids)]
        for run_id in held["id"].astype(int):
            writer.finish_run(int(run_id), status="interrupted", error=reason)
        return [int(i) for i in held["id"]]
    finally:
        writer.engine.dispose()


class SlotProcess:
    """A `python -m bench.sweep.serve` child: sends it a point's `bench` arguments and log file, waits for its exit
    code (None: the process ended without one, e.g. killed)."""

    def __init__(self, env: dict[str, str], log_dir: str):
        log = Path(log_dir) / "slot-processes.log"  # what a slot prints outside any point (an import error)
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a") as errors:
            self.child = subprocess.Popen([sys.executable, "-m", "bench.sweep.serve"], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=errors, env=env, text=True,
                                          start_new_session=True)  # fmt: skip
        self.env = env

    def run(self, argv: list[str], log: Path) -> int | None:
        import json

        try:
            assert self.child.stdin is not None and self.child.stdout is not None
            self.child.stdin.write(json.dumps({"argv": argv, "log": str(log)}) + "\n")
            self.child.stdin.flush()
            answer = self.child.stdout.readline()
        except (OSError, ValueError):
            return None
        return int(json.loads(answer)["rc"]) if answer.strip() else None

    def close(self) -> None:
        try:
            if self.child.stdin is not None:
                self.child.stdin.close()  # the end of its input: it exits
            self.child.wait(timeout=30)
        except (OSError, ValueError, subprocess.TimeoutExpired):
            self.child.kill()
            self.child.wait()


class SlotProcesses:
    """One `SlotProcess` per thread of the local executor (a job slot), started on the slot's first point."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.local = threading.local()
        self.all: list[SlotProcess] = []

    def get(self, env: dict[str, str], log_dir: str) -> SlotProcess:
        mine = getattr(self.local, "process", None)
        if mine is None or mine.child.poll() is not None or mine.env != env:
            self.drop()
            mine = self.local.process = SlotProcess(env, log_dir)
            with self.lock:
                self.all.append(mine)
        return mine

    def drop(self) -> None:
        """This slot's process ends (after a failed point: the next one starts clean)."""
        mine = getattr(self.local, "process", None)
        self.local.process = None
        if mine is not None:
            mine.close()

    def close_all(self) -> None:
        with self.lock:
            processes, self.all = self.all, []
        for process in processes:
            process.close()


def point_command(point: Point, settings: WorkerSettings) -> list[str]:
    # A database URL holding a password goes to the child in $LENBENCH_DB (run_point), not on its command line.
    db = ["--db", settings.db] if redact(settings.db) == settings.db else []
    return [
        sys.executable, "-m", "bench.cli", "run", *point.argv,
        "--no-baseline", "--resume", "--no-progress", *db, "--out", settings.out,
        "--sweep", point.sweep, "--sweep-point", point.key, *(["--rerun"] if settings.rerun else []),
    ]


def run_point(point: Point, settings: WorkerSettings, registry: ChildRegistry | None = None,
              slots: SlotProcesses | None = None) -> PointResult:  # fmt: skip
    """Run the point until it finishes or has failed 1 + retries times; with `slots`, its first attempt in this job
    slot's long-lived process."""
    log = Path(settings.log_dir) / f"{point.slug}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, LENBENCH_DB=settings.db)
    if settings.threads:
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", pools.CORES_ENV):
            env[var] = str(settings.threads)
    cmd = point_command(point, settings)
    t0 = time.time()
    # Leased in the database before anything trains: a second sweep of the same file skips the point.
    held = _lease(point, settings.db)
    if isinstance(held, dict):
        return PointResult(point.key, "running elsewhere", 0, None, str(log), time.time() - t0,
                           f"held by another sweep (pid {held.get('pid')} on {held.get('host')}); not started again")
    try:
        return _attempts(point, settings, registry, cmd, log, env, t0, slots)
    finally:
        if held is not None:
            _release(held, settings.db)


def _lease(point: Point, db: str) -> Any:
    """The point's Lease, who holds it (a dict), or None when the database cannot be reached for it (bench run's
    own checks then decide, as before leases)."""
    from bench.sweep.leases import lease
    from results_db import ResultsDB

    try:
        writer = ResultsDB(db, create=False)
    except Exception:  # noqa: BLE001 - a database not there yet: nothing to lease in
        return None
    try:
        return lease(writer, point.argv, point_running=current_state(point, db) == "running")
    finally:
        writer.engine.dispose()


def _release(held: Any, db: str) -> None:
    from bench.sweep.leases import release
    from results_db import ResultsDB

    try:
        writer = ResultsDB(db, create=False)
        try:
            release(writer, held)
        finally:
            writer.engine.dispose()
    except Exception:  # noqa: BLE001 - an unreleased lease of a gone process is taken over by the next sweep
        pass


def _attempts(point: Point, settings: WorkerSettings, registry: ChildRegistry | None, cmd: list[str], log: Path,
              env: dict[str, str], t0: float, slots: SlotProcesses | None = None) -> PointResult:  # fmt: skip
    rc: int | None = None
    attempt = 0
    for attempt in range(1, settings.retries + 2):
        # Another worker may have finished this point, or hold it now (a sweep submitted twice): never run it twice.
        state = current_state(point, settings.db)
        if state == "done" and settings.rerun:  # done by an earlier row: run again (a failed re-run is resumed)
            state = "missing"
        if state in ("done", "running"):
            status = "finished" if state == "done" else "running elsewhere"
            return PointResult(point.key, status, attempt - 1, rc, str(log), time.time() - t0,
                               "" if state == "done" else "a live process holds its run row; not started again")
        if registry is not None and registry.stopping.is_set():
            status = "interrupted" if attempt > 1 else "not started"
            return PointResult(point.key, status, attempt - 1, rc, str(log), time.time() - t0)
        with open(log, "a") as fh:
            stamp = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
            fh.write(f"\n=== {stamp} attempt {attempt}/{settings.retries + 1}: {' '.join(redact_args(cmd))}\n")
            fh.flush()
        rc = _launch(cmd, log, env, registry, slots if attempt == 1 else None, settings.log_dir)
        if rc == 0:
            return PointResult(point.key, "finished", attempt, rc, str(log), time.time() - t0)
        if registry is not None and registry.stopping.is_set():
            return PointResult(point.key, "interrupted", attempt, rc, str(log), time.time() - t0, _last_line(log))
    return PointResult(point.key, "failed", attempt, rc, str(log), time.time() - t0, _last_line(log))


def _launch(cmd: list[str], log: Path, env: dict[str, str], registry: ChildRegistry | None,
            slots: SlotProcesses | None, log_dir: str) -> int | None:  # fmt: skip
    """One attempt: in the slot's long-lived process when there is one, else in a process of its own. A new session
    either way: Ctrl-C in the terminal reaches the sweep only, which interrupts each child exactly once (bench run
    then marks its row interrupted and stops; --resume continues it later)."""
    slot = slots.get(env, log_dir) if slots is not None else None
    with open(log, "a") as fh:
        child = slot.child if slot is not None else subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env,
                                                                      start_new_session=True)  # fmt: skip
    if registry is not None:
        with registry.lock:
            registry.children.add(child)
    try:
        rc = slot.run(cmd[3:], log) if slot is not None else child.wait()  # cmd[3:]: past `python -m bench.cli`
    finally:
        if registry is not None:
            with registry.lock:
                registry.children.discard(child)
    if slot is not None and rc != 0:
        slots.drop()  # a failed (or killed) point: whatever it left behind ends with its process
    return rc


def current_state(point: Point, db: str) -> str | None:
    """The point's state in the database now (done/running/failed/missing), None when it cannot be read."""
    from bench.sweep.state import point_states
    from results_db import ResultsDB

    try:
        reader = ResultsDB(db, read_only=True)
        try:
            return point_states(reader.runs(), [point])[0].state
        finally:
            reader.engine.dispose()
    except Exception:  # noqa: BLE001 - a database not created yet, unreachable for a moment: let bench run decide
        return None


def _last_line(log: Path) -> str:
    try:
        lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip() and not ln.startswith("===")]
    except OSError:
        return ""
    errors = [ln for ln in lines if "error" in ln.lower()]
    return (errors or lines or [""])[-1].strip()[:300]


def run_point_job(point: Point, settings: WorkerSettings) -> PointResult:
    """The function a submitit job runs (module-level, so it pickles by reference)."""
    return run_point(point, settings)
