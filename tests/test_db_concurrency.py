"""Four processes opening the same *new* database at once all succeed, and each writes its run: schema creation
is serialised (SQLite BEGIN IMMEDIATE) and idempotent, 20 trials in a row."""

from __future__ import annotations

import traceback

import pytest

from results_db import ResultsDB, ScoreRecord
from tests.processes import CONTEXT, finish

PROCESSES = 4
TRIALS = 20


def _open_and_write_each(paths: list[str], barrier, errors) -> None:  # noqa: ANN001
    """One of PROCESSES workers: for each new database in turn, meet the others at the barrier, then open (create)
    it and write a run. Spawned once for every trial: the imports happen once, not per trial."""
    for path in paths:
        try:
            barrier.wait(timeout=60)
            db = ResultsDB(path)
            run = db.create_run(model="m", method="simcse", config={}, seed=0)
            db.add_scores(run, [ScoreRecord("sts", "stsb", "spearman", 50.0, 3)])
            db.finish_run(run)
            db.engine.dispose()
        except BaseException:  # noqa: BLE001 - report every failure to the parent
            errors.put(f"{path}: {traceback.format_exc(limit=3)}")


def _trials(paths: list[str], timeout: float) -> list[str]:
    """PROCESSES processes open (create) each new database at one barrier and write a run each; their failures."""
    barrier, errors = CONTEXT.Barrier(PROCESSES), CONTEXT.Queue()
    procs = [CONTEXT.Process(target=_open_and_write_each, args=(paths, barrier, errors)) for _ in range(PROCESSES)]
    for p in procs:
        p.start()
    codes = finish(procs, timeout)
    failures = []
    while not errors.empty():
        failures.append(errors.get())
    return failures + [f"a worker's exit code: {c}" + (" (stuck: killed)" if c is None else "") for c in codes if c != 0]


def test_concurrent_creation_of_a_new_database(tmp_path):
    paths = [str(tmp_path / f"new-{trial}.sqlite") for trial in range(TRIALS)]
    failures = _trials(paths, timeout=300)
    assert not failures, "\n".join(failures[:3]) + f"\n{len(failures)} failures"
    for path in paths:
        assert ResultsDB(path, read_only=True).runs()["status"].tolist() == ["finished"] * PROCESSES


PG_TRIALS = 5


def test_concurrent_creation_of_a_new_postgresql_database_and_foreign_refusal():
    """The same on PostgreSQL (the advisory lock serialises creation), and another application's tables there are
    refused as in SQLite. A throwaway cluster; skipped where PostgreSQL's binaries are missing."""
    from sqlalchemy import create_engine, text

    from results_db import ResultsDBError
    from tests.postgres_cluster import throwaway_postgres

    with throwaway_postgres() as url:
        admin = create_engine(url, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            for trial in range(PG_TRIALS):
                conn.execute(text(f"CREATE DATABASE trial{trial}"))
        urls = [url.rsplit("/", 1)[0] + f"/trial{trial}" for trial in range(PG_TRIALS)]
        failures = _trials(urls, timeout=300)
        assert not failures, "\n".join(failures[:3]) + f"\n{len(failures)} failures"
        for trial_url in urls:
            assert ResultsDB(trial_url, read_only=True).runs()["status"].tolist() == ["finished"] * PROCESSES

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
