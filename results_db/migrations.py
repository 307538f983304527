"""Versioned schema migrations of the results database (Alembic-style, without Alembic's machinery).

The `meta` table records `schema_version` (and `application` = "lenbench"). A new database gets every table of
`results_db.models` at once and is stamped with `SCHEMA_VERSION`. An older database is upgraded by running, in
order, each step of `MIGRATIONS` whose version is above its own; each step runs in the caller's transaction and
stamps its version, so a database is always at exactly one numbered version. A database stamped with a version
newer than this code knows is refused (by the store), never "downgraded" or written.

Adding a schema change: add the columns to `models.py` (nullable or with a default), bump `SCHEMA_VERSION` there,
and append a `Migration` here whose `apply` brings version N-1 to N with dialect-neutral DDL.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import inspect, or_, select
from sqlalchemy.engine import Connection

from results_db.errors import ResultsDBError
from results_db.models import SCHEMA_VERSION, Base, Meta, Run, utcnow
from results_db.redact import redact

APPLICATION = "lenbench"
VERSION_KEY = "schema_version"
APPLICATION_KEY = "application"


@dataclass(frozen=True)
class Migration:
    version: int  # the schema version this step produces (from version - 1)
    summary: str
    apply: Callable[[Connection], None]


def add_columns(conn: Connection, columns: dict[str, tuple[str, ...]]) -> None:
    """ALTER TABLE ... ADD COLUMN for each named model column a table lacks (type compiled for the dialect)."""
    inspector = inspect(conn)
    for table_name, names in columns.items():
        table = Base.metadata.tables[table_name]
        present = {c["name"] for c in inspector.get_columns(table_name)}
        for name in names:
            if name in present:
                continue
            kind = table.c[name].type.compile(conn.dialect)
            conn.exec_driver_sql(f'ALTER TABLE {table_name} ADD COLUMN "{name}" {kind}')


def create_missing_indexes(conn: Connection) -> None:
    present = set(inspect(conn).get_table_names())
    for table in Base.metadata.sorted_tables:
        if table.name not in present:  # a table a later step creates (with its indexes)
            continue
        for index in table.indexes:
            index.create(conn, checkfirst=True)


def _to_2(conn: Connection) -> None:
    add_columns(
        conn,
        {
            "runs": ("host", "pid", "heartbeat_at", "runtime", "model_info", "sweep", "sweep_point"),
            "scores": ("info",),
        },
    )
    # ix_scores_board (the leaderboard's covering index) came with schema 1's last releases; older files lack it.
    create_missing_indexes(conn)


def _to_3(conn: Connection) -> None:
    Base.metadata.tables["curve_points"].create(conn, checkfirst=True)  # its indexes come with it


REDACTED_COLUMNS = ("command", "error", "model", "output_dir")


def _to_4(conn: Connection) -> None:
    """Rows written before passwords were redacted: every database URL in them loses its password."""
    runs = Run.__table__
    columns = [runs.c[name] for name in REDACTED_COLUMNS]
    rows = conn.execute(select(runs.c.id, *columns).where(or_(*(c.contains("://") for c in columns)))).all()
    for run_id, *values in rows:
        changed = {name: redact(v) for name, v in zip(REDACTED_COLUMNS, values) if v and redact(v) != v}
        if changed:
            conn.execute(runs.update().where(runs.c.id == run_id).values(**changed))
# Schema 5: a comparison is keyed by its shared settings alone (bench.experiment.run_spec.comparison_key). Frozen
# here: a migration is the formula of its day, not whatever later code computes.
SHARED_KEYS = ("backbone", "train", "budget", "corpus", "corpus_limit", "corpus_texts", "suite", "eval", "emb_dtype")
OUTSIDE_HASH = ("curves", "in_domain")  # recorded in a row's config after its hash was taken


def _hash(obj: object) -> str:
    import hashlib
    import json

    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()[:16]


def _command_seed(command: str | None) -> int | None:
    """--seed N of a `bench run` row's reproduce command (the evaluation seed, a shared setting)."""
    import re

    match = re.search(r"(?:^|\s)--seed (\d+)(?:\s|$)", (command or "").split("   # from: ")[0])
    return int(match.group(1)) if match else None


