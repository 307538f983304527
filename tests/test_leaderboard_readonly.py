"""The leaderboard cannot write the database, filters reach SQL only as bound parameters, and `bench leaderboard`
starts Streamlit on the database given."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import insert, text
from sqlalchemy.exc import OperationalError

pytest.importorskip("streamlit")

from streamlit.testing.v1 import AppTest  # noqa: E402

from leaderboard import queries  # noqa: E402
from results_db import ResultsDB  # noqa: E402
from results_db.models import Run  # noqa: E402
from tests.test_leaderboard_fixtures import fill_db  # noqa: E402

APP = Path(__file__).resolve().parent.parent / "leaderboard" / "app.py"


def snapshot(path: Path) -> tuple[str, int, list[str]]:
    """Content hash and mtime of the file, and every companion file beside it (-wal, -journal, -shm)."""
    companions = sorted(p.name for p in path.parent.iterdir() if p.name.startswith(path.name) and p != path)
    return hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns, companions


def test_app_leaves_the_database_untouched(tmp_path, monkeypatch):
    path = fill_db(tmp_path / "results.sqlite")
    before = snapshot(path)
    monkeypatch.setenv("LENBENCH_DB", str(path))
    at = AppTest.from_file(str(APP), default_timeout=90)
    at.run()
    at.multiselect(key="main_method").set_value(["simcse"]).run()
    for view in ("Robustness", "Run", "Compare"):
        at.radio(key="view").set_value(view).run()
        assert not at.exception, at.exception
    at.number_input(key="cmp_a").set_value(1).run()
    at.number_input(key="cmp_b").set_value(3).run()
    assert not at.exception
    assert snapshot(path) == before


def test_the_apps_connection_refuses_writes(tmp_path):
    path = fill_db(tmp_path / "results.sqlite")
    before = snapshot(path)
    db = queries.open_readonly(str(path))
    with pytest.raises(OperationalError, match="readonly|read-only|query_only|attempt to write"):
        with db.engine.begin() as conn:
            conn.execute(insert(Run.__table__).values(model="intruder"))
    with pytest.raises(OperationalError):
        with db.engine.begin() as conn:
            conn.execute(text("DROP TABLE scores"))
    with pytest.raises(OperationalError):
        with db.engine.begin() as conn:
            conn.execute(text("CREATE TEMP TABLE scratch (x)"))  # query_only: not even a temp table
    with pytest.raises(Exception):
        db.create_run(model="intruder")
    with db.engine.connect() as conn:
        assert conn.execute(text("PRAGMA query_only")).scalar() == 1
    assert snapshot(path) == before
    assert len(ResultsDB(path, read_only=True).runs()) == 6


def test_missing_file_is_not_created(tmp_path):
    with pytest.raises(FileNotFoundError):
        queries.open_readonly(str(tmp_path / "absent.sqlite"))
    assert not (tmp_path / "absent.sqlite").exists()


def test_filters_are_bound_parameters_not_sql(tmp_path):
    path = fill_db(tmp_path / "results.sqlite")
    db = queries.open_readonly(str(path))
    statements: list[tuple[str, object]] = []

    from sqlalchemy import event

    @event.listens_for(db.engine, "before_cursor_execute")
    def _record(conn, cursor, statement, parameters, context, executemany):  # noqa: ANN001
        statements.append((statement, parameters))

    hostile = "sts' OR '1'='1"
    assert queries.suite_scores(db, hostile, ["spearman'; DROP TABLE scores; --"], ["clean"]).empty
    assert queries.suite_scores(db, "sts", ["spearman"], ["clean"]).shape[0] == 5 * 3 + 1
    assert queries.run_scores(db, 3).shape[0] > 0
    for statement, parameters in statements:
        assert "OR '1'='1" not in statement and "DROP" not in statement
    assert any(hostile in tuple(p) for _, p in statements if p)  # the text went in as a parameter
    with sqlite3.connect(path) as raw:  # and nothing happened to the tables
        assert raw.execute("SELECT count(*) FROM scores").fetchone()[0] > 0


def test_bench_leaderboard_command(tmp_path, monkeypatch, capsys):
    from bench.cli import main
    from bench.commands import leaderboard

    calls = []
    monkeypatch.setattr(leaderboard.os, "execv", lambda exe, argv: calls.append((exe, argv)))
    monkeypatch.setattr(leaderboard, "shield_pipes", lambda: [])  # no relays forked in the test process
    db = tmp_path / "r.sqlite"
    main(["leaderboard", "--db", str(db), "--port", "8765"])
    (exe, argv), = calls
    assert argv[:4] == [exe, "-m", "streamlit", "run"] and argv[4].endswith("leaderboard/app.py")
    assert argv[argv.index("--server.port") + 1] == "8765"
    assert argv[argv.index("--server.address") + 1] == "127.0.0.1"
    assert argv[argv.index("--server.headless") + 1] == "true"
    assert argv[-3:] == ["--", "--db", str(db.resolve())]
    assert "read-only" in capsys.readouterr().out
    assert not db.exists()  # starting the app does not create a database

    url = "postgresql://user@host/results"
    main(["leaderboard", "--db", url])
    assert calls[-1][1][-1] == url and calls[-1][1][calls[-1][1].index("--server.port") + 1] == "8501"
