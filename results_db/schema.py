"""The results database's schema lifecycle and the wording of its faults: a new database gets the schema, an
older one is upgraded (`results_db.migrations`), a foreign or newer one is refused, all under a lock (SQLite BEGIN
IMMEDIATE, PostgreSQL advisory lock) so processes opening the same new database at once all succeed; and the one
line a fault of the database (locked, full, read-only, I/O, corrupt) becomes while lenbench reads or writes it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import inspect
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from results_db.errors import DatabaseMissingError, ResultsDBError
from results_db.location import busy_timeout_ms, describe_db_error
from results_db.migrations import Migration, create_schema, read_version, upgrade
from results_db.models import SCHEMA_VERSION, Base

LENBENCH_TABLES = frozenset(t.name for t in Base.metadata.sorted_tables)
SCHEMA_LOCK_ID = 0x6C656E62  # "lenb": the PostgreSQL advisory lock that serialises schema creation


def _user_tables(conn: Connection) -> set[str]:
    return {t for t in inspect(conn).get_table_names() if not t.startswith("sqlite_")}


def _check_schema_state(tables: set[str], version: int | None, shown: str, *, create: bool, init_foreign: bool) -> None:
    if version is not None:
        if version > SCHEMA_VERSION:
            raise ResultsDBError(
                f"results database {shown} has schema version {version}, newer than this lenbench knows "
                f"({SCHEMA_VERSION}); upgrade lenbench to use it (nothing was written)"
            )
        return
    if not tables:
        if not create:
            raise DatabaseMissingError(
                f"{shown} holds no lenbench results (an empty database; reading never creates one); "
                "record a run there first (bench eval / bench run) or check the path"
            )
        return
    listed = ", ".join(sorted(tables)[:6]) + (", ..." if len(tables) > 6 else "")
    if not create:
        raise ResultsDBError(f"{shown} is not a lenbench results database (it holds other tables: {listed}); check --db")
    if not init_foreign:
        raise ResultsDBError(
            f"{shown} is not a lenbench results database (it holds other tables: {listed}); lenbench will not write "
            "into another application's database: give another --db, or pass --db-init-foreign to add lenbench's "
            "tables beside them"
        )
    clash = sorted(tables & LENBENCH_TABLES)
    if clash:
        raise ResultsDBError(
            f"{shown} already has table(s) {', '.join(clash)} of another application; lenbench cannot share them "
            "(even with --db-init-foreign): give another --db"
        )


@contextmanager
def _schema_lock(engine: Engine) -> Iterator[Connection]:
    """A transaction that holds the database's write lock from its first statement: concurrent creators wait
    (SQLite busy_timeout) and then find the schema made."""
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        elif engine.dialect.name == "postgresql":
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({SCHEMA_LOCK_ID})")
        try:
            yield conn
        except BaseException:
            conn.rollback()
            raise
        conn.commit()


def prepare_schema(engine: Engine, shown: str, *, create: bool = True, init_foreign: bool = False) -> list[Migration]:
    """Create the schema of a new database, upgrade an older one, refuse a foreign or newer one.

    Returns the migration steps applied ([] when the database was current or new)."""
    try:
        with engine.connect() as conn:
            tables, version = _user_tables(conn), read_version(conn, shown)
        if version == SCHEMA_VERSION:
            return []  # the common case: no lock, no write
        _check_schema_state(tables, version, shown, create=create, init_foreign=init_foreign)
        with _schema_lock(engine) as conn:
            # Again under the lock: another process may have created or upgraded it meanwhile.
            tables, version = _user_tables(conn), read_version(conn, shown)
            _check_schema_state(tables, version, shown, create=create, init_foreign=init_foreign)
            if version is None:
                create_schema(conn)
                return []
            return upgrade(conn, version)
    except SQLAlchemyError as exc:
        raise ResultsDBError(describe_db_error(exc, shown)) from None


def check_readable(engine: Engine, shown: str) -> int | None:
    """What a read-only open refuses before reading anything, as `prepare_schema` refuses it for a write: a corrupt
    file, an empty database, another application's, a newer schema. An older schema passes (it is read as it is).
    Returns the stamped version (None: unstamped), so the open reads it once."""
    try:
        with engine.connect() as conn:
            tables, version = _user_tables(conn), read_version(conn, shown)
    except SQLAlchemyError as exc:
        raise ResultsDBError(describe_db_error(exc, shown)) from None
    _check_schema_state(tables, version, shown, create=False, init_foreign=False)
    return version


def describe_write_error(exc: BaseException, shown: str) -> str:
    """One line for a fault of the database while lenbench reads or writes it: what happened, what was (not)
    written, what to do. The transaction was rolled back, so the database holds everything written before it."""
    orig = getattr(exc, "orig", None) or exc
    said = " ".join(str(orig).split()) or type(orig).__name__
    low = said.lower()
    if "locked" in low or "busy" in low:
        return (f"results database {shown} is locked by another process (waited {busy_timeout_ms() / 1000:g} s for it); "
                "this write was rolled back, earlier results are kept; let the other writer finish, then run the command "
                "again ($LENBENCH_DB_BUSY_TIMEOUT waits longer)")  # fmt: skip
    if "full" in low or "no space" in low or "quota" in low:
        return (f"results database {shown}: the disk is full ({said}); this write was rolled back, earlier results "
                "are kept; free space (or give another --db), then run the command again")  # fmt: skip
    if "disk i/o error" in low:
        return (f"results database {shown}: disk I/O error while writing (a full disk, a file-size limit or a failing "
                "device); this write was rolled back, earlier results are kept; free space (or give another --db), "
                "then run the command again")  # fmt: skip
    if "readonly" in low or "read-only" in low:
        return f"results database {shown} became read-only ({said}); this write was rolled back; give a writable --db"
    if "malformed" in low or "not a database" in low:
        return f"results database {shown} is corrupt ({said}); restore it from a copy or give another --db"
    return f"results database {shown}: {said}; this write was rolled back, earlier results are kept"


def is_database_fault(exc: BaseException) -> bool:
    """Faults of the database or its disk (locked, full, read-only, I/O): not lenbench's bug, not the user's input."""
    from sqlalchemy.exc import OperationalError

    import sqlite3

    return isinstance(exc, OperationalError) or isinstance(getattr(exc, "orig", None), sqlite3.OperationalError) or (
        isinstance(exc, DBAPIError) and "disk" in str(exc).lower()
    )
