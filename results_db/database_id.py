"""A database's own identity: a random id stamped in its `meta` table (`database_id`) when it is created, or when a
command that writes first needs it in a database made before ids were stamped. Files a database's rows own (an
evaluation row's results.json: bench.experiment.eval_files) are kept under a folder named by it, so two databases in
one folder, or a database deleted and made again under the same name, never write into each other's files."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.engine import Connection

from results_db.models import Meta

DATABASE_ID_KEY = "database_id"


def read_database_id(conn: Connection) -> str | None:
    return conn.execute(select(Meta.value).where(Meta.key == DATABASE_ID_KEY)).scalar()


def stamp_database_id(conn: Connection) -> str:
    """The stamped id, stamped now when the database has none (inside the caller's transaction)."""
    found = read_database_id(conn)
    if found:
        return found
    new = uuid.uuid4().hex
    conn.execute(Meta.__table__.insert().values(key=DATABASE_ID_KEY, value=new))
    return new
