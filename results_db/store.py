"""The results database: open it safely, write runs and scores transactionally, read them back as DataFrames.

Opening refuses, with one line (`results_db.errors`), what would otherwise fail later or silently: a folder, a
missing file for a read, a corrupt or truncated SQLite file, an unknown URL scheme, another application's
database (unless `init_foreign`), a database from a newer lenbench. A new database is created, and an older one
upgraded (`results_db.migrations`), under a lock (SQLite BEGIN IMMEDIATE, PostgreSQL advisory lock), so processes
opening the same new database at once all succeed.

Every write is its own transaction, so a process that dies mid-run leaves every dataset it finished scored and
the run's status at "running" (or "failed" when the error could be caught); nothing half-written stays behind.
"""

from __future__ import annotations

import math
import os
import socket
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pandas as pd
from sqlalchemy import create_engine, delete, event, inspect, select
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from results_db.errors import DatabaseMissingError, ResultsDBError, UndefinedMetricError
from results_db.migrations import Migration, create_schema, read_version, upgrade
from results_db.models import SCHEMA_VERSION, Base, CurvePoint, Run, Score, ScoreItems, TrainLog, utcnow
from results_db.records import ItemValues, ScoreRecord

DEFAULT_DB = "lenbench.sqlite"


def default_db_url() -> str:
    return os.environ.get("LENBENCH_DB", DEFAULT_DB)


# ------------------------------------------------------------------------------------- where
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
    text = str(db)
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


def _in_memory_text(url: str) -> bool:
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


def _create_engine(location: Location) -> Engine:
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


def _connection_settings(engine: Engine, read_only: bool) -> None:
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


