"""Reading a database of an older schema without changing it: a read-only open (`bench results`, the leaderboard,
`bench claim --no-run`, the API's `load`) of an SQLite file stamped with an older version reads an in-memory copy
upgraded by the same steps `bench db upgrade` applies to the file (re-keying included), so every reader sees today's
columns and identities while the file stays byte for byte as it was. A server database cannot be copied that way:
its read stops with one line naming the upgrade command.
"""

from __future__ import annotations

import sqlite3
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from results_db.errors import ResultsDBError
from results_db.location import Location, sqlite_file_uri

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

UPGRADE_COMMAND = "bench db upgrade --db {shown}"


def upgrade_hint(shown: str) -> str:
    return UPGRADE_COMMAND.format(shown=shown)


@dataclass(frozen=True)
class OlderSchema:
    """A read-only open found an older schema: the version the file holds and how it is read."""

    version: int
    in_memory: bool


def older_version(engine: Engine, shown: str) -> int | None:
    """The database's stamped version when it is older than this lenbench's, else None (current, newer, empty or
    foreign: each reader handles those as before)."""
    from sqlalchemy.exc import SQLAlchemyError

    from results_db.migrations import read_version
    from results_db.models import SCHEMA_VERSION

    try:
        with engine.connect() as conn:
            version = read_version(conn, shown)
    except SQLAlchemyError:
        return None  # an unreadable file: the reader's own query reports it, as before
    return version if version is not None and version < SCHEMA_VERSION else None


def upgraded_copy(path: Path, version: int) -> Engine:
    """A read-only engine on an in-memory copy of the SQLite file at `path`, upgraded from `version` to today's
    schema. The file is read through SQLite's read-only mode, so nothing (not even a journal) is written beside it."""
    from sqlalchemy import create_engine
    from sqlalchemy.pool import StaticPool

    from results_db.migrations import upgrade

    memory = sqlite3.connect(":memory:", check_same_thread=False)
    source = sqlite3.connect(sqlite_file_uri(path, mode="ro"), uri=True)
    try:
        source.backup(memory)
    finally:
        source.close()
    engine = create_engine("sqlite://", creator=lambda: memory, poolclass=StaticPool, future=True)
    with engine.begin() as conn:
        upgrade(conn, version)
    memory.execute("PRAGMA query_only=ON")  # the copy is read like the file: a write is refused, not lost
    return engine


def read_older(engine: Engine, location: Location, version: int | None) -> tuple[Engine, OlderSchema | None]:
    """The engine a read-only reader uses: `engine` itself for a current schema (`version` None), an upgraded
    in-memory copy for an older SQLite file of `version` (`older_version`; one line on stderr says so and names the
    upgrade command); a server database of an older schema is refused with that line."""
    from results_db.models import SCHEMA_VERSION

    if version is None:
        return engine, None
    hint = upgrade_hint(location.shown)
    if location.path is None:
        raise ResultsDBError(
            f"results database {location.shown} has schema version {version}, older than this lenbench's "
            f"({SCHEMA_VERSION}); a read never changes it: run `{hint}` (it keeps a backup), then read it again"
        )
    copy = upgraded_copy(location.path, version)
    engine.dispose()
    print(f"note: {location.shown} has schema version {version} (this lenbench writes {SCHEMA_VERSION}); read through "
          f"an upgraded copy in memory, the file is unchanged; `{hint}` upgrades it (keeping a backup)",
          file=sys.stderr)  # fmt: skip
    return copy, OlderSchema(version, in_memory=True)
