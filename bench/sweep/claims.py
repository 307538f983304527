"""A sweep point is claimed in the results database, atomically, before it trains: two `bench sweep` of one file
started together (or a sweep submitted twice) never train one point in one folder at once.

A claim is a `meta` row `claim:<point>` (the point is named by its `bench run` options, so every sweep of the same
file names it alike) holding who claims it (host, pid, time). Inserting it is the atomic step: the primary key lets
one insert win and refuses the others. A claim whose process is gone (this host: its pid has ended; another host:
older than `FOREIGN_CLAIM_S` while no live run row holds the point) is taken over by a compare-and-swap update, so
again only one process wins it. The claimer removes its claim when the point ends (finished or failed).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import socket
from dataclasses import dataclass
from typing import Any

FOREIGN_CLAIM_S = 600.0  # a claim from another host counts as live this long without a live run row


@dataclass(frozen=True)
class Claim:
    key: str
    value: str


def claim_key(argv: tuple[str, ...] | list[str]) -> str:
    return "claim:" + hashlib.sha256("\0".join(argv).encode("utf-8")).hexdigest()[:40]


def _me() -> dict[str, Any]:
    return {"host": socket.gethostname(), "pid": os.getpid(), "at": dt.datetime.now(dt.timezone.utc).isoformat()}


def _holder_alive(holder: dict[str, Any], point_running: bool) -> bool:
    from results_db.liveness import pid_alive

    if holder.get("host") == socket.gethostname():
        try:
            return pid_alive(int(holder.get("pid")))
        except (TypeError, ValueError):
            return False
    try:
        age = (dt.datetime.now(dt.timezone.utc) - dt.datetime.fromisoformat(str(holder.get("at")))).total_seconds()
    except ValueError:
        return False
    return point_running or age < FOREIGN_CLAIM_S


def claim(db: Any, argv: tuple[str, ...] | list[str], point_running: bool = False) -> Claim | dict[str, Any]:
    """Claim the point for this process: the Claim, or (held by a live process) who holds it."""
    from sqlalchemy import insert, select, update
    from sqlalchemy.exc import IntegrityError

    from results_db.models import Meta

    key, value = claim_key(argv), json.dumps(_me())
    for _ in range(3):
        try:
            with db.engine.begin() as conn:
                conn.execute(insert(Meta).values(key=key, value=value))
            return Claim(key, value)
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
        if _holder_alive(holder, point_running):
            return holder
        with db.engine.begin() as conn:  # a stale claim: only the process whose update still sees it wins
            taken = conn.execute(update(Meta).where(Meta.key == key, Meta.value == held).values(value=value)).rowcount
        if taken == 1:
            return Claim(key, value)
    return {"host": "?", "pid": "?"}


def release(db: Any, held: Claim) -> None:
    """Remove this process's claim (never another's that took it over)."""
    from sqlalchemy import delete

    from results_db.models import Meta

    with db.engine.begin() as conn:
        conn.execute(delete(Meta).where(Meta.key == held.key, Meta.value == held.value))
