"""Versioned schema migrations: a database made by an older lenbench (schema 1: no liveness, runtime, model info,
sweep or score info columns, no covering index) is upgraded in place by the numbered steps, keeping every row;
a new database is stamped with the current version; a newer one is refused without a write."""

from __future__ import annotations

import hashlib
import sqlite3

import pytest

from bench.cli import main
from results_db import ResultsDB, ResultsDBError, ScoreRecord
from results_db.migrations import MIGRATIONS
from results_db.models import SCHEMA_VERSION

SCHEMA_2_COLUMNS = {
    "runs": ["host", "pid", "heartbeat_at", "runtime", "model_info", "sweep", "sweep_point"],
    "scores": ["info"],
}


def make_schema_1(path):
    """A schema-1 database with one run and one score: today's tables minus what schema 2 added."""
    db = ResultsDB(path)
    run = db.create_run(model="m", method="simcse", config={"a": 1}, seed=3, status="finished")
    db.add_scores(run, [ScoreRecord("sts", "stsb", "spearman", 81.5, 10)])
    db.engine.dispose()
    con = sqlite3.connect(path)
    for table, columns in SCHEMA_2_COLUMNS.items():
        for column in columns:
            con.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    con.execute("DROP INDEX ix_scores_board")
    con.execute("DROP TABLE curve_points")  # schema 3
    con.execute("DELETE FROM meta")
    con.execute("INSERT INTO meta (key, value) VALUES ('schema_version', '1')")
    con.commit()
    con.close()
    return path


def columns(path, table):
    con = sqlite3.connect(path)
    try:
        return [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
    finally:
        con.close()


def meta(path):
    con = sqlite3.connect(path)
    try:
        return dict(con.execute("SELECT key, value FROM meta"))
    finally:
        con.close()


def test_the_last_migration_is_the_current_schema():
    assert [m.version for m in MIGRATIONS] == list(range(2, SCHEMA_VERSION + 1))


def test_schema_1_is_upgraded_in_place_keeping_its_rows(tmp_path):
    path = make_schema_1(tmp_path / "old.sqlite")
    assert "host" not in columns(path, "runs")
    db = ResultsDB(path)
    assert [m.version for m in db.migrated] == list(range(2, SCHEMA_VERSION + 1))
    for table, added in SCHEMA_2_COLUMNS.items():
        assert set(added) <= set(columns(path, table))
    assert meta(path)["schema_version"] == str(SCHEMA_VERSION) and meta(path)["application"] == "lenbench"
    con = sqlite3.connect(path)
    assert con.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND name = 'ix_scores_board'").fetchone()
    con.close()
    (run,) = db.runs().to_dict("records")
    assert run["method"] == "simcse" and run["config"] == {"a": 1} and run["seed"] == 3
    assert db.scores()["value"].tolist() == [81.5]
    new = db.create_run(model="n", runtime={"world_size": 1})  # the new columns work
    assert db.get_run(new)["runtime"] == {"world_size": 1}
    assert ResultsDB(path).migrated == []  # the second open has nothing to do


def test_bench_results_reads_an_old_database_as_it_is_and_names_the_upgrade(tmp_path, capsys):
    path = make_schema_1(tmp_path / "old.sqlite")
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    assert main(["results", "--db", str(path)]) == 0
    captured = capsys.readouterr()
    assert "81.50" in captured.out and f"`bench db upgrade --db {path}` upgrades it" in captured.err
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before and meta(path)["schema_version"] == "1"


def test_schema_2_gains_curve_points_in_place(tmp_path):
    """A schema-2 database (no curve_points table) is upgraded in place: its rows stay, learning-curve points can be
    written and read back with their step and per-item values, and deleting the run deletes its points."""
    from results_db.store import ItemValues

    path = tmp_path / "v2.sqlite"
    db = ResultsDB(path)
    run = db.create_run(model="m", method="crop", status="finished")
    db.add_scores(run, [ScoreRecord("beir", "scifact", "ndcg@10", 20.5, 3)])
    db.engine.dispose()
    con = sqlite3.connect(path)
    con.execute("DROP TABLE curve_points")
    con.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    con.commit()
    con.close()
    db = ResultsDB(path)
    assert [m.version for m in db.migrated] == list(range(3, SCHEMA_VERSION + 1)) and "curve_points" in tables(path)
    assert db.scores()["value"].tolist() == [20.5]
    items = ItemValues("mean", ["q1", "q2", "q3"], [0.1, 0.2, 0.3])
    for step, value in ((100, 10.0), (200, 15.0)):
        db.add_curve_points(run, step, [ScoreRecord("beir", "scifact", "ndcg@10", value, 3, items=items)])
    db.add_curve_points(run, 200, [ScoreRecord("beir", "scifact", "ndcg@10", 16.0, 3)])  # re-written: replaced
    points = db.curve_points([run], with_items=True)
    assert points["step"].tolist() == [100, 200] and points["value"].tolist() == [10.0, 16.0]
    assert points["items"].iloc[0]["values"] == [0.1, 0.2, 0.3] and points["items"].iloc[1] is None
    assert db.scores()["value"].tolist() == [20.5]  # the final scores never see a curve point


def tables(path):
    con = sqlite3.connect(path)
    try:
        return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        con.close()


def test_a_newer_schema_is_refused_without_a_write(tmp_path):
    path = tmp_path / "new.sqlite"
    ResultsDB(path).engine.dispose()
    con = sqlite3.connect(path)
    con.execute(f"UPDATE meta SET value = '{SCHEMA_VERSION + 1}' WHERE key = 'schema_version'")
    con.commit()
    con.close()
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(ResultsDBError, match=f"schema version {SCHEMA_VERSION + 1}, newer than this lenbench knows"):
        ResultsDB(path)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def test_a_new_database_is_stamped_with_the_current_version(tmp_path):
    ResultsDB(tmp_path / "fresh.sqlite").engine.dispose()
    stamp = meta(tmp_path / "fresh.sqlite")
    assert stamp["schema_version"] == str(SCHEMA_VERSION) and stamp["application"] == "lenbench"
