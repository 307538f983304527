"""Plug-ins through entry points: the one loader behind every lenbench registry (methods, attack families).

An entry point in a registry's group names an object of the registry's type, or a zero-argument callable returning
one or a list of them. A plug-in that fails to load is a warning, never the end of the harness.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from importlib import metadata
from typing import TypeVar

T = TypeVar("T")


def objects_of(obj: object, kind: type[T]) -> list[T]:
    """What one entry point names, as a list of `kind` (a TypeError names the first object of another type)."""
    made = obj if isinstance(obj, kind) else obj()  # type: ignore[operator]
    made = list(made) if isinstance(made, (list, tuple)) else [made]
    bad = [m for m in made if not isinstance(m, kind)]
    if bad:
        raise TypeError(f"expected {kind.__name__}, got {type(bad[0]).__name__}")
    return made


def load_entry_points(group: str, kind: type[T], register: Callable[[T], object], what: str,
                      log: logging.Logger) -> None:  # fmt: skip
    """Register every object the entry points of `group` name; `what` names the registry in warnings."""
    for ep in metadata.entry_points(group=group):
        try:
            for obj in objects_of(ep.load(), kind):
                register(obj)
        except Exception as exc:  # noqa: BLE001 - a broken plugin must not take the harness down
            log.warning("%s plugin %s (%s) failed to load: %s", what, ep.name, ep.value, exc)
