"""What the leaderboard refuses, in one line, before showing anything: a database of a newer schema (the CLI refuses
it too), another application's SQLite file (with a command that works on it), and a port another server holds."""

from __future__ import annotations

import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("streamlit")

from results_db import ResultsDB, ScoreRecord  # noqa: E402
from results_db.migrations import VERSION_KEY  # noqa: E402
from results_db.models import SCHEMA_VERSION  # noqa: E402
from tests.test_leaderboard_every_kind import open_on  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _one_run(path: Path) -> Path:
    db = ResultsDB(path)
    run = db.create_run(kind="eval", method="vanilla", backbone="minilm", model="minilm", suite="sts", status="running")
    db.add_scores(run, [ScoreRecord("sts", "stsb", "spearman", 80.0, 100)])
    db.finish_run(run)
    db.engine.dispose()
    return path


def test_a_newer_schema_is_refused_as_the_cli_refuses_it(tmp_path, monkeypatch):
    path = _one_run(tmp_path / "newer.sqlite")
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = ?", (str(SCHEMA_VERSION + 1), VERSION_KEY))
    at = open_on(path, monkeypatch)
    assert [e.value for e in at.error] and "newer than this lenbench knows" in at.error[0].value
    assert not at.dataframe  # nothing of it is shown
    cli = subprocess.run([sys.executable, "-m", "bench", "results", "--db", str(path)], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)  # fmt: skip
    assert cli.returncode != 0 and "newer than this lenbench knows" in cli.stderr


def test_a_foreign_sqlite_file_gets_a_command_that_accepts_it(tmp_path, monkeypatch):
    path = tmp_path / "shop.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    at = open_on(path, monkeypatch)
    assert at.error and "not a lenbench results database" in at.error[0].value and "customers" in at.error[0].value
    commands = [c.value for c in at.code]
    assert commands and all("--db-init-foreign" in c for c in commands), commands


def test_a_busy_port_is_refused_before_the_url_is_printed(tmp_path):
    path = _one_run(tmp_path / "r.sqlite")
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "bench", "leaderboard", "--db", str(path), "--port", str(port)],
                              capture_output=True, text=True, cwd=ROOT, timeout=120)  # fmt: skip
    assert done.returncode != 0
    assert "http://" not in done.stdout, done.stdout
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and f"--port {port}" in lines[0] and "in use" in lines[0], done.stderr