def _to_5(conn: Connection) -> None:
    """Rows of one `bench run` comparison (config["comparison"], which hashed the methods and seeds the command
    asked for) get the key of their shared settings, so the comparisons of several commands with the same settings
    become one. A comparison with no trained row (its shared settings are not all in any row) keeps its key. A
    row whose config hash was the hash of its config gets the hash of its re-keyed config (the hash today's
    `bench run` computes for it, so it is found and reused); any other keeps its hash. No row or score is removed."""

    runs = Base.metadata.tables["runs"]
    rows = conn.execute(select(Run.id, Run.config, Run.config_hash, Run.command)).all()
    groups: dict[str, list] = {}
    for row in rows:
        if isinstance(row.config, dict) and isinstance(row.config.get("comparison"), str):
            groups.setdefault(row.config["comparison"], []).append(row)
    for members in groups.values():
        trained = [r for r in members if isinstance(r.config.get("train"), dict)]
        if not trained:
            continue
        config = trained[0].config
        shared = {k: config[k] for k in SHARED_KEYS if k in config}
        seed = _command_seed(trained[0].command)
        shared["train"] = {**config["train"], "seed": config["train"].get("seed") if seed is None else seed}
        key = _hash({"shared": shared})
        for row in members:
            new_config = {**row.config, "comparison": key}
            hashed = {k: v for k, v in row.config.items() if k not in OUTSIDE_HASH}
            new_hash = row.config_hash
            if row.config_hash == _hash(hashed):
                new_hash = _hash({**hashed, "comparison": key})
            conn.execute(runs.update().where(runs.c.id == row.id).values(config=new_config, config_hash=new_hash))


def _to_6(conn: Connection) -> None:
    Base.metadata.tables["claim_verdicts"].create(conn, checkfirst=True)  # its index comes with it


# Schema 7: a config hash is taken over resolved settings (bench.experiment.identity): the training's precision as
# it ran (was "auto"), the evaluation's when it is not fp32 (was left out for "auto", kept for an asked "fp32"). The
# shared settings of a comparison, frozen as of this step.
SHARED_KEYS_7 = (*SHARED_KEYS, "corpus_sha256", "train_recipe")


def _ran_at(runtime: object) -> tuple[str, str]:
    """(evaluation precision, training precision) a row's runtime recorded; fp32 for a row that recorded none
    (before lenbench had reduced precisions)."""
    runtime = runtime if isinstance(runtime, dict) else {}
    scoring = runtime.get("precision") or "fp32"
    return scoring, runtime.get("train_precision") or scoring


def _resolved(config: dict, runtime: object) -> dict:
    """A row's config with its precisions as they ran (see SHARED_KEYS_7)."""
    scoring, training = _ran_at(runtime)
    config = dict(config)
    if isinstance(config.get("train"), dict) and config["train"].get("precision") == "auto":
        config["train"] = {**config["train"], "precision": training}
    if isinstance(config.get("eval"), dict):  # a `bench run` row
        evaluation = dict(config["eval"])
        if "precision" not in evaluation and scoring != "fp32":
            evaluation["precision"] = scoring
        if evaluation.get("precision") == "fp32":
            evaluation.pop("precision")
        config["eval"] = evaluation
    elif "model_fingerprint" in config and "precision" not in config and scoring != "fp32":  # a `bench eval` row
        config["precision"] = scoring
    return config


def _comparison_7(config: dict, seed: int | None) -> str:
    """The comparison key of a trained row's config (bench.experiment.run_spec.comparison_key, as of schema 7): its
    shared settings, with the command's --seed as the training seed."""
    shared = {k: config[k] for k in SHARED_KEYS_7 if k in config}
    shared["train"] = {**config["train"], "seed": config["train"].get("seed") if seed is None else seed}
    return _hash({"shared": shared})


