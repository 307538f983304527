"""Where the results database is and how it is opened: a file path or URL becomes a `Location` (the URL to
connect with, the SQLite file, the name errors give it), the SQLite file is checked before SQLite sees it (a
folder, a missing file for a read, an unwritable place, a corrupt or truncated file), and the engine is made with
its per-connection settings. Errors at open are one line (`results_db.errors`).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from typing import TYPE_CHECKING

from results_db.errors import DatabaseMissingError, ResultsDBError

if TYPE_CHECKING:  # SQLAlchemy loads in the functions that use it: `bench --help` and option parsing never need it
    from sqlalchemy.engine import URL, Engine
    from sqlalchemy.exc import DBAPIError, SQLAlchemyError

DEFAULT_DB = "lenbench.sqlite"


def default_db_url() -> str:
    from bench import environment

    return environment.text("LENBENCH_DB") or DEFAULT_DB


@dataclass(frozen=True)
class Location:
    """Where a database is: the URL to connect with, the SQLite file (None for a server or in-memory database)
    and the name errors give it (a URL's password hidden)."""

    url: str
    path: Path | None
    shown: str


def locate(db: str | os.PathLike[str], read_only: bool = False) -> Location:
    """A file path or an `sqlite:///PATH` URL becomes an SQLite file location (read-only: SQLite's mode=ro URI);
    any other SQLAlchemy URL is taken as it is."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    text = str(db)
    if text == ":memory:" or text.startswith("file::memory:"):  # SQLite's in-memory names, not a file to create
        return Location("sqlite:///:memory:", None, text)
    if "://" not in text:
        return _sqlite_location(Path(text).expanduser().resolve(), read_only)
    try:
        url = make_url(text)
    except ArgumentError:
        raise ResultsDBError(
            f"--db {text!r} is neither a file path nor a database URL; give e.g. results.sqlite, "
            "sqlite:////abs/path.sqlite or postgresql://USER@HOST/DB"
        ) from None
    if url.get_backend_name() == "sqlite" and not is_in_memory(url) and not url.query.get("uri"):
        return _sqlite_location(Path(url.database).expanduser().resolve(), read_only)
    return Location(text, None, url.render_as_string(hide_password=True))


def is_in_memory(url: URL) -> bool:
    """An SQLite URL whose database lives only as long as the connection (`sqlite://`, `:memory:`, mode=memory)."""
    if url.get_backend_name() != "sqlite":
        return False
    database = url.database or ""
    return database in ("", ":memory:") or database.startswith("file::memory:") or url.query.get("mode") == "memory"


def is_in_memory_text(url: str) -> bool:
    """`is_in_memory` of a URL given as text (False for text that is no URL)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return is_in_memory(make_url(url))
    except ArgumentError:
        return False


def sqlite_file_uri(path: str | os.PathLike[str], **params: str) -> str:
    """SQLite's own `file:` URI for a file path, every URI-special character escaped (`%`, `?`, `#`, spaces):
    the one way lenbench turns a database or cache path into an SQLite URI."""
    uri = "file:" + quote(str(path), safe="/")
    return uri + ("?" + "&".join(f"{k}={v}" for k, v in params.items()) if params else "")


def sqlite_url(path: Path, read_only: bool = False) -> URL:
    """The SQLAlchemy URL of an SQLite file, built from its parts (never parsed from a string, so a `%41` or a `?`
    in the path stays in the file name); read-only through SQLite's mode=ro URI."""
    from sqlalchemy.engine import URL

    if read_only:
        return URL.create("sqlite", database=sqlite_file_uri(path), query={"mode": "ro", "uri": "true"})
    return URL.create("sqlite", database=str(path))


def _sqlite_location(path: Path, read_only: bool) -> Location:
    # SQLite's read-only mode for read_only: no statement run through this engine can write.
    return Location(sqlite_url(path, read_only).render_as_string(hide_password=False), path, str(path))


def to_url(db: str | os.PathLike[str], read_only: bool = False) -> str:
    """The SQLAlchemy URL `ResultsDB` connects to for `db` (a file path or a URL); `make_url` of it names the same file."""
    return locate(db, read_only).url


SQLITE_MAGIC = b"SQLite format 3\x00"


class NotSQLiteFile(ValueError):
    """The file does not start with SQLite's header."""


@contextmanager
def read_only_sqlite(path: Path) -> Iterator[sqlite3.Connection]:
    """A connection to an SQLite file opened through SQLite's read-only mode, so a file another process holds open
    is read as it is and never changed (how lenbench proves a cache file is its own before deleting it). Raises
    NotSQLiteFile for another kind of file, OSError or sqlite3.Error for an unreadable one."""
    with open(path, "rb") as fh:
        if fh.read(16) != SQLITE_MAGIC:
            raise NotSQLiteFile(str(path))
    conn = sqlite3.connect(sqlite_file_uri(path, mode="ro"), uri=True, timeout=5)
    try:
        yield conn
    finally:
        conn.close()


def check_sqlite_file(path: Path, *, must_exist: bool, writable: bool, content: bool = True) -> None:
    """Refuse, with one line, what SQLite would fail on later with a traceback: a folder, a missing file (reads
    never create one), an unwritable place, and (`content`) a file that is no SQLite database or was cut short."""
    if path.is_dir():
        raise ResultsDBError(f"--db {path} is a folder; give a file path such as {path / DEFAULT_DB}")
    if not path.exists():
        if must_exist:
            raise DatabaseMissingError(
                f"results database {path} does not exist (reading never creates one); check the path, "
                "or record a run there first (bench eval / bench run)"
            )
        parent = path.parent
        if not parent.exists():
            raise ResultsDBError(f"cannot create results database {path}: folder {parent} does not exist; create it (mkdir -p) or give another --db")
        if not parent.is_dir():
            raise ResultsDBError(f"cannot create results database {path}: {parent} is a file, not a folder; give another --db")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise ResultsDBError(f"cannot create results database {path}: folder {parent} is not writable; give another --db")
        return
    if not os.access(path, os.R_OK):
        raise ResultsDBError(f"results database {path} is not readable (permissions); give another --db")
    if writable and not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK | os.X_OK)):
        raise ResultsDBError(f"results database {path} (or its folder) is read-only; copy it somewhere writable or give another --db")
    size = path.stat().st_size
    if size == 0 or not content:
        return  # size 0: SQLite's empty database
    with open(path, "rb") as fh:
        header = fh.read(100)
    if not header.startswith(SQLITE_MAGIC):
        raise ResultsDBError(f"{path} is not an SQLite database (another kind of file, or corrupt); give another --db")
    if len(header) < 100:
        raise ResultsDBError(f"results database {path} is truncated ({size} bytes, less than its header); restore it from a copy or give another --db")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    if header[24:28] == header[92:96] and pages and size < pages * page_size:  # the header's page count is valid
        raise ResultsDBError(
            f"results database {path} is truncated ({size} bytes of {pages * page_size}); restore it from a copy or give another --db"
        )


