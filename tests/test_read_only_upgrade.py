"""A command that only reads never changes an older database: `bench results`, `bench claim --no-run` and
`lenbench.load` read a file of an older schema through an upgraded copy in memory, the file byte for byte as it was;
`bench db upgrade` is the one command that upgrades it, after a backup it names."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from pathlib import Path

import pytest

from bench.cli import main
from results_db import ResultsDB
from results_db.models import SCHEMA_VERSION

DATA = Path(__file__).parent / "data"
OLD_DATABASES = [DATA / "legacy" / "lenbench-0.1.sqlite", DATA / "release" / "lenbench-schema6.sqlite"]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def version(path: Path) -> str:
    con = sqlite3.connect(path)
    try:
        return con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
    finally:
        con.close()


@pytest.fixture(params=OLD_DATABASES, ids=lambda p: p.name)
def old_db(request, tmp_path):
    path = tmp_path / request.param.name
    shutil.copy(request.param, path)
    return path


def test_bench_results_leaves_an_old_database_byte_for_byte_unchanged(old_db, capsys):
    before = digest(old_db)
    assert main(["results", "--db", str(old_db)]) == 0
    captured = capsys.readouterr()
    assert digest(old_db) == before
    assert sorted(p.name for p in old_db.parent.iterdir()) == [old_db.name]  # no journal, backup or folder beside it
    assert "run 1" in captured.out or "comparison" in captured.out  # the scores are read all the same
    assert f"bench db upgrade --db {old_db}" in captured.err


def test_the_api_load_leaves_an_old_database_unchanged(old_db):
    import lenbench

    before = digest(old_db)
    store = lenbench.load(old_db)
    assert len(store.runs()) > 0 and len(store.scores()) > 0
    store.db.engine.dispose()
    assert digest(old_db) == before


def test_a_read_only_open_refuses_every_write_to_the_copy(old_db):
    from results_db import ResultsDBError

    db = ResultsDB(old_db, read_only=True)
    assert db.older is not None and db.older.version == int(version(old_db))
    with pytest.raises(ResultsDBError):
        db.create_run(model="m")
    db.engine.dispose()


def test_bench_db_upgrade_keeps_a_backup_and_upgrades_in_place(old_db, capsys):
    before, old_version = digest(old_db), version(old_db)
    assert main(["db", "upgrade", "--db", str(old_db)]) == 0
    out = capsys.readouterr().out
    backup = old_db.with_name(f"{old_db.stem}.schema{old_version}-backup.sqlite")
    assert f"backup of {old_db} as it was (schema {old_version}): {backup}" in out
    assert digest(backup) == before  # the copy is the file as it was
    assert version(old_db) == str(SCHEMA_VERSION)
    assert ResultsDB(old_db, read_only=True).older is None  # read directly now
    assert main(["db", "upgrade", "--db", str(old_db)]) == 0
    assert "nothing to upgrade" in capsys.readouterr().out
    assert not old_db.with_name(f"{old_db.stem}.schema{SCHEMA_VERSION}-backup.sqlite").exists()