class ResultsDB:
    """The results database. `create=False` (reads, --resume) never creates one; `read_only=True` also never
    migrates or writes (SQLite mode=ro + query_only); `init_foreign=True` adds lenbench's tables to a database
    that holds another application's tables (refused otherwise)."""

    def __init__(
        self,
        db: str | os.PathLike[str] | None = None,
        read_only: bool = False,
        *,
        create: bool = True,
        init_foreign: bool = False,
        allow_in_memory: bool = False,
    ):
        self.location = locate(db if db is not None else default_db_url(), read_only=read_only)
        if not allow_in_memory and self.location.path is None and _in_memory_text(self.location.url):
            raise ResultsDBError(
                f"--db {self.location.shown!r} is an in-memory database: nothing recorded there is kept after the "
                "command ends (and there is nothing to read); give a file path such as results.sqlite"
            )
        self.url = self.location.url
        self.read_only = read_only
        if self.location.path is not None:
            # Read-only opens (the leaderboard) report an unreadable file through the SQLAlchemy errors of their reads.
            check_sqlite_file(
                self.location.path, must_exist=read_only or not create, writable=not read_only and create, content=not read_only
            )
        self.engine = _create_engine(self.location)
        _connection_settings(self.engine, read_only)
        self.migrated: list[Migration] = []
        if not read_only:
            self.migrated = prepare_schema(self.engine, self.location.shown, create=create, init_foreign=init_foreign)
        self._Session = sessionmaker(self.engine, expire_on_commit=False)

    def session(self) -> Session:
        return _TxSession(self.engine, self.location.shown)

    # ----------------------------------------------------------------- writes
    def create_run(self, **fields: Any) -> int:
        """A new run row; host, pid and heartbeat default to this process, now."""
        with self.session() as s:
            run = Run(**{**liveness_fields(), **fields})
            s.add(run)
            s.flush()
            return run.id

    def update_run(self, run_id: int, **fields: Any) -> None:
        with self.session() as s:
            run = s.get(Run, run_id)
            if run is None:
                raise KeyError(f"no run {run_id} in {self.location.shown}")
            for key, value in fields.items():
                setattr(run, key, value)

    def heartbeat(self, run_id: int) -> None:
        """The running process of `run_id` is alive now (a row whose heartbeat stops is shown as stale)."""
        with self.session() as s:
            s.execute(Run.__table__.update().where(Run.id == run_id).values(heartbeat_at=utcnow()))

    def finish_run(self, run_id: int, status: str = "finished", error: str = "", **fields: Any) -> None:
        self.update_run(run_id, status=status, error=error, finished_at=utcnow(), **fields)

    def add_scores(self, run_id: int, records: Iterable[ScoreRecord]) -> None:
        """Write the scores of one dataset in one transaction; a re-write of the same key replaces it."""
        records = list(records)
        for rec in records:
            if not math.isfinite(float(rec.value)):
                reason = (rec.info or {}).get("undefined", "")
                raise UndefinedMetricError(
                    f"{rec.suite}/{rec.dataset} ({rec.variant}) {rec.metric} is undefined ({rec.value})"
                    + (f": {reason}" if reason else "")
                    + "; nothing was recorded for that dataset"
                )
        with self.session() as s:
            for rec in records:
                old = s.scalars(
                    select(Score).where(
                        Score.run_id == run_id,
                        Score.suite == rec.suite,
                        Score.dataset == rec.dataset,
                        Score.variant == rec.variant,
                        Score.metric == rec.metric,
                    )
                ).first()
                if old is not None:
                    s.delete(old)
                    s.flush()
                score = Score(
                    run_id=run_id,
                    suite=rec.suite,
                    dataset=rec.dataset,
                    variant=rec.variant,
                    metric=rec.metric,
                    value=float(rec.value),
                    n=int(rec.n),
                    info=rec.info,
                )
                s.add(score)
                if rec.items is not None:
                    s.flush()
                    s.add(
                        ScoreItems(
                            score_id=score.id,
                            aggregate=rec.items.aggregate,
                            item_ids=[str(i) for i in rec.items.item_ids],
                            values=[float(v) for v in rec.items.values],
                            gold=None if rec.items.gold is None else [float(v) for v in rec.items.gold],
                        )
                    )

    def log_train(self, run_id: int, rows: Sequence[dict[str, Any]]) -> None:
        """rows: dicts with step, loss, lr, examples_per_s and any extra keys; a step logged again replaces it."""
        if not rows:
            return
        with self.session() as s:
            steps = [int(r["step"]) for r in rows]
            s.execute(delete(TrainLog).where(TrainLog.run_id == run_id, TrainLog.step.in_(steps)))
            for r in rows:
                extra = {k: v for k, v in r.items() if k not in ("step", "loss", "lr", "examples_per_s")}
                s.add(
                    TrainLog(
                        run_id=run_id,
                        step=int(r["step"]),
                        loss=float(r["loss"]),
                        lr=float(r.get("lr", 0.0)),
                        examples_per_s=float(r.get("examples_per_s", 0.0)),
                        extra=extra,
                    )
                )

    def add_curve_points(self, run_id: int, step: int, records: Iterable[ScoreRecord]) -> None:
        """Scores of the run's encoder after `step` training steps (a learning-curve point), in one transaction; a
        point written again (a resumed run re-evaluating a step) replaces the old one. Non-finite values are skipped."""
        records = [r for r in records if math.isfinite(float(r.value))]
        with self.session() as s:
            for rec in records:
                s.execute(delete(CurvePoint).where(
                    CurvePoint.run_id == run_id, CurvePoint.step == int(step), CurvePoint.suite == rec.suite,
                    CurvePoint.dataset == rec.dataset, CurvePoint.variant == rec.variant, CurvePoint.metric == rec.metric,
                ))  # fmt: skip
                items = None
                if rec.items is not None:
                    items = {"aggregate": rec.items.aggregate, "item_ids": [str(i) for i in rec.items.item_ids],
                             "values": [float(v) for v in rec.items.values],
                             "gold": None if rec.items.gold is None else [float(v) for v in rec.items.gold]}  # fmt: skip
                s.add(CurvePoint(run_id=run_id, step=int(step), suite=rec.suite, dataset=rec.dataset, variant=rec.variant,
                                 metric=rec.metric, value=float(rec.value), n=int(rec.n), info=rec.info, items=items))  # fmt: skip

    # ------------------------------------------------------------------ reads
    def curve_points(self, run_ids: Sequence[int] | None = None, with_items: bool = False) -> pd.DataFrame:
        """Learning-curve points (run_id, step, suite, dataset, variant, metric, value, n, info[, items]) by run
        and step. A database from before schema 3 has none (and the read-only leaderboard cannot add the table)."""
        table = CurvePoint.__table__
        with self.engine.connect() as conn:
            if "curve_points" not in inspect(conn).get_table_names():
                return pd.DataFrame(columns=[c.name for c in table.columns if with_items or c.name != "items"])
            columns = [c for c in table.columns if with_items or c.name != "items"]
            stmt = select(*columns).order_by(table.c.run_id, table.c.step, table.c.id)
            if run_ids is not None:
                stmt = stmt.where(table.c.run_id.in_([int(r) for r in run_ids]))
            return pd.read_sql(stmt, conn)

    def get_run(self, run_id: int) -> dict[str, Any]:
        with self.session() as s:
            run = s.get(Run, run_id)
            if run is None:
                raise KeyError(f"no run {run_id} in {self.location.shown}")
            return _row_dict(run)

    def runs(self) -> pd.DataFrame:
        with self.engine.connect() as conn:
            return pd.read_sql(select(Run.__table__), conn)

    def scores(self, run_ids: Sequence[int] | None = None) -> pd.DataFrame:
        stmt = select(Score.__table__)
        if run_ids is not None:
            stmt = stmt.where(Score.run_id.in_(list(run_ids)))
        with self.engine.connect() as conn:
            return pd.read_sql(stmt, conn)

    def train_log(self, run_id: int) -> pd.DataFrame:
        stmt = select(TrainLog.__table__).where(TrainLog.run_id == run_id).order_by(TrainLog.step)
        with self.engine.connect() as conn:
            return pd.read_sql(stmt, conn)

    def score_items(self, score_id: int) -> ItemValues | None:
        with self.session() as s:
            row = s.get(ScoreItems, score_id)
            if row is None:
                return None
            return ItemValues(row.aggregate, list(row.item_ids), list(row.values), row.gold)

    def scored_datasets(self, run_id: int) -> set[tuple[str, str, str]]:
        """(suite, dataset, variant) already scored for a run: what a resumed evaluation can skip."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(Score.suite, Score.dataset, Score.variant).where(Score.run_id == run_id)
            ).all()
        return {tuple(r) for r in rows}


# ------------------------------------------------------------------------------------ schema
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
            tables, version = _user_tables(conn), read_version(conn)
        if version == SCHEMA_VERSION:
            return []  # the common case: no lock, no write
        _check_schema_state(tables, version, shown, create=create, init_foreign=init_foreign)
        with _schema_lock(engine) as conn:
            # Again under the lock: another process may have created or upgraded it meanwhile.
            tables, version = _user_tables(conn), read_version(conn)
            _check_schema_state(tables, version, shown, create=create, init_foreign=init_foreign)
            if version is None:
                create_schema(conn)
                return []
            return upgrade(conn, version)
    except SQLAlchemyError as exc:
        raise ResultsDBError(describe_db_error(exc, shown)) from None


def liveness_fields() -> dict[str, Any]:
    """Which process holds a running row, stamped now (see results_db.liveness)."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "heartbeat_at": utcnow()}


