"""A database URL's password is never stored or shown: not in a run row (command, error), a sweep log, a model
card, an MTEB export or the leaderboard; rows written before are redacted by a migration."""

from __future__ import annotations

import shutil
import sqlite3
import sys
from pathlib import Path

import pytest

from bench.cli import main
from results_db import ResultsDB
from results_db.models import SCHEMA_VERSION
from results_db.redact import redact, redact_args
from tests.conftest import write_sts

SECRET = "s3cr3t-Pw"
LEGACY = Path(__file__).parent / "data" / "legacy"
REDACTION_STEP = 4  # the schema version whose migration redacts stored passwords


@pytest.mark.parametrize(
    "text, kept",
    [
        (f"postgresql://bench:{SECRET}@db.example:5432/lenbench", "postgresql://bench:***@db.example:5432/lenbench"),
        (f"bench eval --db postgresql+psycopg://u:{SECRET}%40x@h/d --model bm25", "--db postgresql+psycopg://u:***@h/d --model bm25"),
        (f"bench run --db=mysql://u:{SECRET}@h/d --out x", "--db=mysql://u:***@h/d --out x"),
        (f"bench eval --db 'postgresql://u:{SECRET} with space@h/d' --seed 1", "--db 'postgresql://u:***@h/d' --seed 1"),
        (f"a postgresql://a:{SECRET}@h1/d and postgresql://b:{SECRET}@h2/d", "a postgresql://a:***@h1/d and postgresql://b:***@h2/d"),
    ],
)
def test_redact_hides_every_password_and_keeps_the_rest(text, kept):
    out = redact(text)
    assert SECRET not in out and kept in out


def test_text_without_a_password_is_unchanged():
    for text in ("bench eval --db results.sqlite", "sqlite:////tmp/a.sqlite", "postgresql://bench@h:5/db", "see http://x.org/a@b"):
        assert redact(text) == text


def test_each_argument_is_redacted_on_its_own():
    argv = ["--db", f"postgresql://u:{SECRET} 'x\"@y@h/d", f"--db=postgresql://u:{SECRET}@h/d", "plain"]
    assert redact_args(argv) == ["--db", "postgresql://u:***@h/d", "--db=postgresql://u:***@h/d", "plain"]


def _beir(root: Path) -> Path:
    import json

    folder = root / "beir" / "scifact"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": f"d{i}", "title": "", "text": f"word{i} text"}) + "\n" for i in range(4)))
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "word1"}) + "\n")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    return root


def test_bench_eval_with_a_password_in_its_db_url_stores_no_password(tmp_path, monkeypatch, capsys):
    """The eval row's command names the database with the password hidden; the URL still works (an SQLite URL may
    carry a user and password; SQLAlchemy ignores them there, as a trust-authenticated server does)."""
    path = tmp_path / "r.sqlite"
    url = f"sqlite://bench:{SECRET}@/{path}"
    argv = ["eval", "--model", "bm25", "--suite", "beir:scifact", "--data-dir", str(_beir(tmp_path / "data")), "--db", url, "--no-progress"]
    monkeypatch.setattr(sys, "argv", ["bench", *argv])
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert SECRET not in captured.out + captured.err
    (row,) = ResultsDB(path).runs().to_dict("records")
    assert row["status"] == "finished" and "--db 'sqlite://bench:***@/" in row["command"]
    assert SECRET not in path.read_bytes().decode("latin-1")


def test_no_row_write_keeps_a_password(tmp_path):
    """Whatever a caller passes (a run row's command, an error naming the URL), the row holds it redacted."""
    db = ResultsDB(tmp_path / "r.sqlite")
    run = db.create_run(model="m", kind="train", command=f"bench run --db postgresql://u:{SECRET}@h/d   # from: x")
    db.finish_run(run, status="failed", error=f"OperationalError: cannot reach postgresql://u:{SECRET}@h/d")
    row = db.get_run(run)
    assert row["command"] == "bench run --db postgresql://u:***@h/d   # from: x"
    assert row["error"] == "OperationalError: cannot reach postgresql://u:***@h/d"
    with pytest.raises(KeyError) as err:
        ResultsDB(f"sqlite://u:{SECRET}@/{tmp_path / 'r.sqlite'}").get_run(99)
    assert SECRET not in str(err.value)


def _plant_password(path: Path, run_id: int, version: int | None = None) -> str:
    con = sqlite3.connect(path)
    (command,) = con.execute("SELECT command FROM runs WHERE id = ?", (run_id,)).fetchone()
    planted = command + f" --db postgresql://bench:{SECRET}@db.example/lenbench"
    con.execute("UPDATE runs SET command = ?, error = ? WHERE id = ?", (planted, f"failed at postgresql://bench:{SECRET}@db.example/x", run_id))
    if version is not None:
        con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(version),))
    con.commit()
    con.close()
    return planted


def _rows(path: Path) -> list[tuple]:
    con = sqlite3.connect(path)
    try:
        return con.execute("SELECT * FROM runs ORDER BY id").fetchall()
    finally:
        con.close()


