"""Read-only access to the results database for the leaderboard.

Every query here is a SELECT built with SQLAlchemy expressions; user choices (suite, metric, run ids) reach the
database only as bound parameters, never spliced into SQL text. The database is opened read-only
(`ResultsDB(..., read_only=True)`: SQLite's mode=ro, plus `PRAGMA query_only` on every connection; other
databases get read-only transactions), so nothing the app runs can write to it.

Nothing in this module imports streamlit: the app caches these functions (see `leaderboard.cache`), the
benchmark and the tests call them directly.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from sqlalchemy import func, inspect, literal_column, select
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from results_db.migrations import REDACTED_COLUMNS, read_version
from results_db.redact import redact

from results_db import ResultsDB, default_db_url
from results_db.models import SCHEMA_VERSION, Run, Score, ScoreItems, TrainLog
from results_db.records import json_column

from bench.report.pooling import row_settings

# What the main view needs of a run; the JSON columns (package versions...) are read per run only, but for the
# config, whose settings say which runs are seeds of one row (`run_list`).
# (No timestamps: parsing 10,000 of them costs more than the rest of the list; the Run view reads them per run.)
RUN_LIST_COLUMNS = (
    "id", "kind", "model", "method", "backbone", "suite", "train_corpus", "budget_label", "seed", "status",
)  # fmt: skip


# Schema-2 columns read when the database has them.
RUN_EXTRA_COLUMNS = ("sweep", "sweep_point", "model_info")

SERVER_REFRESH_S = 60


@dataclass(frozen=True)
class DBState:
    """Where the database is and a version stamp that changes whenever it is written (the cache key)."""

    location: str  # a file path or an SQLAlchemy URL, as given
    is_file: bool
    exists: bool
    version: tuple[int, ...]  # (mtime_ns, size) of the file and its -wal / -journal companions, then its inode

    @property
    def shown(self) -> str:
        """The location as the page may show it: a URL's password hidden."""
        return redact(self.location)


def resolve_location(db: str | os.PathLike[str] | None = None) -> str:
    """The database to show: the argument, else $LENBENCH_DB, else the default file (as `bench` resolves it)."""
    return str(db) if db not in (None, "") else default_db_url()


def sqlite_file(location: str) -> str | None:
    """The file behind an SQLite location: a plain path, or an SQLAlchemy URL `sqlite:///rel` / `sqlite:////abs`
    (None for a server URL, an in-memory database or SQLite's own `file:` URI form).

    The app opens such a URL as the file itself, so it gets the file's change marker and SQLite's read-only mode.
    """
    if "://" not in location:
        return location
    try:
        url = make_url(location)
    except ArgumentError:
        return None
    database = url.database or ""
    if url.get_backend_name() != "sqlite" or database in ("", ":memory:") or database.startswith("file:") or url.query:
        return None
    return database


