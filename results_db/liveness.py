"""Is a "running" row still running? A row records which process holds it (host, pid) and when that process
last reported (heartbeat_at, refreshed every HEARTBEAT_SECONDS while it runs). A row whose process is gone -
its pid is dead on this host, or its heartbeat is older than STALE_AFTER - is shown as "stale": killed
(SIGKILL, out of memory, a lost node) without a chance to mark itself. `bench run --resume` continues it.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pandas and the ORM models load when a row is checked: the heartbeat's importers stay light
    import pandas as pd

HEARTBEAT_SECONDS = 30.0
STALE_AFTER = dt.timedelta(minutes=5)  # ten missed heartbeats
STALLED_AFTER = dt.timedelta(minutes=10)  # alive, but no progress (runtime["progress_at"]) for this long


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists on this host (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def is_stale(row: dict, now: dt.datetime | None = None, host: str | None = None) -> bool:
    import pandas as pd

    from results_db.models import utcnow

    if row.get("status") != "running":
        return False
    now = now or utcnow()
    host = host or socket.gethostname()
    pid = row.get("pid")
    if row.get("host") == host and pid is not None and not pd.isna(pid) and not pid_alive(int(pid)):
        return True
    last = row.get("heartbeat_at")
    if last is None or pd.isna(last):
        last = row.get("started_at")
    if last is None or pd.isna(last):
        return False
    return now - pd.Timestamp(last).to_pydatetime() > STALE_AFTER


def is_stalled(row: dict, now: dt.datetime) -> bool:
    """A "running" row whose process is alive (not stale) but recorded no progress for STALLED_AFTER: a hung job."""
    if row.get("status") != "running":
        return False
    runtime = row.get("runtime")
    at = runtime.get("progress_at") if isinstance(runtime, dict) else None
    if not at:
        return False
    try:
        last = dt.datetime.fromisoformat(str(at))
    except ValueError:
        return False
    return now - last > STALLED_AFTER


def live_status(row: dict, now: dt.datetime | None = None, host: str | None = None) -> str:
    """The row's status as a reader should see it: "stale" (its process is gone), "stalled" (alive, no progress for
    STALLED_AFTER), else the stored status."""
    from results_db.models import utcnow

    now = now or utcnow()
    if is_stale(row, now, host):
        return "stale"
    return "stalled" if is_stalled(row, now) else str(row.get("status"))


def with_liveness(runs: pd.DataFrame) -> pd.DataFrame:
    """`runs` with status "stale" where a "running" row's process is gone, "stalled" where it is alive but has made
    no progress for STALLED_AFTER."""
    from results_db.models import utcnow

    if runs.empty or "status" not in runs:
        return runs
    out = runs.copy()
    now, host = utcnow(), socket.gethostname()
    rows = out.to_dict("records")
    stale = [is_stale(row, now, host) for row in rows]
    stalled = [not gone and is_stalled(row, now) for row, gone in zip(rows, stale)]
    out.loc[stale, "status"] = "stale"
    out.loc[stalled, "status"] = "stalled"
    return out
