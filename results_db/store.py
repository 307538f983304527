"""The results database: open, write runs and scores transactionally, read them back as DataFrames.

Every write is its own transaction, so a process that dies mid-run leaves every dataset it finished scored and
the run's status at "running" (or "failed" when the error could be caught); nothing half-written stays behind.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from sqlalchemy import create_engine, delete, event, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

from results_db.models import SCHEMA_VERSION, Base, Meta, Run, Score, ScoreItems, TrainLog, utcnow

DEFAULT_DB = "lenbench.sqlite"


@dataclass
class ItemValues:
    """Per-item values of one score (see `ScoreItems`)."""

    aggregate: str  # "mean" | "spearman"
    item_ids: list[str]
    values: list[float]
    gold: list[float] | None = None


@dataclass
class ScoreRecord:
    suite: str
    dataset: str
    metric: str
    value: float
    n: int = 0
    variant: str = "clean"
    items: ItemValues | None = field(default=None, repr=False)
    info: dict[str, Any] | None = None  # see Score.info


def default_db_url() -> str:
    return os.environ.get("LENBENCH_DB", DEFAULT_DB)


def to_url(db: str | os.PathLike[str], read_only: bool = False) -> str:
    """A file path becomes an SQLite URL; anything with '://' is taken as an SQLAlchemy URL as it is."""
    text = str(db)
    if "://" in text:
        return text
    path = Path(text).expanduser().resolve()
    if read_only:
        # SQLite's own read-only mode: no statement run through this engine can write.
        return f"sqlite:///file:{path}?mode=ro&uri=true"
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


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
        cur.execute("PRAGMA busy_timeout=30000")
        if read_only:
            # mode=ro already refuses writes to the file; query_only also refuses them on attached/temp schemas.
            cur.execute("PRAGMA query_only=ON")
        cur.close()


class ResultsDB:
    def __init__(self, db: str | os.PathLike[str] | None = None, read_only: bool = False):
        self.url = to_url(db if db is not None else default_db_url(), read_only=read_only)
        self.read_only = read_only
        self.engine = create_engine(self.url, future=True)
        _connection_settings(self.engine, read_only)
        if read_only and self.engine.dialect.name == "sqlite":
            path = self.url.split("file:", 1)[1].split("?", 1)[0]
            if not Path(path).exists():
                raise FileNotFoundError(f"results database {path} does not exist")
        if not read_only:
            Base.metadata.create_all(self.engine)
            # create_all adds no index to a table that already exists: databases made before an index was
            # added get it here.
            for table in Base.metadata.sorted_tables:
                for index in table.indexes:
                    index.create(self.engine, checkfirst=True)
            _add_missing_columns(self.engine)
            with self.session() as s:
                meta = s.get(Meta, "schema_version")
                if meta is None:
                    s.add(Meta(key="schema_version", value=str(SCHEMA_VERSION)))
                else:
                    meta.value = str(SCHEMA_VERSION)
        self._Session = sessionmaker(self.engine, expire_on_commit=False)

    def session(self) -> Session:
        return _TxSession(self.engine)

    # ----------------------------------------------------------------- writes
    def create_run(self, **fields: Any) -> int:
        with self.session() as s:
            run = Run(**fields)
            s.add(run)
            s.flush()
            return run.id

    def update_run(self, run_id: int, **fields: Any) -> None:
        with self.session() as s:
            run = s.get(Run, run_id)
            if run is None:
                raise KeyError(f"no run {run_id} in {self.url}")
            for key, value in fields.items():
                setattr(run, key, value)

    def finish_run(self, run_id: int, status: str = "finished", error: str = "", **fields: Any) -> None:
        self.update_run(run_id, status=status, error=error, finished_at=utcnow(), **fields)

    def add_scores(self, run_id: int, records: Iterable[ScoreRecord]) -> None:
        """Write the scores of one dataset in one transaction; a re-write of the same key replaces it."""
        records = list(records)
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

    # ------------------------------------------------------------------ reads
    def get_run(self, run_id: int) -> dict[str, Any]:
        with self.session() as s:
            run = s.get(Run, run_id)
            if run is None:
                raise KeyError(f"no run {run_id} in {self.url}")
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


def _add_missing_columns(engine: Engine) -> None:
    """Schema 1 -> 2: the columns added since (all nullable or defaulted) are added to an existing table."""
    from sqlalchemy import inspect

    inspector = inspect(engine)
    with engine.begin() as conn:
        for table in Base.metadata.sorted_tables:
            present = {c["name"] for c in inspector.get_columns(table.name)}
            for column in table.columns:
                if column.name not in present:
                    kind = column.type.compile(engine.dialect)
                    conn.exec_driver_sql(f'ALTER TABLE {table.name} ADD COLUMN "{column.name}" {kind}')


class _TxSession(Session):
    """A session that commits on a clean exit and rolls back on an exception."""

    def __init__(self, engine: Engine):
        super().__init__(engine, expire_on_commit=False)

    def __exit__(self, exc_type, exc, tb):  # noqa: ANN001
        try:
            if exc_type is None:
                self.commit()
            else:
                self.rollback()
        finally:
            self.close()
        return False


def _row_dict(obj: Base) -> dict[str, Any]:
    return {c.key: getattr(obj, c.key) for c in obj.__table__.columns}