def db_state(db: str | os.PathLike[str] | None = None) -> DBState:
    location = resolve_location(db)
    location = sqlite_file(location) or location
    if "://" in location:
        # A server database: no file to stat, so the stamp is the current time slot; cached reads refresh each slot.
        return DBState(location, is_file=False, exists=True, version=(int(time.time() // SERVER_REFRESH_S), 0))
    path = Path(location).expanduser().resolve()
    stamp: list[int] = []
    for p in (path, Path(f"{path}-wal"), Path(f"{path}-journal")):
        try:
            st = p.stat()
        except OSError:
            stamp += [0, 0]
        else:
            stamp += [st.st_mtime_ns, st.st_size]
    try:
        identity = path.stat().st_ino
    except OSError:
        identity = 0
    return DBState(str(path), is_file=True, exists=path.exists(), version=(*stamp, identity))


def open_readonly(location: str) -> ResultsDB:
    """A ResultsDB whose engine cannot write (raises FileNotFoundError for a missing SQLite file)."""
    return ResultsDB(location, read_only=True, refuse_unreadable=False)  # the page words each refusal itself


def schema_refusal(db: ResultsDB, shown: str) -> str:
    """The one line the CLI refuses this database with when its schema is newer than this lenbench knows (the
    page refuses it too: it could misread columns it does not know); "" otherwise."""
    with db.engine.connect() as conn:
        version = read_version(conn)
    if version is not None and version > SCHEMA_VERSION:
        return (f"results database {shown} has schema version {version}, newer than this lenbench knows "
                f"({SCHEMA_VERSION}); upgrade lenbench to show it (nothing was read)")  # fmt: skip
    return ""


def foreign_tables(db: ResultsDB) -> list[str]:
    """The tables of another application in a database without lenbench's runs and scores ([]: none)."""
    names = [t for t in inspect(db.engine).get_table_names() if not t.startswith("sqlite_")]
    return [] if {"runs", "scores"} <= set(names) else sorted(names)


def has_results_tables(db: ResultsDB) -> bool:
    """False for an empty file or a database that is not a lenbench results database."""
    names = set(inspect(db.engine).get_table_names())
    return {"runs", "scores"} <= names


def _frame(conn, stmt) -> pd.DataFrame:  # noqa: ANN001
    """Run a SELECT (bound parameters) and build a DataFrame straight from the DBAPI rows.

    Only for columns SQLAlchemy does not convert on the way out (integers, floats, text): the rows skip the
    per-row Result machinery, which on 70,000 scores costs as much as SQLite's scan itself.
    """
    result = conn.execute(stmt)
    columns = list(result.keys())
    rows = result.cursor.fetchall() if result.cursor is not None else []
    result.close()
    if not rows:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in columns})
    return pd.DataFrame.from_records(rows, columns=columns)


def _columns(db: ResultsDB, table: str) -> set[str]:
    """Columns the database's table has (a database from an older lenbench lacks the schema-2 ones; the app opens
    it read-only, so nothing adds them)."""
    return {c["name"] for c in inspect(db.engine).get_columns(table)}


def _in_domain(value: Any) -> str:
    """Config's in_domain list (JSON text on SQLite, a list on PostgreSQL) as "scifact, nfcorpus"; "" when absent."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return ""
    return ", ".join(str(v) for v in value) if isinstance(value, list) else ""


def _subset_limit(config: dict) -> Any:
    """The `--limit` a run's config asked for: a `bench run` row's eval.limit, else a `bench eval` row's limit."""
    evaluation = config.get("eval")
    limit = evaluation.get("limit") if isinstance(evaluation, dict) else None
    return config.get("limit") if limit is None else limit


def run_list(db: ResultsDB) -> pd.DataFrame:
    """One row per run: RUN_LIST_COLUMNS, sweep, model_info (a dict) and the subset limit its config asked for."""
    table = Run.__table__
    present = _columns(db, "runs")
    wanted = [*RUN_LIST_COLUMNS, *(c for c in RUN_EXTRA_COLUMNS if c in present)]
    config = table.c.config.label("run_config")  # whole: its settings say which runs are seeds of one row
    stmt = select(*[table.c[name] for name in wanted], config).order_by(table.c.id)
    with db.engine.connect() as conn:
        frame = _frame(conn, stmt)
    configs = [json_column(c) for c in frame.get("run_config", [None] * len(frame))]
    frame = frame.drop(columns=[c for c in ("run_config",) if c in frame])
    frame["config_limit"] = [_subset_limit(c) for c in configs]  # the subset the config asked for (--limit)
    frame["method_config"] = [json_column(c.get("method_config")) for c in configs]  # tells --hp variants apart
    frame["in_domain"] = [_in_domain(c.get("in_domain")) for c in configs]  # evaluated datasets the corpus is
    frame["model_fingerprint"] = [c.get("model_fingerprint") for c in configs]  # an evaluated model's weights
    frame["comparison"] = [c.get("comparison") for c in configs]  # a `bench run` row's comparison
    frame["model_identity"] = [c.get("identity") or "" for c in configs]  # "declared, not derived": a caller's name
    for col in ("method", "backbone", "suite", "train_corpus", "budget_label", "model", "status", "kind", "sweep", "sweep_point",
                "model_fingerprint", "comparison"):  # fmt: skip
        frame[col] = frame[col].fillna("").astype(str) if col in frame else ""
    frame["model_info"] = [json_column(v) for v in frame["model_info"]] if "model_info" in frame else [{} for _ in range(len(frame))]
    # what a run shares with the other seeds of its row, as bench results reads it (bench.report.pooling)
    frame["row_settings"] = [row_settings(c) for c in configs]
    frame["id"] = frame["id"].astype(int)
    frame["seed"] = pd.to_numeric(frame["seed"]).fillna(0).astype(int)
    frame["config_limit"] = pd.to_numeric(frame["config_limit"], errors="coerce")
    return frame


def score_limits(db: ResultsDB, suite: str) -> pd.DataFrame:
    """(run_id, dataset, limit) of the clean scores of a suite that were computed on a subset (`--limit`)."""
    if "info" not in _columns(db, "scores"):
        return pd.DataFrame({"run_id": pd.Series(dtype=int), "dataset": pd.Series(dtype=object), "limit": pd.Series(dtype=float)})
    s = Score.__table__
    limit = s.c.info["limit"].as_integer()
    stmt = (
        select(s.c.run_id, s.c.dataset, limit.label("limit"))
        # A run's subset is the same in every variant: the clean rows say it.
        .where(s.c.suite == suite, s.c.variant == "clean", s.c.info.isnot(None), limit.isnot(None))
        .group_by(s.c.run_id, s.c.dataset)
    )
    with db.engine.connect() as conn:
        frame = _frame(conn, stmt)
    frame["limit"] = pd.to_numeric(frame["limit"], errors="coerce")
    return frame[frame["limit"] > 0].reset_index(drop=True)


def suite_versions(db: ResultsDB, suite: str) -> pd.DataFrame:
    """(run_id, suite_version) of the runs with scores of a suite (Score.info suite_version; scores written before
    it was recorded are version 1)."""
    empty = pd.DataFrame({"run_id": pd.Series(dtype=int), "suite_version": pd.Series(dtype=int)})
    if "info" not in _columns(db, "scores"):
        return empty
    s = Score.__table__
    version = func.coalesce(s.c.info["suite_version"].as_integer(), 1)
    stmt = select(s.c.run_id, func.max(version).label("suite_version")).where(s.c.suite == suite).group_by(s.c.run_id)
    with db.engine.connect() as conn:
        frame = _frame(conn, stmt)
    if frame.empty:
        return empty
    frame["suite_version"] = pd.to_numeric(frame["suite_version"], errors="coerce").fillna(1).astype(int)
    return frame


def attack_rates(db: ResultsDB, suite: str) -> pd.DataFrame:
    """(run_id, dataset, variant, changed_frac): the fraction of texts each attack changed (Score.info)."""
    empty = pd.DataFrame({"run_id": pd.Series(dtype=int), "dataset": pd.Series(dtype=object),
                          "variant": pd.Series(dtype=object), "changed_frac": pd.Series(dtype=float)})  # fmt: skip
    if "info" not in _columns(db, "scores"):
        return empty
    s = Score.__table__
    changed = s.c.info["changed_frac"].as_float()
    stmt = (
        select(s.c.run_id, s.c.dataset, s.c.variant, func.max(changed).label("changed_frac"))
        .where(s.c.suite == suite, s.c.variant != "clean", s.c.info.isnot(None), changed.isnot(None))
        .group_by(s.c.run_id, s.c.dataset, s.c.variant)
    )
    with db.engine.connect() as conn:
        frame = _frame(conn, stmt)
    if frame.empty:
        return empty
    frame["changed_frac"] = frame["changed_frac"].astype(float)
    return frame


def score_n(db: ResultsDB, suite: str, metric: str, variant: str, run_ids: list[int]) -> pd.DataFrame:
    """(run_id, dataset, n) of one suite, metric and variant for some runs: how many items each score averages."""
    s = Score.__table__
    stmt = select(s.c.run_id, s.c.dataset, s.c.n).where(
        s.c.run_id.in_([int(i) for i in run_ids]), s.c.suite == suite, s.c.metric == metric, s.c.variant == variant
    )
    with db.engine.connect() as conn:
        return _frame(conn, stmt)


def score_catalog(db: ResultsDB) -> pd.DataFrame:
    """One row per (suite, metric, variant) present: the filters' choices.

    A plain DISTINCT (no per-row counting): SQLite answers it from the covering unique index of `scores`.
    """
    s = Score.__table__
    stmt = select(s.c.suite, s.c.metric, s.c.variant).distinct()
    with db.engine.connect() as conn:
        frame = pd.read_sql(stmt, conn)
    return frame.sort_values(["suite", "metric", "variant"], ignore_index=True)


def suite_scores(db: ResultsDB, suite: str, metrics: list[str], variants: list[str]) -> pd.DataFrame:
    """Long scores (run_id, dataset, variant, metric, value, n) of one suite, for some metrics and variants
    (an empty list: all of them)."""
    s = Score.__table__
    columns = {"run_id": s.c.run_id, "dataset": s.c.dataset, "variant": s.c.variant, "metric": s.c.metric, "value": s.c.value,
               "n": s.c.n}  # fmt: skip
    constant = {}
    stmt_where = [s.c.suite == suite]
    for name, chosen in (("metric", metrics), ("variant", variants)):
        if chosen:
            stmt_where.append(columns[name].in_(list(chosen)))
            if len(chosen) == 1:
                constant[name] = chosen[0]  # known: not read back 100,000 times
    stmt = select(*[c for name, c in columns.items() if name not in constant]).where(*stmt_where)
    with db.engine.connect() as conn:
        frame = _frame(conn, stmt)
    for name, value in constant.items():
        frame[name] = value
    frame["run_id"] = frame["run_id"].astype(int)
    frame["value"] = frame["value"].astype(float)
    frame["n"] = pd.to_numeric(frame["n"], errors="coerce")
    return frame[list(columns)]


def item_scores(db: ResultsDB, suite: str, metric: str, variant: str) -> pd.DataFrame:
    """(score_id, run_id, dataset) of the scores of one suite, metric and variant that stored per-item values."""
    s, items = Score.__table__, ScoreItems.__table__
    stmt = (
        select(s.c.id.label("score_id"), s.c.run_id, s.c.dataset)
        .select_from(s.join(items, items.c.score_id == s.c.id))
        .where(s.c.suite == suite, s.c.metric == metric, s.c.variant == variant)
    )
    with db.engine.connect() as conn:
        return _frame(conn, stmt)


def run_detail(db: ResultsDB, run_id: int) -> dict[str, Any] | None:
    try:
        run = db.get_run(int(run_id))
    except KeyError:
        return None
    # A database not yet migrated (the page opens it read-only) may still hold a password in these.
    return {k: redact(v) if k in REDACTED_COLUMNS and isinstance(v, str) else v for k, v in run.items()}


def run_scores(db: ResultsDB, run_id: int) -> pd.DataFrame:
    """Every score of one run, with whether per-item values (for the bootstrap) are stored, its subset limit and its
    suite's scoring version (Score.info suite_version; 1 before it was recorded)."""
    s, items = Score.__table__, ScoreItems.__table__
    has_info = "info" in _columns(db, "scores")
    limit = s.c.info["limit"].as_integer() if has_info else literal_column("NULL")
    scoring = func.coalesce(s.c.info["suite_version"].as_integer(), 1) if has_info else literal_column("1")
    stmt = (
        select(
            s.c.id.label("score_id"), s.c.suite, s.c.dataset, s.c.variant, s.c.metric, s.c.value, s.c.n,
            (items.c.score_id.isnot(None)).label("has_items"), limit.label("limit"), scoring.label("suite_version"),
        )  # fmt: skip
        .select_from(s.outerjoin(items, items.c.score_id == s.c.id))
        .where(s.c.run_id == int(run_id))
        .order_by(s.c.suite, s.c.dataset, s.c.metric, s.c.variant)
    )
    with db.engine.connect() as conn:
        frame = pd.read_sql(stmt, conn)
    frame["has_items"] = frame["has_items"].astype(bool)
    return frame


def train_log(db: ResultsDB, run_id: int) -> pd.DataFrame:
    t = TrainLog.__table__
    stmt = select(t.c.step, t.c.loss, t.c.lr, t.c.examples_per_s).where(t.c.run_id == int(run_id)).order_by(t.c.step)
    with db.engine.connect() as conn:
        return pd.read_sql(stmt, conn)


def score_items(db: ResultsDB, score_id: int) -> dict[str, Any] | None:
    items = db.score_items(int(score_id))
    if items is None:
        return None
    return {"aggregate": items.aggregate, "item_ids": items.item_ids, "values": items.values, "gold": items.gold}


def items_for_scores(db: ResultsDB, score_ids: list[int]) -> dict[int, dict[str, Any]]:
    """Per-item values of several scores in one query (the Compare view and the diag distribution plot)."""
    if not score_ids:
        return {}
    t = ScoreItems.__table__
    stmt = select(t).where(t.c.score_id.in_([int(i) for i in score_ids]))
    with db.engine.connect() as conn:
        rows = conn.execute(stmt).mappings().all()
    return {
        int(r["score_id"]): {"aggregate": r["aggregate"], "item_ids": r["item_ids"], "values": r["values"], "gold": r["gold"]}
        for r in rows
    }
