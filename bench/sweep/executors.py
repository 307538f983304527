"""Executors: where the points of a sweep run. Both run `worker.run_point` for each point.

* `local`: a pool of `--jobs N` threads on this machine, each running its points' `bench run` in one long-lived
  child (bench.sweep.serve: the interpreter start and imports paid once per slot, not per point; a failed point's
  retry gets a fresh process) with cores // N torch/OMP threads (N x threads <= cores). Ctrl-C interrupts every child once (each marks its row
  failed and exits; the next `bench sweep` resumes them), waits for them, and reports.
* `slurm`: one submitit job array (`AutoExecutor.map_array`), one array task per point, submitit's logs under
  the sweep's folder. `cluster="local"` / `"debug"` is submitit's own local/debug executor: the same code path
  without Slurm (what the tests use).
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path

from bench.runtime.errors import ConfigError
from bench.sweep.points import Point
from bench.sweep.worker import (
    ChildRegistry,
    PointResult,
    SlotProcesses,
    WorkerSettings,
    mark_killed,
    run_point,
    run_point_job,
)

INTERRUPT_GRACE_S = 120  # how long Ctrl-C waits for children to record their state before killing them


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def threads_per_job(jobs: int, cores: int | None = None) -> tuple[int, int]:
    """(jobs, threads): at most one job per core, and the cores shared out so that jobs x threads <= cores."""
    cores = cores or available_cores()
    jobs = max(1, min(jobs, cores))
    return jobs, max(1, cores // jobs)


def run_local(points: list[Point], settings: WorkerSettings, jobs: int, echo=print) -> tuple[list[PointResult], bool]:  # noqa: ANN001
    """Run the points here; returns (results, interrupted)."""
    asked = jobs
    jobs, threads = threads_per_job(jobs)
    if jobs < asked:
        echo(f"--jobs {asked} > {available_cores()} cores here: running {jobs} at a time")
    settings = replace(settings, threads=settings.threads or threads)
    echo(f"running {len(points)} point(s), {jobs} at a time, {settings.threads} thread(s) each; logs in {settings.log_dir}")
    registry = ChildRegistry()
    slots = SlotProcesses()
    results: list[PointResult] = []
    pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="sweep-point")
    futures: dict[Future, Point] = {pool.submit(run_point, p, settings, registry, slots): p for p in points}
    pending = set(futures)
    interrupted = False
    try:
        while pending:
            done, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            for fut in done:
                res = fut.result()
                results.append(res)
                echo(f"[{len(results)}/{len(points)}] {res.key}: {res.status} after {res.attempts} attempt(s), "
                     f"{res.seconds:.0f}s" + (f" -- {res.last_line}" if res.status in ("failed", "running elsewhere") and res.last_line else "")
                     + (f" (log {res.log})" if res.status != "finished" else ""))
    except KeyboardInterrupt:
        interrupted = True
        echo("interrupted: stopping the running points (each records its state; run the same command to resume)")
        registry.interrupt_all()
        deadline = time.monotonic() + INTERRUPT_GRACE_S
        while pending and time.monotonic() < deadline:
            try:
                done, pending = wait(pending, timeout=0.5)
            except KeyboardInterrupt:  # a second Ctrl-C: stop waiting
                echo("second interrupt: killing the running points now")
                break
            results.extend(f.result() for f in done)
        killed = registry.kill_all()
        if killed:  # they had no chance to mark their rows: the sweep does, so none stays 'running'
            try:
                marked = mark_killed(settings.db, killed, "KeyboardInterrupt: killed by a second Ctrl-C on bench sweep")
            except Exception as exc:  # noqa: BLE001 - the database unreachable: say so, the rows show as stale
                echo(f"could not mark the killed points' runs interrupted ({type(exc).__name__}: {exc}); they show as stale")
            else:
                if marked:
                    echo(f"marked run(s) {', '.join(map(str, marked))} interrupted; the same command resumes them")
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        slots.close_all()
    # Every point is in the summary: the ones stopped mid-way, and the ones never started.
    for fut in pending:
        point = futures[fut]
        if fut.cancelled() or not fut.done():
            results.append(PointResult(point.key, "not started", 0, None, str(Path(settings.log_dir) / f"{point.slug}.log"), 0.0))
        else:
            try:
                results.append(fut.result())
            except Exception as exc:  # noqa: BLE001
                results.append(PointResult(point.key, "interrupted", 1, None, "", 0.0, f"{type(exc).__name__}: {exc}"))
    return results, interrupted


@dataclass
class SlurmOptions:
    partition: str | None = None
    gpus_per_job: int = 0
    time_min: int = 60
    array_parallelism: int | None = None
    cpus_per_job: int | None = None
    extra: dict[str, str] = field(default_factory=dict)  # free-form sbatch options (--slurm KEY=VALUE)
    cluster: str | None = None  # None: Slurm; "local"/"debug": submitit's local/debug executor (tests)


def parse_time_minutes(text: str) -> int:
    """'90', '1:30:00', '2-00:00:00' (Slurm's forms) -> minutes."""
    text = str(text).strip()
    try:
        days, _, rest = text.rpartition("-") if "-" in text else ("0", "", text)
        parts = [int(x) for x in rest.split(":")]
        if len(parts) == 1:
            minutes = parts[0]
        elif len(parts) == 2:
            minutes = parts[0] * 60 + parts[1]
        elif len(parts) == 3:
            minutes = parts[0] * 60 + parts[1] + (1 if parts[2] else 0)
        else:
            raise ValueError
        minutes += int(days or 0) * 24 * 60
    except ValueError:
        raise ConfigError(f"--time {text!r} is not minutes, H:MM:SS or D-HH:MM:SS") from None
    if minutes <= 0:
        raise ConfigError(f"--time {text!r} must be positive")
    return minutes


def parse_slurm_extra(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip().lstrip("-")
        if not sep or not key:
            raise ConfigError(f"--slurm {item!r} is not KEY=VALUE (an sbatch option, e.g. --slurm account=nlp)")
        out[key.replace("-", "_")] = value
    return out


def submit_slurm(points: list[Point], settings: WorkerSettings, options: SlurmOptions, folder: Path, name: str):  # noqa: ANN201
    """Submit one job array, one task per point; returns the submitit jobs (same order as points)."""
    import shutil

    import submitit

    if options.cluster is None and shutil.which("sbatch") is None:
        raise ConfigError("--executor slurm needs Slurm's sbatch on this machine (run it on the cluster's login node), "
                          "or use --executor local")
    executor = submitit.AutoExecutor(folder=str(folder / "submitit" / "%j"), cluster=options.cluster or "slurm")
    params: dict = {
        "name": f"bench-sweep-{name}", "timeout_min": options.time_min, "gpus_per_node": options.gpus_per_job,
        "tasks_per_node": 1, "nodes": 1,
        "slurm_partition": options.partition, "slurm_array_parallelism": options.array_parallelism,
        "slurm_additional_parameters": options.extra or None,
    }
    if options.cpus_per_job:
        params["cpus_per_task"] = options.cpus_per_job
    if executor.cluster == "local":
        params.pop("gpus_per_node")  # no GPUs to hand out here
    executor.update_parameters(**params)
    return executor.map_array(run_point_job, points, [settings] * len(points))


# Slurm states of a job that has not ended: its point must not be submitted again.
QUEUED_STATES = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "REQUEUE_HOLD", "RESIZING", "SUSPENDED"}


def submission_record(folder: Path) -> Path:
    return folder / "submitted.json"


def record_submission(folder: Path, jobs, points: list[Point]) -> None:  # noqa: ANN001
    """Remember which Slurm job runs each point, so that submitting the sweep again skips the ones still queued."""
    path = submission_record(folder)
    record = json.loads(path.read_text()) if path.exists() else {}
    record.update({p.key: j.job_id for j, p in zip(jobs, points)})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1, sort_keys=True))


