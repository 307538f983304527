"""Method registry: names -> `MethodSpec`.

Built-in adapters register themselves when their module is imported (one module per method, listed in
BUILTIN_MODULES); third-party packages register through the `lenbench.methods` entry-point group, whose entry
points name either a `MethodSpec` or a zero-argument callable returning one (or a list of them).
"""

from __future__ import annotations

import importlib
import logging
from importlib import metadata

from methods.base import MethodSpec

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "lenbench.methods"
BUILTIN_MODULES = (
    "methods.vanilla",
    "methods.simcse",
    "methods.laser3",
    "methods.cocodr",
    "methods.crop",
    "methods.mlm",
    "methods.esimcse",
    "methods.paser",
)

_REGISTRY: dict[str, MethodSpec] = {}
_ALIASES: dict[str, str] = {}
_loaded = False


class UnknownMethodError(KeyError):
    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0])


def register(spec: MethodSpec) -> MethodSpec:
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
    for module in BUILTIN_MODULES:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            obj = ep.load()
            specs = obj if isinstance(obj, MethodSpec) else obj()
            for spec in specs if isinstance(specs, (list, tuple)) else [specs]:
                register(spec)
        except Exception as exc:  # noqa: BLE001 - a broken plugin must not take the harness down
            log.warning("method plugin %s (%s) failed to load: %s", ep.name, ep.value, exc)


def get_method(name: str) -> MethodSpec:
    _load()
    key = _ALIASES.get(name, name)
    if key not in _REGISTRY:
        raise UnknownMethodError(f"unknown method {name!r}; known: {', '.join(sorted(all_names()))} (see `bench methods`)")
    return _REGISTRY[key]


def all_methods() -> list[MethodSpec]:
    _load()
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


def all_names() -> list[str]:
    _load()
    return sorted(set(_REGISTRY) | set(_ALIASES))
