"""One validation of the numbers (and the device) given on the command line, for every subcommand.

argparse checks that `--max-len 64` is an int; it does not check that it is sensible. A negative batch size, a
seed numpy cannot take, a run id larger than SQLite's int64, `--lr nan` or a
`--device` this torch cannot use fail later with a traceback, or worse, are recorded. `check_args` runs right
after parsing, on every command, and refuses each such value with one line naming the option, the allowed range
and an example. The ranges are declared with the options (bench.experiment.options); the Python API names the
option by its keyword (`limit=0`), the command line by its flag (`--limit 0`).
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.experiment.option_types import INT64_MAX, Range
from bench.runtime.errors import ConfigError, ModelLoadError

# Numbers of the commands whose options are not declared in bench.experiment.options (by argparse destination).
OTHER_RANGES: dict[str, Range] = {
    "port": Range(1, 65_535, "8501"),  # bench leaderboard
    "run": Range(1, INT64_MAX, "3"),  # run ids (bench results, bench export; repeatable: each one)
}


def ranges(command: str | None) -> dict[str, Range]:
    """The ranges of `bench COMMAND`'s numeric options, as declared (bench.experiment.options), by name."""
    from bench.experiment.options import COMMANDS, OPTIONS

    every = command not in COMMANDS  # another command: a number with a declared option's name is checked as it is
    declared = {o.name: o.range for o in OPTIONS if o.range is not None and (every or command in o.commands)}
    return {**OTHER_RANGES, **declared}


OUTPUT_FOLDERS = ("out", "folder")  # by argparse destination (bench run, bench sweep, bench claim)


def option_name(dest: str) -> str:
    """How the command line names an option: its flag."""
    return "--" + dest.replace("_", "-")


def check_args(args: Any, spell: Callable[[str], str] = option_name, command: str | None = None) -> None:
    """Refuse an out-of-range number or an unusable device (see the module docstring); run before anything else.
    `args`: parsed arguments or a spec; `spell`: how an option is named in an error (a flag, or the Python API's
    keyword, bench.experiment.command_options.keyword)."""
    values = vars(args) if isinstance(args, argparse.Namespace) else args.option_values()
    check_numbers(values, spell, command or values.get("command"))
    for dest in OUTPUT_FOLDERS:  # folders a command creates: never a file, or under one
        if isinstance(values.get(dest), str):
            check_output_dir(values[dest], spell(dest))
    if isinstance(values.get("device"), str):
        check_device(values["device"], spell("device"))
    check_model_names(values, spell)


MODEL_OPTIONS = ("backbone", "model")  # by argparse destination (bench run, bench eval)


def check_model_names(values: dict[str, Any], spell: Callable[[str], str] = option_name) -> None:
    """A hub id given offline: one line within seconds, before any row (bench.encode.loading.check_hub_model)."""
    from bench.encode.loading import check_hub_model, resolve_model
    from bench.encode.names import is_generated_backbone
    from bench.encode.objects import FILE_MODEL, OBJECT_MODEL
    from bench.evaluate.models import LEXICAL_MODELS

    for dest in MODEL_OPTIONS:
        name = values.get(dest)
        if not isinstance(name, str) or not name or name.lower() in LEXICAL_MODELS:
            continue
        if (dest == "model" and name == OBJECT_MODEL) or FILE_MODEL.match(name):  # an object, or a file naming one
            continue
        try:
            if Path(resolve_model(name)).is_dir():
                continue  # a folder or the packaged model: nothing to download
        except ModelLoadError:
            continue  # a missing folder: refused where it is loaded, with its own message
        if not is_generated_backbone(name):
            check_hub_model(name, spell(dest))


def check_numbers(options: dict[str, Any], spell: Callable[[str], str] = option_name, command: str | None = None) -> None:
    """The numeric options among `options` (option name -> value) within their declared ranges (`bench COMMAND`'s;
    a sweep's points too; their device is checked where they run, which may be another machine). An error names
    the option as `spell` does: a flag (--limit 0), or a keyword (limit=0)."""
    sep = " " if spell is option_name else "="
    for dest, rule in ranges(command).items():
        value = options.get(dest)
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, (int, float)) and not isinstance(item, bool):
                rule.check(spell(dest), item, sep)


DEVICE = re.compile(r"(cpu|cuda|mps|xpu)(:[0-9]{1,3})?")


def check_device(name: str, option: str = "--device") -> None:
    """A device name torch knows, and one this machine's torch can use (checked before any run row is written);
    an error names the option as the caller wrote it (`option`: --device, or the keyword device)."""
    said = f"{option} {name!r}" if option.startswith("--") else f"{option}={name!r}"
    if not DEVICE.fullmatch(name):
        raise ConfigError(f"{said} is not a device name; give cpu, cuda, cuda:N or mps")
    kind, _, index = name.partition(":")
    if kind == "cpu":
        if index not in ("", "0"):
            raise ConfigError(f"{said}: the CPU has no index; give cpu")
        return
    import torch

    if kind == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(f"{said}: this torch ({torch.__version__}) cannot use a CUDA GPU here; "
                              "use cpu, or install a CUDA build of torch")  # fmt: skip
        if index and int(index) >= torch.cuda.device_count():
            raise ConfigError(f"{said}: this machine has {torch.cuda.device_count()} CUDA GPU(s) "
                              f"(cuda:0 to cuda:{torch.cuda.device_count() - 1})")  # fmt: skip
        return
    backend = getattr(torch.backends, kind, None) if kind == "mps" else getattr(torch, kind, None)
    if backend is None or not backend.is_available():
        raise ConfigError(f"{said}: this torch ({torch.__version__}) cannot use {kind} here; use cpu")


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
