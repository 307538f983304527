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


def with_liveness(runs: pd.DataFrame) -> pd.DataFrame:
    """`runs` with status "stale" where a "running" row's process is gone."""
    from results_db.models import utcnow

    if runs.empty or "status" not in runs:
        return runs
    out = runs.copy()
    now, host = utcnow(), socket.gethostname()
    stale = [is_stale(row, now, host) for row in out.to_dict("records")]
    out.loc[stale, "status"] = "stale"
    return out
