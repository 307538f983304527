"""A sweep point is claimed in the results database, atomically, before it trains: two `bench sweep` of one file
started together (or a sweep submitted twice) never train one point in one folder at once.

The point is named by its `bench run` options, so every sweep of the same file names it alike; the claim itself
(a `meta` row, taken over from a gone process by compare-and-swap) is `results_db.claims`. The `bench run` the
point starts then claims its run identity too (`bench.experiment.run_claim`), as any other `bench run` does.
"""

from __future__ import annotations

from typing import Any

from results_db.claims import FOREIGN_CLAIM_S, Claim, claim_name, release, take

__all__ = ["FOREIGN_CLAIM_S", "Claim", "claim", "claim_key", "release"]


def claim_key(argv: tuple[str, ...] | list[str]) -> str:
    return claim_name(*argv)


def claim(db: Any, argv: tuple[str, ...] | list[str], point_running: bool = False) -> Claim | dict[str, Any]:
    """Claim the point for this process: the Claim, or (held by a live process) who holds it."""
    return take(db, claim_key(argv), point_running)
