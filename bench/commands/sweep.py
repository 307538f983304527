"""`bench sweep FILE`: run a grid of `bench run` points (methods x seeds x budgets x suites ...) from a TOML file.

Prints the plan first: every point, its config hash (the one `bench run` records), whether the database already
has it finished, and the estimated training cost. Then runs the points not yet finished, on this machine
(`--executor local`, default, `--jobs N` at once) or as one Slurm job array through submitit (`--executor slurm`).
Every point runs as `bench run ... --resume`, so a sweep can be run again any number of times: finished points are
skipped, interrupted ones continue from their checkpoint, failed ones are retried (`--retries`) and then reported
while the rest goes on. `--status` reads each point's state from the database and prints the comparison of the
finished points (mean and 95% CI over seeds, the paper's number beside it where the file gives one).
`--dry-run` prints the commands and touches nothing.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from bench.commands.common import declared_command, launch_settings
from results_db.redact import redact, redact_args


def register(sub: argparse._SubParsersAction) -> None:
    declared_command(sub, "sweep", sweep, description=__doc__,
                     help="run a grid of `bench run` points from a TOML file (locally or on Slurm)")


def sweep(args: argparse.Namespace) -> int:
    from bench.sweep.points import expand
    from bench.sweep.spec import load_spec
    from bench.sweep.worker import WorkerSettings, point_command

    db_arg, db_url = launch_settings(args)
    spec = load_spec(args.file)
    points = expand(spec, count=not args.dry_run)  # a database is read: every hash known where its corpus is
    folder = Path(args.folder or Path("runs") / "sweeps" / spec.name)
    settings = WorkerSettings(db=db_url, out=str((folder / "runs").resolve()), log_dir=str((folder / "logs").resolve()),
                              retries=args.retries, rerun=args.rerun)
    if args.dry_run:
        for point in points:
            cmd = ["bench", *redact_args(point_command(point, settings)[3:])]
            if "--db" not in cmd:  # a URL with a password reaches the point in $LENBENCH_DB
                cmd = [f"LENBENCH_DB={redact(settings.db)}", *cmd]
            print(shlex.join(cmd) + f"   # {point.key}; config {point.config_hash or '(unknown: ' + point.hash_note + ')'}")
        return 0

    from bench.sweep.report import comparison_table, plan_table
    from bench.sweep.state import point_states

    db = _open(db_arg, read_only=args.status)
    runs = db.runs() if db is not None else _empty_runs()
    states = point_states(runs, points)
    print(f"sweep {spec.name} ({spec.path}): {spec.description}".rstrip(": "))
    print(f"database {redact(db_arg)}{'' if db is not None else ' (does not exist yet)'}; folder {folder}")
    print(plan_table(states, runs))
    if args.status:
        if db is not None:
            print()
            print(comparison_table(db, spec, states, metric=args.metric))
        return 0

    todo = [s.point for s in states if s.state != "running" and (args.rerun or s.state != "done")]
    if args.rerun:
        print(f"--rerun: {len(todo)} point(s) trained and scored again, done ones too (new rows; the old ones are kept)")
    busy = [s for s in states if s.state == "running"]
    for s in busy:
        print(f"{s.point.key}: run {s.run_id} is running in a live process; not started again")
    if not todo:
        print("nothing to run: every point is done" + (" or running" if busy else ""))
        return 0
    if args.executor == "local":
        return _run_local(todo, settings, args, spec.name)
    return _run_slurm(todo, settings, args, spec.name, folder)


def _open(db_arg: str, read_only: bool):  # noqa: ANN202
    from results_db import ResultsDB

    if read_only:
        try:
            return ResultsDB(db_arg, read_only=True)
        except FileNotFoundError:
            return None
    return ResultsDB(db_arg)  # creates the schema once here, before many workers open it at the same time


def _empty_runs():  # noqa: ANN202
    import pandas as pd

    return pd.DataFrame(columns=["id", "config_hash", "method", "status", "sweep", "sweep_point", "kind", "backbone"])


def _summary(results, name: str, file: str) -> int:  # noqa: ANN001
    failed = [r for r in results if r.status == "failed"]
    done = [r for r in results if r.status == "finished"]
    interrupted = sum(r.status == "interrupted" for r in results)
    not_started = sum(r.status == "not started" for r in results)
    elsewhere = sum(r.status == "running elsewhere" for r in results)
    print(f"\nsweep {name}: {len(done)} finished, {len(failed)} failed"
          + (f", {interrupted} interrupted, {not_started} not started (the same command resumes them)" if interrupted + not_started else "")
          + (f", {elsewhere} running in another process" if elsewhere else ""))
    for r in failed:
        print(f"  FAILED {r.key} after {r.attempts} attempt(s): {r.last_line}\n         log: {r.log}")
    print(f"status and comparison: bench sweep {shlex.quote(file)} --status")
    return 1 if failed else 0


def _run_local(points, settings, args, name: str) -> int:  # noqa: ANN001
    from bench.sweep.executors import run_local

    results, interrupted = run_local(points, settings, args.jobs)
    code = _summary(results, name, args.file)
    return 130 if interrupted else code


def _run_slurm(points, settings, args, name: str, folder: Path) -> int:  # noqa: ANN001
    from bench.sweep.executors import (
        SlurmOptions,
        parse_slurm_extra,
        parse_time_minutes,
        record_submission,
        still_queued,
        submit_slurm,
        wait_jobs,
    )

    options = SlurmOptions(
        partition=args.partition, gpus_per_job=args.gpus_per_job, time_min=parse_time_minutes(args.time),
        array_parallelism=args.array_parallelism, cpus_per_job=args.cpus_per_job, extra=parse_slurm_extra(args.slurm),
        cluster=args.submitit_cluster,
    )
    if "://" not in settings.db and args.submitit_cluster is None:
        print(f"note: the results database is the SQLite file {settings.db}; every node must see it, and many writers "
              "on a network file system are slow: a PostgreSQL URL (postgresql+psycopg://...) is the shared store")
    if args.submitit_cluster is None:  # submitit's local/debug jobs end with this process: nothing stays queued
        queued = still_queued(points, folder)
        for key, job_id in queued.items():
            print(f"{key}: job {job_id} of an earlier submission is still queued or running; not submitted again")
        points = [p for p in points if p.key not in queued]
        if not points:
            print("nothing to submit")
            return 0
    jobs = submit_slurm(points, settings, options, folder, name)
    record_submission(folder, jobs, points)
    print(f"submitted {len(jobs)} point(s) as job array {jobs[0].job_id.split('_')[0]}; submitit files in {folder / 'submitit'}, "
          f"per-point logs in {settings.log_dir}")
    for job, point in zip(jobs, points):
        print(f"  {job.job_id}  {point.key}")
    if not args.wait:
        print(f"progress: bench sweep {shlex.quote(args.file)} --status" + (f" --db {shlex.quote(redact(args.db))}" if args.db else ""))
        return 0
    return _summary(wait_jobs(jobs, points), name, args.file)