def _to_7(conn: Connection) -> None:
    """Every row's config gets the precisions it ran at (its runtime says them), its comparison the key of the
    re-keyed shared settings, and a row whose config hash was the hash of its config the hash of the new one, the
    hash today's `bench run` and `bench eval` compute for the same command on the same kind of device: rows written
    before are found and reused. A comparison with no trained row keeps its key. No row or score is removed."""
    runs = Base.metadata.tables["runs"]
    rows = conn.execute(select(Run.id, Run.config, Run.config_hash, Run.command, Run.runtime)).all()
    new_configs = {row.id: _resolved(row.config, row.runtime) for row in rows if isinstance(row.config, dict)}
    keys: dict[str, str] = {}  # old comparison -> new
    for row in rows:
        config = new_configs.get(row.id)
        old = config.get("comparison") if config else None
        if not isinstance(old, str) or old in keys or not isinstance(config.get("train"), dict):
            continue
        seed = _command_seed(row.command)
        if _comparison_7(row.config, seed) == old:  # a key of this formula (any other stays as it is)
            keys[old] = _comparison_7(config, seed)
    for row in rows:
        if row.id not in new_configs:
            continue
        config = new_configs[row.id]
        if isinstance(config.get("comparison"), str):
            config["comparison"] = keys.get(config["comparison"], config["comparison"])
        if config == row.config:
            continue
        hashed = {k: v for k, v in row.config.items() if k not in OUTSIDE_HASH}
        new_hash = row.config_hash
        if row.config_hash == _hash(hashed):
            new_hash = _hash({k: v for k, v in config.items() if k not in OUTSIDE_HASH})
        conn.execute(runs.update().where(runs.c.id == row.id).values(config=config, config_hash=new_hash))


# Schema 8: an untrained row that ran as a command of its own (a claim's or a sweep's `bench run --method vanilla
# --seed N` point) names the comparison of its shared settings with no training corpus counted (corpus_texts 0, no
# digest: bench.sweep.points), so no trained row shares its key and schema 7 left it under its `auto` key.
def _untrained_key(config: dict) -> str:
    """The comparison an untrained point of a trained row's shared settings (and training seed) names."""
    shared = {k: config[k] for k in SHARED_KEYS_7 if k in config and k != "corpus_sha256"}
    return _hash({"shared": {**shared, "corpus_texts": 0}})


def _as_before_7(config: dict) -> list[dict]:
    """A resolved trained config as schema 6 may have hashed it: the training precision asked ("auto" or as it ran)
    and the evaluation's precision left out (auto) or kept (asked)."""
    out = []
    evaluation = config.get("eval") if isinstance(config.get("eval"), dict) else None
    for precision in ("auto", config["train"].get("precision")):
        train = {**config["train"], "precision": precision}
        out.append({**config, "train": train})
        if evaluation is not None and "precision" in evaluation:
            out.append({**config, "train": train, "eval": {k: v for k, v in evaluation.items() if k != "precision"}})
    return out


def _to_8(conn: Connection) -> None:
    """An untrained row whose comparison is a trained row's shared settings as schema 6 hashed them (with no corpus
    counted) gets the key of those settings as resolved (what today's point computes), and the hash of its re-keyed
    config where its hash was the hash of its config: a claim's untrained reference is found again, as its trained
    runs were by schema 7. Any other row keeps its key. No row or score is removed."""
    runs = Base.metadata.tables["runs"]
    rows = conn.execute(select(Run.id, Run.config, Run.config_hash)).all()
    configs = {row.id: row.config for row in rows if isinstance(row.config, dict)}
    untrained = {r.id: r for r in rows if r.id in configs and not isinstance(configs[r.id].get("train"), dict)
                 and isinstance(configs[r.id].get("comparison"), str)}  # fmt: skip
    wanted = {r.config["comparison"] for r in untrained.values()}
    keys: dict[str, str] = {}  # old comparison -> new
    for config in configs.values():
        if not isinstance(config.get("train"), dict) or not wanted - set(keys):
            continue
        new = _untrained_key(config)
        for before in _as_before_7(config):
            old = _untrained_key(before)
            if old in wanted and old != new:
                keys.setdefault(old, new)
    for row in untrained.values():
        if row.config["comparison"] not in keys:
            continue
        config = {**row.config, "comparison": keys[row.config["comparison"]]}
        hashed = {k: v for k, v in row.config.items() if k not in OUTSIDE_HASH}
        new_hash = row.config_hash
        if row.config_hash == _hash(hashed):
            new_hash = _hash({k: v for k, v in config.items() if k not in OUTSIDE_HASH})
        conn.execute(runs.update().where(runs.c.id == row.id).values(config=config, config_hash=new_hash))


