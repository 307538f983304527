"""The one reader of lenbench's environment variables ($LENBENCH_*): each is declared here once with its kind and
bounds, and read through `flag`, `choice`, `number` or `text`, so a bad value is one line naming the variable, what
it holds and what it accepts, instead of being ignored or blamed on a data file.

`bench` checks every variable that is set before a command starts (`check_all`); each reader also checks on use,
so code that reads a variable without the CLI (the Python API, the leaderboard, a sweep worker) gets the same line.
This module sits below every package (tests/test_dependencies.py): the results database reads its busy timeout here.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off")


class EnvironmentSettingError(ValueError):
    """A $LENBENCH_* variable holds a value lenbench cannot use."""


@dataclass(frozen=True)
class Variable:
    name: str
    kind: str  # "flag", "choice", "number", "integer", "text"
    meaning: str
    choices: tuple[str, ...] = ()
    minimum: float | None = None  # inclusive lower bound of a number


VARIABLES: dict[str, Variable] = {
    v.name: v
    for v in (
        Variable("LENBENCH_PROGRESS", "choice", "progress display", choices=("bar", "lines", "off")),
        Variable("LENBENCH_MAX_LINE_BYTES", "integer", "the longest line a data file may hold, in bytes", minimum=1),
        Variable("LENBENCH_DB_BUSY_TIMEOUT", "number", "seconds a database write waits for another process's lock",
                 minimum=0),  # fmt: skip
        Variable("LENBENCH_DIST_TIMEOUT", "number", "seconds a torchrun rank waits for the others", minimum=1),
        Variable("LENBENCH_MEMMAP_BYTES", "integer", "embedding bytes kept in memory before spilling to a file",
                 minimum=0),  # fmt: skip
        Variable("LENBENCH_DOWNLOAD", "flag", "--download by default"),
        Variable("LENBENCH_DEBUG", "flag", "--debug by default: full tracebacks instead of one-line errors"),
        Variable("LENBENCH_ALLOW_PICKLE", "flag", "--allow-pickle by default"),
        Variable("LENBENCH_ONNX_FUSE", "flag", "ONNX Runtime's transformer fusion (unset: by the model's width)"),
        Variable("LENBENCH_ONNX_CACHE_GIB", "number", "the most GiB the ONNX exports may hold (least recently used "
                 "out first)", minimum=0.001),  # fmt: skip
        Variable("LENBENCH_COMMIT_THREAD", "flag",
                 "encoded chunks committed on a background thread (unset: on an accelerator and from 3 cores)"),
        Variable("LENBENCH_CUDNN_ATTENTION", "flag", "torch's default attention kernels on CUDA, cuDNN's included"),
        Variable("LENBENCH_DB", "text", "the results database"),
        Variable("LENBENCH_DATA", "text", "a data folder"),
        Variable("LENBENCH_CACHE", "text", "the embedding cache folder"),
        Variable("LENBENCH_WORDNET", "text", "the WordNet folder of the eda method"),
        Variable("LENBENCH_LEADERBOARD_PASSWORD", "text", "the leaderboard's password"),
        Variable("LENBENCH_POOLS", "choice", "worker process pools (auto: by size; on: always; off: never)",
                 choices=("auto", "on", "off")),  # fmt: skip
        Variable("LENBENCH_CORES", "integer",
                 "cores this process's worker pools and loader workers may use (a sweep or claim job slot's share)",
                 minimum=1),  # fmt: skip
        Variable("LENBENCH_POOL_STALL_SECONDS", "number",
                 "seconds a worker pool may finish nothing before it is ended and its work done in the caller",
                 minimum=0.001),  # fmt: skip
    )
}


def _raw(name: str) -> str | None:
    """The variable's value with surrounding blanks removed; None when unset or blank (blank counts as unset)."""
    if name not in VARIABLES:
        raise KeyError(f"{name} is not a declared lenbench variable (bench.environment.VARIABLES)")
    value = os.environ.get(name)
    return None if value is None or not value.strip() else value.strip()


def _refuse(name: str, value: str, accepted: str) -> EnvironmentSettingError:
    shown = value if len(value) <= 60 else value[:57] + "..."
    return EnvironmentSettingError(f"${name}={shown!r} ({VARIABLES[name].meaning}) must be {accepted}; "
                                   f"set it to one, or unset it for the default")  # fmt: skip


def flag(name: str) -> bool:
    """True for 1/true/yes/on, False for 0/false/no/off or unset; anything else is refused."""
    value = _raw(name)
    if value is None:
        return False
    if value.lower() in TRUE:
        return True
    if value.lower() in FALSE:
        return False
    raise _refuse(name, value, f"one of {', '.join(TRUE + FALSE)}")


def optional_flag(name: str) -> bool | None:
    """As `flag`, but None when unset: the caller's own default decides."""
    return None if _raw(name) is None else flag(name)


def choice(name: str) -> str | None:
    """One of the variable's choices (case-insensitive), None when unset."""
    value = _raw(name)
    if value is None:
        return None
    choices = VARIABLES[name].choices
    if value.lower() not in choices:
        raise _refuse(name, value, f"one of {', '.join(choices)}")
    return value.lower()


def number(name: str, default: float) -> float:
    """A finite number at or above the variable's minimum (a whole number for integer variables); `default` when
    unset."""
    value = _raw(name)
    if value is None:
        return default
    spec = VARIABLES[name]
    integer = spec.kind == "integer"
    bound = "" if spec.minimum is None else f" >= {spec.minimum:g}"
    accepted = f"a whole number{bound}" if integer else f"a number{bound}"
    try:
        parsed = int(value) if integer else float(value)
    except ValueError:
        raise _refuse(name, value, accepted) from None
    if not math.isfinite(parsed) or (spec.minimum is not None and parsed < spec.minimum):
        raise _refuse(name, value, accepted)
    return parsed


def text(name: str, strip: bool = True) -> str | None:
    """The variable's text, None when unset or blank; strip=False keeps the blanks around it (a password)."""
    value = _raw(name)
    return value if strip or value is None else os.environ[name]


def check_all() -> None:
    """Read every declared variable that is set, so the first bad one is refused before a command does anything."""
    for spec in VARIABLES.values():
        if spec.kind == "flag":
            flag(spec.name)
        elif spec.kind == "choice":
            choice(spec.name)
        elif spec.kind in ("number", "integer"):
            number(spec.name, 0)
