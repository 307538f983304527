"""One validation of the numbers (and the device) given on the command line, for every subcommand.

argparse checks that `--max-len 64` is an int; it does not check that it is sensible. A negative batch size, a
seed numpy cannot take, a run id larger than SQLite's int64, `--lr nan` or a
`--device` this torch cannot use fail later with a traceback, or worse, are recorded. `check_args` runs right
after parsing, on every command, and refuses each such value with one line naming the option, the allowed range
and an example. The ranges live in one table (`RANGES`), by argparse destination, so an option added later with
one of these names is checked too.
"""

from __future__ import annotations

import argparse
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.runtime.errors import ConfigError, ModelLoadError

INT64_MAX = 2**63 - 1  # the largest integer SQLite stores
SEED_MAX = 2**32 - 1  # numpy's and torch's seeds


@dataclass(frozen=True)
class Range:
    low: float
    high: float
    example: str
    low_open: bool = False  # low itself is refused (a learning rate of 0)

    def check(self, option: str, value: Any) -> None:
        if value is None:
            return
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{option} {value}: must be a finite number; e.g. {option} {self.example}")
        too_low = value <= self.low if self.low_open else value < self.low
        if too_low or value > self.high:
            low = f"> {_fmt(self.low)}" if self.low_open else f">= {_fmt(self.low)}"
            raise ConfigError(f"{option} {_fmt(value)}: must be {low} and <= {_fmt(self.high)}; e.g. {option} {self.example}")


def _fmt(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() and abs(x) >= 10_000 else f"{x:g}"


RANGES: dict[str, Range] = {
    "max_len": Range(4, 100_000, "256"),
    "eval_max_len": Range(4, 100_000, "256"),
    "batch_size": Range(1, 65_536, "64"),
    "eval_batch_size": Range(1, 65_536, "64"),
    "seed": Range(0, SEED_MAX, "0"),
    "nproc": Range(1, 4096, "2"),
    "loader_workers": Range(0, 4096, "4"),
    "limit": Range(1, INT64_MAX, "300"),
    "corpus_limit": Range(1, INT64_MAX, "10000"),
    "lr": Range(0, 1, "3e-5", low_open=True),
    "warmup_steps": Range(0, INT64_MAX, "100"),
    "checkpoint_every": Range(1, INT64_MAX, "500"),
    "checkpoint_minutes": Range(0, 10**6, "10", low_open=True),
    "port": Range(1, 65_535, "8501"),
    "jobs": Range(1, 4096, "2"),
    "retries": Range(0, 100, "1"),
    "gpus_per_job": Range(0, 1024, "1"),
    "cpus_per_job": Range(1, 65_536, "8"),
    "array_parallelism": Range(1, 10**6, "16"),
    "run": Range(1, INT64_MAX, "3"),  # run ids (repeatable options: each one)
}


OUTPUT_FOLDERS = {"out": "--out", "folder": "--folder"}  # by argparse destination (bench run, bench sweep)


def option_name(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def check_args(args: argparse.Namespace) -> None:
    """Refuse an out-of-range number or an unusable device (see the module docstring); run before anything else."""
    check_numbers(vars(args))
    for dest, option in OUTPUT_FOLDERS.items():  # folders a command creates: never a file, or under one
        if isinstance(getattr(args, dest, None), str):
            check_output_dir(getattr(args, dest), option)
    device = getattr(args, "device", None)
    if isinstance(device, str):
        check_device(device)
    check_model_names(args)


MODEL_OPTIONS = {"backbone": "--backbone", "model": "--model"}  # by argparse destination (bench run, bench eval)


def check_model_names(args: argparse.Namespace) -> None:
    """A hub id given offline: one line within seconds, before any row (bench.encode.loading.check_hub_model)."""
    from bench.encode.loading import check_hub_model, resolve_model
    from bench.encode.names import is_generated_backbone
    from bench.evaluate.models import LEXICAL_MODELS

    for dest, option in MODEL_OPTIONS.items():
        name = getattr(args, dest, None)
        if not isinstance(name, str) or not name or name.lower() in LEXICAL_MODELS:
            continue
        try:
            if Path(resolve_model(name)).is_dir():
                continue  # a folder or the packaged model: nothing to download
        except ModelLoadError:
            continue  # a missing folder: refused where it is loaded, with its own message
        if not is_generated_backbone(name):
            check_hub_model(name, option)


def check_numbers(options: dict[str, Any]) -> None:
    """The numeric options among `options` (option name -> value) within their ranges (a sweep's points too; their
    device is checked where they run, which may be another machine)."""
    for dest, rule in RANGES.items():
        value = options.get(dest)
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, (int, float)) and not isinstance(item, bool):
                rule.check(option_name(dest), item)


DEVICE = re.compile(r"(cpu|cuda|mps|xpu)(:[0-9]{1,3})?")


def check_device(name: str) -> None:
    """A device name torch knows, and one this machine's torch can use (checked before any run row is written)."""
    if not DEVICE.fullmatch(name):
        raise ConfigError(f"--device {name!r} is not a device name; give cpu, cuda, cuda:N or mps")
    kind, _, index = name.partition(":")
    if kind == "cpu":
        if index not in ("", "0"):
            raise ConfigError(f"--device {name!r}: the CPU has no index; give --device cpu")
        return
    import torch

    if kind == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(f"--device {name!r}: this torch ({torch.__version__}) cannot use a CUDA GPU here; "
                              "use --device cpu, or install a CUDA build of torch")  # fmt: skip
        if index and int(index) >= torch.cuda.device_count():
            raise ConfigError(f"--device {name!r}: this machine has {torch.cuda.device_count()} CUDA GPU(s) "
                              f"(cuda:0 to cuda:{torch.cuda.device_count() - 1})")  # fmt: skip
        return
    backend = getattr(torch.backends, kind, None) if kind == "mps" else getattr(torch, kind, None)
    if backend is None or not backend.is_available():
        raise ConfigError(f"--device {name!r}: this torch ({torch.__version__}) cannot use {kind} here; use --device cpu")


def check_output_dir(path: str | os.PathLike[str], option: str) -> None:
    """A folder a command will create or write into: refused now, with one line, when it is a file, sits under a
    file, or cannot be written (nothing is created here)."""
    from pathlib import Path

    target = Path(path).expanduser()
    if target.exists() and not target.is_dir():
        raise ConfigError(f"{option} {path} is an existing file, not a folder; give a folder (it is created when missing)")
    probe = target
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        raise ConfigError(f"{option} {path}: {probe} is a file, so the folder cannot be created there; give another folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ConfigError(f"{option} {path}: {probe} is not writable; give another folder")
