"""Leases: a piece of work (a sweep point, a run identity) is leased in the results database, atomically, before it
starts, so two processes asking for the same work at once never both do it (nor write one folder at once).

A lease is a `meta` row `lease:<name>` holding who holds it (host, pid, time). Inserting it is the atomic step: the
primary key lets one insert win and refuses the others, on SQLite and PostgreSQL alike. A lease whose process is
gone (this host: its pid has ended; another host: older than `FOREIGN_LEASE_S` while the caller sees no live row
doing the work) is taken over by a compare-and-swap update, so again only one process wins it. The leaseholder removes
its lease when the work ends (finished or failed).

A lease held under this process's own pid that this process does not hold any more (an API caller whose job raised
before it could release) is stale too: the process is alive, but the work is not being done.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

FOREIGN_LEASE_S = 600.0  # a lease from another host counts as live this long without a live row doing its work

_HELD: set[tuple[str, str]] = set()  # (key, value) of the leases this process holds now


@dataclass(frozen=True)
class Lease:
    key: str
    value: str


def lease_name(*parts: str) -> str:
    """The meta key of the work named by `parts` (any strings; hashed, so the key fits the column)."""
    return "lease:" + hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()[:40]


def _me() -> dict[str, Any]:
    return {"host": socket.gethostname(), "pid": os.getpid(), "at": dt.datetime.now(dt.timezone.utc).isoformat()}


def holder_alive(key: str, held: str, holder: dict[str, Any], work_live: bool) -> bool:
    """Whether the process named by a lease still does its work (see the module docstring)."""
    from results_db.liveness import pid_alive

    if holder.get("host") == socket.gethostname():
        try:
            pid = int(holder.get("pid"))
        except (TypeError, ValueError):
            return False
        if pid == os.getpid():
            return (key, held) in _HELD
        return pid_alive(pid)
    try:
        age = (dt.datetime.now(dt.timezone.utc) - dt.datetime.fromisoformat(str(holder.get("at")))).total_seconds()
    except ValueError:
        return False
    return work_live or age < FOREIGN_LEASE_S


def take(db: Any, key: str, work_live: bool | Callable[[], bool] = False) -> Lease | dict[str, Any]:
    """Lease `key` for this process: the Lease, or (held by a live process) who holds it (host, pid, at).
    work_live: whether a live row does the leased work (a callable is asked only when a foreign lease is seen)."""
    from sqlalchemy import insert, select, update
    from sqlalchemy.exc import IntegrityError

    from results_db.models import Meta

    value = json.dumps(_me())
    for _ in range(3):
        try:
            with db.engine.begin() as conn:
                conn.execute(insert(Meta).values(key=key, value=value))
            _HELD.add((key, value))
            return Lease(key, value)
        except IntegrityError:
            pass
        with db.engine.connect() as conn:
            held = conn.execute(select(Meta.value).where(Meta.key == key)).scalar()
        if held is None:  # released meanwhile: try the insert again
            continue
        try:
            holder = json.loads(held)
        except ValueError:
            holder = {}
        live = work_live() if callable(work_live) and holder.get("host") != socket.gethostname() else work_live
        if holder_alive(key, held, holder, bool(live)):
            return holder
        with db.engine.begin() as conn:  # a stale lease: only the process whose update still sees it wins
            taken = conn.execute(update(Meta).where(Meta.key == key, Meta.value == held).values(value=value)).rowcount
        if taken == 1:
            _HELD.add((key, value))
            return Lease(key, value)
    return {"host": "?", "pid": "?"}


def release(db: Any, held: Lease) -> None:
    """Remove this process's lease (never another's that took it over)."""
    from sqlalchemy import delete

    from results_db.models import Meta

    _HELD.discard((held.key, held.value))
    with db.engine.begin() as conn:
        conn.execute(delete(Meta).where(Meta.key == held.key, Meta.value == held.value))
