"""Errors about the user's options and models, raised at every stage; `bench.cli.user_errors()` lists every exception
shown as one line (the user's input at fault) rather than a traceback (a bug)."""

from __future__ import annotations


class ConfigError(ValueError):
    """A bad option value (budget, method, hyper-parameter...)."""


class ModelLoadError(RuntimeError):
    """A model folder or hub id that cannot be loaded."""


class TrainingError(RuntimeError):
    """Training stopped: non-finite loss, nothing to train on..."""
