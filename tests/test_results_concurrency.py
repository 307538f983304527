"""Many processes writing one results database at once (what a sweep's workers do): PostgreSQL through psycopg 3,
and SQLite; every run and score arrives exactly once. A read-only PostgreSQL ResultsDB refuses writes."""

from __future__ import annotations

import pytest
from sqlalchemy.exc import DBAPIError

from results_db import ResultsDB, ScoreRecord
from tests.postgres_cluster import throwaway_postgres
from tests.processes import CONTEXT, finish

WRITERS, RUNS_EACH = 4, 25


@pytest.fixture(scope="module")
def pg_url():
    with throwaway_postgres() as url:
        yield url


def write_runs(url: str, writer: int, barrier) -> None:  # noqa: ANN001 - runs in a child process
    """One worker's life: create a run, score it, log a step, finish it; 25 times."""
    db = ResultsDB(url)
    barrier.wait(timeout=120)  # all four start writing at the same moment
    for i in range(RUNS_EACH):
        run_id = db.create_run(kind="train", model=f"w{writer}-r{i}", method="simcse", config_hash=f"{writer}-{i}",
                               seed=i, status="running", sweep="concurrency", sweep_point=f"writer={writer} run={i}")
        db.log_train(run_id, [{"step": 1, "loss": 1.0}])
        db.add_scores(run_id, [ScoreRecord("sts:stsb", "stsb", "spearman", float(i), n=4)])
        db.finish_run(run_id)
    db.engine.dispose()


def write_concurrently(url: str) -> None:
    ResultsDB(url).engine.dispose()  # the schema exists before the workers open it (as `bench sweep` does)
    barrier = CONTEXT.Barrier(WRITERS)  # spawned workers (tests/processes.py): a forked one can inherit a held lock
    procs = [CONTEXT.Process(target=write_runs, args=(url, w, barrier)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    assert finish(procs, timeout=300) == [0] * WRITERS


def assert_all_written_once(db: ResultsDB) -> None:
    runs = db.runs()
    expected = sorted(f"w{w}-r{i}" for w in range(WRITERS) for i in range(RUNS_EACH))
    assert sorted(runs["model"]) == expected  # 100 runs: none lost, none duplicated
    assert set(runs["status"]) == {"finished"} and runs["id"].is_unique
    scores = db.scores()
    assert len(scores) == WRITERS * RUNS_EACH and sorted(scores["run_id"]) == sorted(runs["id"])
    by_run = dict(zip(runs["id"], runs["seed"]))
    assert all(by_run[r] == v for r, v in zip(scores["run_id"], scores["value"]))  # each score on its own run


def test_four_processes_write_100_runs_to_postgresql(pg_url):
    write_concurrently(pg_url)
    db = ResultsDB(pg_url, read_only=True)
    assert db.engine.dialect.name == "postgresql" and db.engine.dialect.driver == "psycopg"
    assert_all_written_once(db)


def test_four_processes_write_100_runs_to_sqlite_in_wal_mode(tmp_path):
    import sqlite3

    path = tmp_path / "shared.sqlite"
    with sqlite3.connect(path) as conn:  # WAL is a property of the file: every connection the workers open uses it
        assert conn.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
    write_concurrently(str(path))  # ResultsDB's busy timeout makes each writer wait for the lock instead of failing
    assert_all_written_once(ResultsDB(path, read_only=True))


def test_read_only_postgresql_refuses_writes(pg_url):
    writer = ResultsDB(pg_url)
    run_id = writer.create_run(kind="eval", model="kept", method="vanilla")
    reader = ResultsDB(pg_url, read_only=True)
    before = len(reader.runs())
    with pytest.raises(DBAPIError, match="read-only transaction"):
        reader.create_run(kind="eval", model="refused", method="vanilla")
    with pytest.raises(DBAPIError, match="read-only transaction"):
        reader.update_run(run_id, status="failed")
    with pytest.raises(DBAPIError, match="read-only transaction"):
        with reader.engine.connect() as conn:  # even raw SQL through its connection
            conn.exec_driver_sql("DELETE FROM runs")
    assert len(reader.runs()) == before and writer.get_run(run_id)["status"] == "running"
    from leaderboard.queries import open_readonly

    board = open_readonly(pg_url)  # how the leaderboard opens it
    with pytest.raises(DBAPIError, match="read-only transaction"):
        board.create_run(kind="eval", model="refused", method="vanilla")