def test_migration_redacts_the_legacy_database_and_changes_nothing_else(tmp_path):
    path, plain = tmp_path / "legacy.sqlite", tmp_path / "plain.sqlite"
    shutil.copy(LEGACY / "lenbench-0.1.sqlite", path)
    shutil.copy(LEGACY / "lenbench-0.1.sqlite", plain)  # the same fixture without a password: no change there
    planted = _plant_password(path, 2)
    db = ResultsDB(path)
    assert SCHEMA_VERSION in [m.version for m in db.migrated]
    row = db.get_run(2)
    assert row["command"] == planted.replace(SECRET, "***") and row["error"] == "failed at postgresql://bench:***@db.example/x"
    db.engine.dispose()
    ResultsDB(plain).engine.dispose()
    assert [r for r in _rows(path) if r[0] != 2] == [r for r in _rows(plain) if r[0] != 2]  # every other row as it was
    assert SECRET not in path.read_bytes().decode("latin-1")  # not even in a freed page


def test_migration_redacts_a_current_database_holding_a_password(tmp_path):
    path = tmp_path / "v3.sqlite"
    db = ResultsDB(path)
    keep = db.create_run(model="m", command="bench eval --model m --db results.sqlite")
    leak = db.create_run(model="m")
    db.engine.dispose()
    _plant_password(path, leak, version=REDACTION_STEP - 1)
    db = ResultsDB(path)
    assert [m.version for m in db.migrated] == list(range(REDACTION_STEP, SCHEMA_VERSION + 1))
    assert not any(SECRET in str(v) for r in _rows(path) for v in r)
    assert db.get_run(keep)["command"] == "bench eval --model m --db results.sqlite"
    assert db.get_run(leak)["command"].endswith("--db postgresql://bench:***@db.example/lenbench")


def test_the_leaderboard_and_the_model_card_hide_a_password_of_an_unmigrated_row(tmp_path):
    """The page opens a database read-only (no migration): the Run view's command, the sidebar's database name and
    a model card written from such a row still hide the password."""
    from bench.report.model_card import render_model_card
    from leaderboard import queries

    path = tmp_path / "v3.sqlite"
    db = ResultsDB(path)
    run = db.create_run(model="m", method="simcse", kind="train", status="finished")
    db.engine.dispose()
    _plant_password(path, run, version=REDACTION_STEP - 1)
    detail = queries.run_detail(queries.open_readonly(str(path)), run)
    assert SECRET not in detail["command"] + detail["error"] and "postgresql://bench:***@db.example" in detail["command"]
    state = queries.db_state(f"postgresql://bench:{SECRET}@db.example/lenbench")
    assert state.shown == "postgresql://bench:***@db.example/lenbench"
    raw = {"method": "simcse", "command": f"bench run --db postgresql://u:{SECRET}@h/d", "config": {}}
    import pandas as pd

    card = render_model_card(raw, pd.DataFrame(columns=["suite", "dataset", "variant", "metric", "value", "n"]))
    assert SECRET not in card


def test_commands_that_print_or_pass_on_the_database_url_hide_its_password(tmp_path, capsys, monkeypatch):
    """bench sweep --dry-run and its header print the database; bench leaderboard's server gets a URL with a
    password through $LENBENCH_DB, never on its command line (any user's process list shows that)."""
    from bench.commands.leaderboard import streamlit_command

    url = f"postgresql://bench:{SECRET}@db.example/lenbench"
    command = streamlit_command(url, 8501, "127.0.0.1")
    assert SECRET not in " ".join(command) and "--db" not in command
    assert streamlit_command(str(tmp_path / "r.sqlite"), 8501, "127.0.0.1")[-2:] == ["--db", str(tmp_path / "r.sqlite")]
    spec = tmp_path / "s.toml"
    spec.write_text('[sweep]\nname = "s"\n[grid]\nmethod = ["vanilla"]\n[fixed]\nsuite = "sts:stsb"\n')
    assert main(["sweep", str(spec), "--db", url, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert SECRET not in out and "LENBENCH_DB=postgresql://bench:***@db.example/lenbench bench run" in out.replace("'", "")
    import os

    from bench.commands.common import hide_db_password
    from bench.sweep.points import expand
    from bench.sweep.spec import load_spec
    from bench.sweep.worker import WorkerSettings, point_command

    monkeypatch.setenv("LENBENCH_DB", "before.sqlite")  # restored after the test (hide_db_password sets it)
    (point,) = expand(load_spec(spec))
    child = point_command(point, WorkerSettings(db=url, out="o", log_dir="l"))
    assert SECRET not in " ".join(child) and "--db" not in child  # the child reads $LENBENCH_DB (run_point sets it)
    argv = hide_db_password(["run", "--db", url, "--nproc", "2"], url)  # torchrun's children: the same way
    assert argv == ["run", "--nproc", "2"] and os.environ["LENBENCH_DB"] == url
