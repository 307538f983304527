"""Errors about input data: each names the dataset or file (and line) at fault and what to do."""

from __future__ import annotations


class DataError(ValueError):
    """Bad or missing input data."""


class DatasetMissingError(DataError):
    """A dataset of a suite is not on disk (and could not be fetched)."""