MIGRATIONS: tuple[Migration, ...] = (
    Migration(2, "runs: host, pid, heartbeat_at, runtime, model_info, sweep, sweep_point; scores: info", _to_2),
    Migration(3, "curve_points: scores of encoders evaluated during training (bench run --eval-every)", _to_3),
    Migration(4, "runs: database passwords removed from stored commands and errors", _to_4),
    Migration(5, "comparisons keyed by their shared settings: runs of several commands pool into one", _to_5),
    Migration(6, "claim_verdicts: the verdicts of `bench claim` (a claim file's comparisons at one scale)", _to_6),
    Migration(7, "config hashes over resolved settings: each row's precisions as its runtime recorded them", _to_7),
    Migration(8, "untrained points (a claim's reference) keyed by their trained rows' resolved settings", _to_8),
)
assert MIGRATIONS[-1].version == SCHEMA_VERSION, "a schema version without its migration step"


def read_version(conn: Connection, shown: str = "the results database") -> int | None:
    """The stamped schema version, or None when the database has no lenbench `meta` stamp. A stamp that is no
    version (not a whole number from 1) is a ResultsDBError: the database is lenbench's, its stamp is damaged."""
    if "meta" not in inspect(conn).get_table_names():
        return None
    value = conn.execute(select(Meta.value).where(Meta.key == VERSION_KEY)).scalar()
    if value is None:
        return None
    try:
        version = int(value)
    except (TypeError, ValueError):
        version = 0
    if version < 1:
        shown_value = str(value) if len(str(value)) <= 40 else str(value)[:37] + "..."
        raise ResultsDBError(
            f"results database {shown} has a corrupt schema version ({shown_value!r} in its meta table, where "
            f"lenbench stamps a whole number, {SCHEMA_VERSION} today); restore the file from a copy, or, if you know "
            "which lenbench wrote it, set meta.schema_version to that version"
        )
    return version


def stamp(conn: Connection, version: int) -> None:
    """Record `version` (and which application owns the database) in `meta`, inside the caller's transaction."""
    values = {VERSION_KEY: str(version), APPLICATION_KEY: APPLICATION, f"migrated_to_{version}": utcnow().isoformat()}
    existing = set(conn.execute(select(Meta.key).where(Meta.key.in_(list(values)))).scalars())
    for key, value in values.items():
        if key in existing:
            conn.execute(Meta.__table__.update().where(Meta.key == key).values(value=value))
        else:
            conn.execute(Meta.__table__.insert().values(key=key, value=value))


def create_schema(conn: Connection) -> None:
    """A new database: every table at the current version, and its own id (results_db.database_id)."""
    from results_db.database_id import stamp_database_id

    Base.metadata.create_all(conn)
    stamp(conn, SCHEMA_VERSION)
    stamp_database_id(conn)


def upgrade(conn: Connection, current: int) -> list[Migration]:
    """Apply every step above `current`; returns the steps applied."""
    applied = []
    for step in MIGRATIONS:
        if step.version > current:
            step.apply(conn)
            stamp(conn, step.version)
            applied.append(step)
    return applied
