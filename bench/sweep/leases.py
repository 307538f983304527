"""A sweep point is leased in the results database, atomically, before it trains: two `bench sweep` of one file
started together (or a sweep submitted twice) never train one point in one folder at once.

The point is named by its `bench run` options, so every sweep of the same file names it alike; the lease itself
(a `meta` row, taken over from a gone process by compare-and-swap) is `results_db.leases`. The `bench run` the
point starts then leases its run identity too (`bench.experiment.run_lease`), as any other `bench run` does.
"""

from __future__ import annotations

from typing import Any

from results_db.leases import FOREIGN_LEASE_S, Lease, lease_name, release, take

__all__ = ["FOREIGN_LEASE_S", "Lease", "lease", "lease_key", "release"]


def lease_key(argv: tuple[str, ...] | list[str]) -> str:
    return lease_name(*argv)


def lease(db: Any, argv: tuple[str, ...] | list[str], point_running: bool = False) -> Lease | dict[str, Any]:
    """Lease the point for this process: the Lease, or (held by a live process) who holds it."""
    return take(db, lease_key(argv), point_running)
