"""Four processes opening the same *new* database at once all succeed, and each writes its run: schema creation
is serialised (SQLite BEGIN IMMEDIATE) and idempotent, 20 trials in a row."""

from __future__ import annotations

import multiprocessing as mp
import traceback

import pytest

from results_db import ResultsDB, ScoreRecord

PROCESSES = 4
TRIALS = 20


def _open_and_write(path: str, barrier, errors) -> None:  # noqa: ANN001
    try:
        barrier.wait(timeout=30)
        db = ResultsDB(path)
        run = db.create_run(model="m", method="simcse", config={}, seed=0)
        db.add_scores(run, [ScoreRecord("sts", "stsb", "spearman", 50.0, 3)])
        db.finish_run(run)
    except BaseException:  # noqa: BLE001 - report every failure to the parent
        errors.put(traceback.format_exc(limit=3))


def _one_trial(ctx, db: str, errors, timeout: float, label: str) -> list[str]:  # noqa: ANN001
    """PROCESSES processes open (create) the same new database at one barrier and write a run each; their failures."""
    barrier = ctx.Barrier(PROCESSES)
    procs = [ctx.Process(target=_open_and_write, args=(db, barrier, errors)) for _ in range(PROCESSES)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout)
    failures = []
    while not errors.empty():
        failures.append(f"{label}: {errors.get()}")
    return failures + [f"{label}: exit code {p.exitcode}" for p in procs if p.exitcode != 0]


def test_concurrent_creation_of_a_new_database(tmp_path):
    ctx = mp.get_context("fork")  # the parent has imported everything: children start in milliseconds
    ResultsDB(tmp_path / "warm-up.sqlite").runs()  # SQLAlchemy's lazy imports happen once, here, not per child
    errors = ctx.Queue()
    failures = []
    for trial in range(TRIALS):
        path = str(tmp_path / f"new-{trial}.sqlite")
        failures += _one_trial(ctx, path, errors, timeout=60, label=f"trial {trial}")
        if not failures:
            runs = ResultsDB(path, read_only=True).runs()
            assert runs["status"].tolist() == ["finished"] * PROCESSES
    assert not failures, "\n".join(failures[:3]) + f"\n{len(failures)} failures"


PG_TRIALS = 5


def test_concurrent_creation_of_a_new_postgresql_database_and_foreign_refusal():
    """The same on PostgreSQL (the advisory lock serialises creation), and another application's tables there are
    refused as in SQLite. A throwaway cluster; skipped where PostgreSQL's binaries are missing."""
    from sqlalchemy import create_engine, text

    from results_db import ResultsDBError
    from tests.postgres_cluster import throwaway_postgres

    ctx = mp.get_context("fork")
    with throwaway_postgres() as url:
        admin = create_engine(url, isolation_level="AUTOCOMMIT")
        failures = []
        errors = ctx.Queue()
        for trial in range(PG_TRIALS):
            with admin.connect() as conn:
                conn.execute(text(f"CREATE DATABASE trial{trial}"))
            trial_url = url.rsplit("/", 1)[0] + f"/trial{trial}"
            failures += _one_trial(ctx, trial_url, errors, timeout=120, label=f"trial {trial}")
            if not failures:
                assert ResultsDB(trial_url, read_only=True).runs()["status"].tolist() == ["finished"] * PROCESSES
        assert not failures, "\n".join(failures[:3]) + f"\n{len(failures)} failures"

        with admin.connect() as conn:
            conn.execute(text("CREATE DATABASE otherapp"))
        other = url.rsplit("/", 1)[0] + "/otherapp"
        with create_engine(other).begin() as conn:
            conn.execute(text("CREATE TABLE users (id integer primary key, name text)"))
        with pytest.raises(ResultsDBError, match="is not a lenbench results database .*users"):
            ResultsDB(other)
        with create_engine(other).connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'")).scalar() == 1
        admin.dispose()
