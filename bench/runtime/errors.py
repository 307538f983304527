"""Errors about the user's options and models, raised at every stage; `bench.cli.user_errors()` lists every exception
shown as one line (the user's input at fault) rather than a traceback (a bug)."""

from __future__ import annotations


class ConfigError(ValueError):
    """A bad option value (budget, method, hyper-parameter...)."""


class ModelLoadError(RuntimeError):
    """A model folder or hub id that cannot be loaded."""


class TrainingError(RuntimeError):
    """Training stopped: non-finite loss, nothing to train on..."""


class WriteFault(TrainingError):
    """A file or folder lenbench keeps could not be written (one line; nothing partial was left)."""


def write_error(what: str, where: object, exc: BaseException, kept: str = "") -> WriteFault:
    """One line for anything lenbench keeps (a checkpoint, an encoder, results.json, a backbone...) that could not be
    written; the writer has removed what it began (bench.runtime.writes)."""
    reason = " ".join(str(getattr(exc, "strerror", None) or exc).split())[:160] or type(exc).__name__
    kept = f", {kept}" if kept else ""
    return WriteFault(f"{what} could not be written to {where} ({type(exc).__name__}: {reason}); nothing partial was "
                      f"left{kept}; {write_advice(where, exc)}, then run the same command again")


def write_advice(where: object, exc: BaseException) -> str:
    """What to do about a refused write: a permission (or a read-only file system) is not a full disk."""
    import errno

    text = str(exc).lower()
    if (isinstance(exc, PermissionError) or getattr(exc, "errno", None) in (errno.EACCES, errno.EPERM, errno.EROFS)
            or "permission denied" in text or "read-only file system" in text):  # fmt: skip
        from pathlib import Path

        folder = Path(str(where))
        folder = folder if folder.is_dir() else folder.parent
        return f"this user may not write in {folder}: give it write permission, or point lenbench at another folder"
    return "free space or lift the file-size limit"


class MethodFileError(ConfigError):
    """A method file (`--method ./my_method.py`) that cannot be used: missing, fails to import, defines no method, or
    a name taken by a built-in. One line naming the file and line."""


class MethodContractError(TrainingError):
    """A method that breaks its contract while it runs (a positives function of the wrong return type, every text
    skipped): one line naming the file and line of its code and what was expected."""
