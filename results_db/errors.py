"""Errors about the results database itself (where it is, what it holds): each is one line naming the database
and what to do. `bench` shows them without a traceback (bench.cli.user_errors)."""

from __future__ import annotations


class ResultsDBError(RuntimeError):
    """The database cannot be used as asked: corrupt, foreign, newer, unreachable, a directory..."""


class DatabaseMissingError(ResultsDBError, FileNotFoundError):
    """A read (or --resume) names a database that does not exist; reads never create one."""


class UndefinedMetricError(ResultsDBError, ValueError):
    """A score that is not a finite number (NaN, inf): the metric is undefined for that dataset."""
