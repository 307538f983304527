"""A command's options as the fields of a dataclass (`RunSpec` for `bench run`, `EvalOptions` for `bench eval`), and
Python values turned into those fields as the command's parser would turn its argument strings into them.

Each field is declared with `option(default, convert, choices=..., many=..., joined=...)`; the parser of the command
takes its defaults from the dataclass, so the command line, a sweep point (TOML values) and the Python API
(`lenbench.run`, `lenbench.evaluate`) share one declaration. `typed_options` accepts what a Python caller writes:

- a number where the option is a number (numpy's too), True/False (or 1/0) for a flag;
- for a repeatable option (`many`: --suite, --hp, --attack) any list, tuple, set or generator, or one string;
- for a comma-separated option (`joined`: --method, --seeds, --elong, --report-to) one string, or a list, tuple, set
  or generator of items (a set in sorted order), joined with commas: `seeds=[0, 1, 2]` is `--seeds 0,1,2`;
- anything else given several values is refused (never "the last one wins": that would run something else).

A bad value is a ValueError that names the option as the parser would ("argument --limit: ...").
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from dataclasses import Field, field, fields
from typing import Any, Callable

FLAG = None  # `convert` of an option that is a flag (store_true)


class OptionValueError(argparse.ArgumentTypeError, ValueError):
    """A bad option value: argparse shows its message as it is, a sweep's RunSpec.from_options catches ValueError."""


def positive_int(text: Any) -> int:
    """--limit (`bench eval`, `bench run`, a sweep's options): a whole number >= 1 (0 or a negative would silently
    mean 'everything')."""
    try:
        value = int(text)
    except ValueError:
        raise OptionValueError(f"{text!r} is not a whole number; give a positive N, e.g. --limit 300") from None
    if value < 1:
        raise OptionValueError(f"{value} is not positive; give N >= 1 (leave --limit out for the whole dataset)")
    return value


def option(default: Any, convert: Callable[[Any], Any] | None = str, *, choices: tuple = (), many: bool = False,
           joined: bool = False) -> Any:  # fmt: skip
    """A command's option as a dataclass field: its default, how a value becomes the field's type (FLAG: a flag),
    allowed values, whether it may be repeated (argparse's append) and whether it is a comma-separated list."""
    meta = {"convert": convert, "choices": choices, "many": many, "joined": joined}
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=meta)
    return field(default=default, metadata=meta)


def flag_name(name: str) -> str:
    return "--" + name.replace("_", "-")


def _several(value: Any) -> list[Any] | None:
    """The items of a list, tuple, set (sorted) or generator; None for one value (a string is one value)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable) or isinstance(value, dict):
        return None
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    return list(value)


def _flag(name: str, value: Any) -> bool:
    if isinstance(value, bool) or (isinstance(value, int) and value in (0, 1)):
        return bool(value)
    if type(value).__name__ in ("bool_", "bool") and hasattr(value, "item"):  # numpy.bool_
        return bool(value)
    raise ValueError(f"argument {flag_name(name)}: a flag is True or False, got {value!r}")


def _convert(name: str, meta: dict[str, Any], item: Any) -> Any:
    try:
        item = meta["convert"](str(item))
    except ValueError as exc:
        detail = str(exc) if meta["convert"] is positive_int else f"invalid {meta['convert'].__name__} value: {str(item)!r}"
        raise ValueError(f"argument {flag_name(name)}: {detail}") from None
    if meta["choices"] and item not in meta["choices"]:
        allowed = ", ".join(map(repr, meta["choices"]))
        raise ValueError(f"argument {flag_name(name)}: invalid choice: {item!r} (choose from {allowed})")
    return item


def typed_options(cls: type, options: dict[str, Any], command: str) -> dict[str, Any]:
    """`options` (name -> Python value) as `cls`'s field values, converted and checked as `bench COMMAND`'s parser
    would (see the module docstring); an unknown name is a ValueError naming the command."""
    known: dict[str, Field] = {f.name: f for f in fields(cls)}
    values: dict[str, Any] = {}
    for name, value in options.items():
        if name not in known:
            raise ValueError(f"unrecognized arguments: {flag_name(name)} ({name!r} is not a `bench {command}` option)")
        meta = known[name].metadata
        if meta["convert"] is FLAG:
            values[name] = _flag(name, value)
            continue
        if value is None:  # as an option left out: its default
            continue
        items = _several(value)
        if items is not None and meta["joined"]:
            value, items = ",".join(str(i) for i in items), None
        if items is not None and not meta["many"]:  # never "the last one wins": that runs something else
            raise ValueError(f"argument {flag_name(name)}: one value expected, got {type(value).__name__} {value!r}")
        converted = [_convert(name, meta, item) for item in (items if items is not None else [value])]
        values[name] = converted if meta["many"] else converted[-1]
    from bench.experiment.option_ranges import check_numbers

    check_numbers(values)  # the ranges the command checks on its command line (a ConfigError, a ValueError)
    return values


def option_argv(cls: type, options: dict[str, Any]) -> list[str]:
    """`bench` command-line options for option name -> value (a flag when true, left out when false or None; a
    list repeats a repeatable option and joins a comma-separated one)."""
    known = {f.name: f for f in fields(cls)}
    out: list[str] = []
    for name, value in options.items():
        meta = known[name].metadata
        if meta["convert"] is FLAG:
            if value:
                out.append(flag_name(name))
            continue
        if value is None:
            continue
        items = _several(value)
        if items is not None and meta["joined"]:
            items = [",".join(str(i) for i in items)]
        for v in items if items is not None else [value]:
            out += [flag_name(name), str(v)]
    return out


def command_text(command: str, cls: type, options: dict[str, Any]) -> str:
    """The `bench COMMAND ...` line that gives `options` (name -> value; None and False left out), as Run.command
    records it (bench.experiment.record.command_line)."""
    from bench.experiment.record import command_line

    given = {k: v for k, v in options.items() if v is not None and v is not False}
    return command_line([command, *option_argv(cls, given)])
