"""Hyper-parameter validation shared by every method config: type (from the dataclass annotation) and range
(declared with `hp(...)`), checked by `MethodSpec.config_from` before anything loads, so `--hp simcse.temperature=abc`
or `=0` is one clear error at the command line instead of a traceback after the model has loaded.

    @dataclass
    class SimcseConfig:
        temperature: float = hp(0.05, gt=0)
        pooling: str = hp("mean", choices=("mean", "cls"))

Types understood: bool, int, float (an int is accepted and stored as float; NaN and inf are not), str, and
`X | None` (None, JSON null, allowed). A field without `hp` gets its type checked only.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Sequence
from typing import Any

RANGE_KEY = "lenbench_range"


def hp(
    default: Any,
    *,
    gt: float | None = None,
    ge: float | None = None,
    lt: float | None = None,
    le: float | None = None,
    choices: Sequence[Any] | None = None,
) -> Any:
    """A dataclass field with its valid range (open bounds gt/lt, closed ge/le) or its allowed values."""
    bounds = {k: v for k, v in (("gt", gt), ("ge", ge), ("lt", lt), ("le", le)) if v is not None}
    rule = {"bounds": bounds, "choices": tuple(choices) if choices is not None else None}
    return dataclasses.field(default=default, metadata={RANGE_KEY: rule})


def _type_name(hint: Any) -> str:
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args)
    names = {type(None): "null", bool: "true or false", int: "an integer", float: "a finite number", str: "a string"}
    return names.get(hint, getattr(hint, "__name__", str(hint)))


def coerce(value: Any, hint: Any) -> tuple[bool, Any]:
    """(value fits the annotation, the value as stored): an int for a float field becomes a float."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        for arg in typing.get_args(hint):
            ok, out = coerce(value, arg)
            if ok:
                return True, out
        return False, value
    if hint is type(None):
        return value is None, value
    if hint is bool:
        return isinstance(value, bool), value
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool), value
    if hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return True, float(value)
        return False, value
    if hint is str:
        return isinstance(value, str), value
    return True, value  # a type this checker does not know: the config's own __post_init__ decides


def check_types(method: str, config_cls: type, overrides: dict[str, Any]) -> dict[str, Any]:
    """The overrides with their types checked against the config's annotations (ints for floats made floats)."""
    hints = typing.get_type_hints(config_cls)
    defaults = {f.name: f.default for f in dataclasses.fields(config_cls)}
    out = {}
    for name, value in overrides.items():
        ok, stored = coerce(value, hints.get(name, Any))
        if not ok:
            raise ValueError(
                f"hyper-parameter {method}.{name}={value!r}: must be {_type_name(hints[name])}, got {type(value).__name__} "
                f"(default {defaults.get(name)!r}; e.g. --hp {method}.{name}={_example(defaults.get(name))})"
            )
        out[name] = stored
    return out


def check_ranges(method: str, config: Any) -> None:
    """Every field declared with `hp(...)` within its bounds / among its choices."""
    for f in dataclasses.fields(config):
        rule = f.metadata.get(RANGE_KEY)
        value = getattr(config, f.name)
        if rule is None or value is None:
            continue
        if rule["choices"] is not None and value not in rule["choices"]:
            raise ValueError(f"hyper-parameter {method}.{f.name}={value!r}: must be one of {list(rule['choices'])} (default {f.default!r})")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            for op, bound in rule["bounds"].items():
                ok = {"gt": value > bound, "ge": value >= bound, "lt": value < bound, "le": value <= bound}[op]
                if not ok:
                    raise ValueError(f"hyper-parameter {method}.{f.name}={value!r}: must be {describe(rule['bounds'])} (default {f.default!r})")


def describe(bounds: dict[str, float]) -> str:
    words = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}
    return " and ".join(f"{words[op]} {bound:g}" for op, bound in bounds.items())


def _example(default: Any) -> str:
    return "null" if default is None else str(default).lower() if isinstance(default, bool) else str(default)