def busy_timeout_ms() -> int:
    """How long a write waits for another process's lock before it fails ($LENBENCH_DB_BUSY_TIMEOUT seconds, 30)."""
    try:
        return max(0, int(float(os.environ.get("LENBENCH_DB_BUSY_TIMEOUT", "30")) * 1000))
    except ValueError:
        return 30_000


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


def _is_database_fault(exc: BaseException) -> bool:
    """Faults of the database or its disk (locked, full, read-only, I/O): not lenbench's bug, not the user's input."""
    from sqlalchemy.exc import OperationalError

    import sqlite3

    return isinstance(exc, OperationalError) or isinstance(getattr(exc, "orig", None), sqlite3.OperationalError) or (
        isinstance(exc, DBAPIError) and "disk" in str(exc).lower()
    )


class _TxSession(Session):
    """A session that commits on a clean exit and rolls back on an exception. A fault of the database itself
    (locked past the busy timeout, disk full, read-only, I/O error) becomes a `ResultsDBError` of one line."""

    def __init__(self, engine: Engine, shown: str = ""):
        super().__init__(engine, expire_on_commit=False)
        self.shown = shown or str(engine.url)

    def __exit__(self, exc_type, exc, tb):  # noqa: ANN001
        try:
            if exc_type is None:
                self.commit()
            else:
                self.rollback()
        except SQLAlchemyError as fault:
            self._rollback_quietly()
            if not _is_database_fault(fault):
                raise
            raise ResultsDBError(describe_write_error(fault, self.shown)) from None
        finally:
            self.close()
        if exc is not None and _is_database_fault(exc):
            raise ResultsDBError(describe_write_error(exc, self.shown)) from None
        return False

    def _rollback_quietly(self) -> None:
        try:
            self.rollback()
        except SQLAlchemyError:
            pass


def _row_dict(obj: Base) -> dict[str, Any]:
    return {c.key: getattr(obj, c.key) for c in obj.__table__.columns}
