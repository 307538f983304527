"""SQLAlchemy-backed results database (SQLite by default, any SQLAlchemy URL works)."""

from results_db.errors import DatabaseMissingError, ResultsDBError, UndefinedMetricError
from results_db.models import Run, Score, ScoreItems, TrainLog
from results_db.store import DEFAULT_DB, ItemValues, ResultsDB, ScoreRecord, default_db_url, to_url

__all__ = [
    "DEFAULT_DB",
    "DatabaseMissingError",
    "ItemValues",
    "ResultsDB",
    "ResultsDBError",
    "Run",
    "Score",
    "ScoreItems",
    "ScoreRecord",
    "TrainLog",
    "UndefinedMetricError",
    "default_db_url",
    "to_url",
]
