"""Method registry: names -> `MethodSpec`, filled from the `lenbench.methods` entry-point group.

Built-in methods (the `methods` package) and third-party ones register the same way: an entry point in that group
(lenbench's own are in pyproject.toml) names a `MethodSpec` or a zero-argument callable returning one or a list.
The harness therefore never imports a method module by name: `methods` depends on `bench`, never the reverse.
Entry points are read from installed package metadata, so a source checkout must be installed (`pip install -e .`).
"""

from __future__ import annotations

import logging
from bench.runtime.plugins import load_entry_points
from bench.train.method import MethodSpec

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "lenbench.methods"

_REGISTRY: dict[str, MethodSpec] = {}
_ALIASES: dict[str, str] = {}
_loaded = False


class UnknownMethodError(KeyError):
    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0])


def register(spec: MethodSpec) -> MethodSpec:
    """Add one spec; registering the same object twice is a no-op, a different one under a taken name an error."""
    if spec.name in _REGISTRY and _REGISTRY[spec.name] is not spec:
        raise ValueError(f"method {spec.name!r} is already registered")
    _REGISTRY[spec.name] = spec
    for alias in spec.aliases:
        _ALIASES[alias] = spec.name
    return spec


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    load_entry_points(ENTRY_POINT_GROUP, MethodSpec, register, "method", log)


def get_method(name: str) -> MethodSpec:
    _load()
    key = _ALIASES.get(name, name)
    if key not in _REGISTRY:
        if not _REGISTRY:
            raise UnknownMethodError(
                f"unknown method {name!r}: no methods are registered, because lenbench's `{ENTRY_POINT_GROUP}` entry "
                "points are not installed; install the checkout with `pip install -e .` (./setup.sh does)"
            )
        raise UnknownMethodError(f"unknown method {name!r}; known: {', '.join(sorted(all_names()))} (see `bench methods`)")
    return _REGISTRY[key]


def all_methods() -> list[MethodSpec]:
    _load()
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


def all_names() -> list[str]:
    _load()
    return sorted(set(_REGISTRY) | set(_ALIASES))