def open_engine(location: Location) -> Engine:
    """The SQLAlchemy engine of a location; an unknown scheme or a missing driver is one line."""
    from sqlalchemy import create_engine
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    try:
        return create_engine(location.url, future=True)
    except NoSuchModuleError:
        scheme = location.url.split("://", 1)[0]
        raise ResultsDBError(
            f"--db {location.shown!r}: unknown database URL scheme {scheme!r}; give a file path, "
            "sqlite:////abs/path.sqlite or postgresql://USER@HOST/DB"
        ) from None
    except ModuleNotFoundError as exc:
        raise ResultsDBError(f"--db {location.shown!r} needs the database driver module {exc.name!r}, which is not installed") from None
    except ArgumentError as exc:
        raise ResultsDBError(f"--db {location.shown!r} is not a usable database URL: {exc}") from None


def describe_db_error(exc: DBAPIError | SQLAlchemyError, shown: str) -> str:
    """One line for a database error at open: what SQLite / the server said, and what to do."""
    orig = getattr(exc, "orig", None) or exc
    said = str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__
    if "not a database" in said or "malformed" in said:
        return f"results database {shown} is corrupt ({said}); restore it from a copy or give another --db"
    if "unable to open" in said:
        return f"cannot open results database {shown}: {said}; check that its folder is writable, or give another --db"
    return f"cannot open results database {shown}: {said}"


def connection_settings(engine: Engine, read_only: bool) -> None:
    """Per-connection settings: SQLite foreign keys, busy timeout and (read_only) query_only; elsewhere read-only
    transactions."""
    from sqlalchemy import event

    if engine.dialect.name != "sqlite":
        if read_only:  # PostgreSQL, MySQL...: every transaction of this engine is read-only

            @event.listens_for(engine, "begin")
            def _read_only_tx(conn):  # noqa: ANN001
                conn.exec_driver_sql("SET TRANSACTION READ ONLY")

        return

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record):  # noqa: ANN001
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute(f"PRAGMA busy_timeout={busy_timeout_ms()}")
        if read_only:
            # mode=ro already refuses writes to the file; query_only also refuses them on attached/temp schemas.
            cur.execute("PRAGMA query_only=ON")
        cur.close()


def busy_timeout_ms() -> int:
    """How long a write waits for another process's lock before it fails ($LENBENCH_DB_BUSY_TIMEOUT seconds, 30)."""
    from bench import environment

    return int(environment.number("LENBENCH_DB_BUSY_TIMEOUT", 30.0) * 1000)
