"""SQLAlchemy-backed results database (SQLite by default, any SQLAlchemy URL works)."""

from results_db.models import Run, Score, ScoreItems, TrainLog
from results_db.store import DEFAULT_DB, ItemValues, ResultsDB, ScoreRecord, default_db_url, to_url

__all__ = [
    "DEFAULT_DB",
    "ItemValues",
    "ResultsDB",
    "Run",
    "Score",
    "ScoreItems",
    "ScoreRecord",
    "TrainLog",
    "default_db_url",
    "to_url",
]
