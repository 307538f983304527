"""The results database API (`ResultsDB`): open it safely, write runs and scores transactionally, read them back as
DataFrames. Where it is and how it is opened: `results_db.location`; its schema and the wording of faults:
`results_db.schema`.

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
from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd
from sqlalchemy import delete, inspect, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

from results_db.errors import ResultsDBError, UndefinedMetricError
from results_db.location import (
    check_sqlite_file,
    connection_settings,
    default_db_url,
    is_in_memory_text,
    locate,
    open_engine,
)
from results_db.migrations import Migration
from results_db.models import SCHEMA_VERSION, Base, ClaimVerdict, CurvePoint, Run, Score, ScoreItems, TrainLog, utcnow
from results_db.records import ItemValues, ScoreRecord
from results_db.schema import check_readable, describe_write_error, is_database_fault, prepare_schema
from results_db.snapshot import OlderSchema, older_version, read_older


class ResultsDB:
    """The results database. `create=False` (--resume) never creates one, but upgrades an older schema in place;
    `read_only=True` (every command that only reads) never migrates or writes (SQLite mode=ro + query_only): an
    older schema is read through an upgraded in-memory copy (`results_db.snapshot`); `init_foreign=True` adds
    lenbench's tables to a database that holds another application's tables (refused otherwise)."""

    def __init__(
        self,
        db: str | os.PathLike[str] | None = None,
        read_only: bool = False,
        *,
        create: bool = True,
        init_foreign: bool = False,
        allow_in_memory: bool = False,
        refuse_unreadable: bool = True,
    ):
        self.location = locate(db if db is not None else default_db_url(), read_only=read_only)
        if not allow_in_memory and self.location.path is None and is_in_memory_text(self.location.url):
            raise ResultsDBError(
                f"--db {self.location.shown!r} is an in-memory database: nothing recorded there is kept after the "
                "command ends (and there is nothing to read); give a file path such as results.sqlite"
            )
        self.url = self.location.url
        self.read_only = read_only
        if self.location.path is not None:
            # A read-only open refuses what a write refuses (corrupt, foreign, newer), in the same words, before
            # reading; the leaderboard (refuse_unreadable=False) shows those faults on its page from its own reads.
            check_sqlite_file(
                self.location.path, must_exist=read_only or not create, writable=not read_only and create,
                content=refuse_unreadable,
            )
        self.engine = open_engine(self.location)
        connection_settings(self.engine, read_only)
        self.migrated: list[Migration] = []
        self.older: OlderSchema | None = None  # read_only on an older schema: read through an upgraded copy
        if read_only:
            if refuse_unreadable:  # the version is read once, by the check
                stamped = check_readable(self.engine, self.location.shown)
                version = stamped if stamped is not None and stamped < SCHEMA_VERSION else None
            else:
                version = older_version(self.engine, self.location.shown)
            self.engine, self.older = read_older(self.engine, self.location, version)
        else:
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

    def merge_runtime(self, run_id: int, fields: dict[str, Any], *, section: str | None = None) -> None:
        """Run.runtime (how the run executes; outside the config hash) updated with `fields`, its other keys kept;
        with `section`, `fields` merge into the dict runtime[section] instead (runtime["evaluation_seconds"] gains
        one dataset at a time). Every edit of an existing row's runtime goes through here; a missing row is left
        alone (the run's record is best effort, never the reason a run fails)."""
        with self.session() as s:
            run = s.get(Run, run_id)
            if run is None:
                return
            runtime = dict(run.runtime or {})
            if section is None:
                runtime.update(fields)
            else:
                runtime[section] = {**(runtime.get(section) or {}), **fields}
            run.runtime = runtime  # a new dict: the JSON column is saved only when reassigned

    def heartbeat(self, run_id: int) -> None:
        """The running process of `run_id` is alive now (a row whose heartbeat stops is shown as stale)."""
        with self.session() as s:
            s.execute(Run.__table__.update().where(Run.id == run_id).values(heartbeat_at=utcnow()))

    def finish_run(self, run_id: int, status: str = "finished", error: str = "", at: Any = None, **fields: Any) -> None:
        """The run's final status, at `at` (default now; a run whose files name the time is finished at that time)."""
        self.update_run(run_id, status=status, error=error, finished_at=at or utcnow(), **fields)

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

    def add_claim_verdict(self, **fields: Any) -> int:
        """Store one `bench claim` verdict (ClaimVerdict's columns); returns its id."""
        with self.session() as s:
            row = ClaimVerdict(**fields)
            s.add(row)
            s.flush()
            return int(row.id)

    def database_id(self) -> str:
        """This database's own id (results_db.database_id), stamped now in a database made before ids were; a
        read-only open of such a database has none to give (a ResultsDBError)."""
        from results_db.database_id import read_database_id, stamp_database_id

        with self.engine.connect() as conn:
            found = read_database_id(conn)
        if found:
            return found
        if self.read_only:
            raise ResultsDBError(f"results database {self.location.shown} has no database id yet (a command that "
                                 "writes stamps one)")  # fmt: skip
        with self.session() as s:
            return stamp_database_id(s.connection())

    # ------------------------------------------------------------------ reads
    def claim_verdicts(self, latest: bool = True) -> list[dict[str, Any]]:
        """Stored claim verdicts, newest first; `latest`: only the newest per (claim, scale). A database from before
        schema 6 has none (and a read-only reader cannot add the table)."""
        with self.engine.connect() as conn:
            if "claim_verdicts" not in inspect(conn).get_table_names():
                return []
            table = ClaimVerdict.__table__
            rows = [dict(r._mapping) for r in conn.execute(select(table).order_by(table.c.id.desc()))]
        if not latest:
            return rows
        seen: set[tuple[str, str]] = set()
        out = []
        for row in rows:
            if (row["claim"], row["scale"]) not in seen:
                seen.add((row["claim"], row["scale"]))
                out.append(row)
        return out

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


def liveness_fields() -> dict[str, Any]:
    """Which process holds a running row, stamped now (see results_db.liveness)."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "heartbeat_at": utcnow()}


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
            if not is_database_fault(fault):
                raise
            raise ResultsDBError(describe_write_error(fault, self.shown)) from None
        finally:
            self.close()
        if exc is not None and is_database_fault(exc):
            raise ResultsDBError(describe_write_error(exc, self.shown)) from None
        return False

    def _rollback_quietly(self) -> None:
        try:
            self.rollback()
        except SQLAlchemyError:
            pass


def _row_dict(obj: Base) -> dict[str, Any]:
    return {c.key: getattr(obj, c.key) for c in obj.__table__.columns}