def still_queued(points: list[Point], folder: Path, job_state=None) -> dict[str, str]:  # noqa: ANN001
    """key -> job id of the points that an earlier submission has queued or running on Slurm.

    The database says which points are done or running; only the scheduler knows a job that has not started yet."""
    path = submission_record(folder)
    if not path.exists():
        return {}
    record = json.loads(path.read_text())
    job_state = job_state or _slurm_state
    return {p.key: record[p.key] for p in points if p.key in record and job_state(folder, record[p.key]) in QUEUED_STATES}


def _slurm_state(folder: Path, job_id: str) -> str:
    import submitit

    try:
        return str(submitit.SlurmJob(folder=str(folder / "submitit" / "%j"), job_id=job_id).state)
    except Exception:  # noqa: BLE001 - sacct unavailable or the job forgotten: not known to be queued
        return "UNKNOWN"


def wait_jobs(jobs, points: list[Point], echo=print) -> list[PointResult]:  # noqa: ANN001
    results = []
    for job, point in zip(jobs, points):
        try:
            res = job.result()
        except Exception as exc:  # noqa: BLE001 - a job that died in the scheduler: report it, go on
            res = PointResult(point.key, "failed", 0, None, str(getattr(job, "paths", None) and job.paths.stdout), 0.0,
                              f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}")
        results.append(res)
        echo(f"[{len(results)}/{len(points)}] {res.key}: {res.status} after {res.attempts} attempt(s)"
             + (f" -- {res.last_line} (log {res.log})" if res.status != "finished" else ""))
    return results
