"""SQLAlchemy-backed results database (SQLite by default, any SQLAlchemy URL works).

Modules: `location` (where the database is, checking and opening it), `schema` (creating, upgrading or refusing a
schema; the wording of database faults), `migrations`, `store` (the `ResultsDB` API), `models` (tables), `records`
(plain score records), `redact`, `liveness`, `errors`.

Names are loaded on first use, so `results_db.records` (the plain score records) and `results_db.errors` import
without SQLAlchemy or pandas.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "DatabaseMissingError": "results_db.errors",
    "ResultsDBError": "results_db.errors",
    "UndefinedMetricError": "results_db.errors",
    "ItemValues": "results_db.records",
    "ScoreRecord": "results_db.records",
    "Run": "results_db.models",
    "Score": "results_db.models",
    "ScoreItems": "results_db.models",
    "TrainLog": "results_db.models",
    "DEFAULT_DB": "results_db.location",
    "ResultsDB": "results_db.store",
    "default_db_url": "results_db.location",
    "to_url": "results_db.location",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'results_db' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
