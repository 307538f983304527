"""`bench db upgrade`: bring a database of an older schema to today's, in place, after a backup. Reads never do this
(`results_db.snapshot`); the upgrade is the one command that changes an older file, and it first copies the file
beside itself (`<name>.schema<N>-backup.sqlite`, a number added when that name is taken), so a user who upgraded
by mistake can go back to the file as it was.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from results_db.errors import ResultsDBError
from results_db.location import Location, locate, sqlite_file_uri
from results_db.migrations import Migration


@dataclass
class UpgradeReport:
    shown: str
    version: int | None  # the schema the database had (None: no lenbench stamp)
    backup: Path | None = None
    applied: list[Migration] = field(default_factory=list)


def backup_path(path: Path, version: int) -> Path:
    """`<stem>.schema<N>-backup<suffix>` beside the file, never an existing one."""
    candidate = path.with_name(f"{path.stem}.schema{version}-backup{path.suffix}")
    n = 2
    while candidate.exists():
        candidate = path.with_name(f"{path.stem}.schema{version}-backup-{n}{path.suffix}")
        n += 1
    return candidate


def copy_database(source: Path, target: Path) -> None:
    """The file byte for byte, copied while a write lock is held (BEGIN IMMEDIATE), so no other writer is half-way
    through a transaction in it."""
    import shutil

    con = sqlite3.connect(sqlite_file_uri(source), uri=True, timeout=30, isolation_level=None)
    try:
        con.execute("BEGIN IMMEDIATE")
        shutil.copyfile(source, target)
        con.execute("ROLLBACK")
    finally:
        con.close()


def stored_version(location: Location) -> int | None:
    from results_db.location import open_engine
    from results_db.migrations import read_version

    engine = open_engine(location)
    try:
        with engine.connect() as conn:
            return read_version(conn, location.shown)
    finally:
        engine.dispose()


def upgrade_database(db: str, backup: bool = True) -> UpgradeReport:
    """Upgrade `db` to this lenbench's schema; an SQLite file is backed up first (`backup=False`: not; a server
    database: the user's own dump, which the command's output asks for)."""
    from results_db.location import check_sqlite_file
    from results_db.models import SCHEMA_VERSION
    from results_db.store import ResultsDB

    location = locate(db)
    if location.path is not None:
        check_sqlite_file(location.path, must_exist=True, writable=True)
    version = stored_version(location)
    report = UpgradeReport(location.shown, version)
    if version is None:
        raise ResultsDBError(f"{location.shown} holds no lenbench schema stamp (not a lenbench results database, or "
                             "an empty one); nothing to upgrade: check --db")  # fmt: skip
    if version >= SCHEMA_VERSION:
        opened = ResultsDB(db, create=False)  # a newer one is refused here with its own line
        opened.engine.dispose()
        return report
    if backup and location.path is not None:
        report.backup = backup_path(location.path, version)
        copy_database(location.path, report.backup)
    opened = ResultsDB(db, create=False)
    report.applied = opened.migrated
    opened.engine.dispose()
    return report
