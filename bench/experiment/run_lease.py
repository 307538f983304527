"""A run is leased before it is trained or scored. Its identity is what its row is keyed by (kind, method, config
hash); any two processes asking for one identity at once (`bench run`, `bench eval`, `lenbench.run`,
`lenbench.evaluate`, a sweep's points) agree through the results database (`results_db.leases`): one holds the
lease and does the work; the other says which process holds it and waits until it lets go, then looks again and
reuses the finished row. So no two processes ever train one run, or write one folder.

    held = lease_run(db, "train", chash, "simcse", say, "[simcse]")
    ...find the finished row, resume one, or make one...
    release_run(db, held)          # Recording does it when the row's work ends, however it ends
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from results_db.leases import Lease, lease_name, release, take

POLL_SECONDS = 1.0  # how often a waiting process looks at the lease again


def run_lease_key(kind: str, config_hash: str, method: str) -> str:
    return lease_name("run", kind, method, config_hash)


def _row_live(db: Any, kind: str, config_hash: str, method: str) -> bool:
    """Whether a running row of this identity has a live process (its heartbeat is fresh): a lease from another host
    stays held while it does."""
    from results_db.liveness import with_liveness

    runs = with_liveness(db.runs())
    if runs.empty:
        return False
    return bool(((runs["kind"] == kind) & (runs["config_hash"] == config_hash) & (runs["method"] == method)
                 & (runs["status"] == "running")).any())  # fmt: skip


def lease_run(db: Any, kind: str, config_hash: str, method: str, say: Callable[..., None], who: str,
              poll: float = POLL_SECONDS) -> Lease:  # fmt: skip
    """Hold this run identity, waiting (one line says for whom) while another live process holds it."""
    key = run_lease_key(kind, config_hash, method)
    waited = False
    while True:
        held = take(db, key, lambda: _row_live(db, kind, config_hash, method))
        if isinstance(held, Lease):
            return held
        if not waited:
            doing = "trained" if kind == "train" else "scored"
            say(f"{who} a run with these settings is being {doing} by another process (pid {held.get('pid')} on "
                f"{held.get('host')}); waiting for it to end, then its result is reused")  # fmt: skip
            waited = True
        time.sleep(poll)


def release_run(db: Any, held: Lease | None) -> None:
    """Let go of a run lease; a database that cannot be written leaves it to be taken over as stale (its pid ends)."""
    if db is None or held is None:
        return
    try:
        release(db, held)
    except Exception:  # noqa: BLE001 - the run's own outcome matters more; a lease of a gone process is stale
        pass
