"""Which exceptions are the user's input at fault (shown as one line) rather than a bug (shown as a traceback)."""

from __future__ import annotations

from bench.data.errors import DataError
from bench.evaluate.suites.base import SuiteError
from results_db.errors import ResultsDBError


class ConfigError(ValueError):
    """A bad option value (budget, method, hyper-parameter...)."""


class ModelLoadError(RuntimeError):
    """A model folder or hub id that cannot be loaded."""


class TrainingError(RuntimeError):
    """Training stopped: non-finite loss, nothing to train on..."""


USER_ERRORS: tuple[type[BaseException], ...] = (
    DataError,
    ModelLoadError,
    SuiteError,
    ConfigError,
    TrainingError,
    FileNotFoundError,
    KeyError,
    ResultsDBError,
)
