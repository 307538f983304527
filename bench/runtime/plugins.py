"""Plug-ins through entry points, and the one registry type every lenbench registry is (methods, attack families,
suites): `Registry[T]`.

A registry maps names (and aliases) to objects of one type. Objects come from three places:

* lazy `module:object` entries: the built-ins, imported on first use (`add_lazy`);
* an entry-point group (`lenbench.methods`, `lenbench.attacks`, `lenbench.suites`): an entry point names an object
  of the registry's type, or a zero-argument callable returning one or a list of them. Entry points of lenbench's
  own distribution are built-ins too, and are read before any other distribution's;
* `register(obj)` in-process (tests, notebooks).

Every name and alias is a slug (`SLUG`: lower-case letters and digits, words joined by single '-' or '_', at most 64
characters): a name becomes a folder name (`--out/METHOD`) and a stored identifier, so it can hold no '/', '..' or
markup. A plug-in never replaces a built-in, nor another plug-in that registered the name first: it is refused
with a warning naming its entry point. A plug-in that fails to load (import error, wrong type, bad name) is a
warning, never the end of the harness. `freeze()` refuses every later registration.
"""

from __future__ import annotations

import importlib
import logging
import re
from collections.abc import Callable, Iterable, Iterator
from importlib import metadata
from typing import Generic, TypeVar

T = TypeVar("T")

SLUG = re.compile(r"[a-z0-9]+(?:[-_][a-z0-9]+)*")
SLUG_MAX = 64
OWN_DISTRIBUTION = "lenbench"


def is_slug(name: object) -> bool:
    return isinstance(name, str) and len(name) <= SLUG_MAX and SLUG.fullmatch(name) is not None


def check_slug(name: object, what: str) -> str:
    """`name` if it is a slug, else a ValueError saying what a name may hold."""
    if not is_slug(name):
        raise ValueError(f"{what} name {name!r} is not a slug: use lower-case letters and digits, words joined by "
                         f"'-' or '_' (at most {SLUG_MAX} characters; e.g. my-method)")  # fmt: skip
    return name  # type: ignore[return-value]


def objects_of(obj: object, kind: type[T]) -> list[T]:
    """What one entry point names, as a list of `kind` (a TypeError names the first object of another type)."""
    made = obj if isinstance(obj, kind) else obj()  # type: ignore[operator]
    made = list(made) if isinstance(made, (list, tuple)) else [made]
    bad = [m for m in made if not isinstance(m, kind)]
    if bad:
        raise TypeError(f"expected {kind.__name__}, got {type(bad[0]).__name__}")
    return made


class RegistrationRefused(ValueError):
    """A name that is taken (by a built-in, or by another plug-in first), or registration into a frozen registry."""


def _is_own(ep: metadata.EntryPoint) -> bool:
    dist = getattr(ep, "dist", None)
    return dist is not None and (dist.metadata["Name"] or "").lower() == OWN_DISTRIBUTION


class Registry(Generic[T]):
    """Names -> objects of `kind` (see the module docstring).

    what: the word for one object in messages ("method", "attack", "suite"); group: the entry-point group (None:
    none); name_of / aliases_of: how an object names itself.
    """

    def __init__(self, what: str, kind: type[T], group: str | None = None, *,
                 name_of: Callable[[T], str] = lambda obj: obj.name,  # type: ignore[attr-defined]
                 aliases_of: Callable[[T], Iterable[str]] = lambda obj: getattr(obj, "aliases", ()),
                 log: logging.Logger | None = None) -> None:  # fmt: skip
        self.what, self.kind, self.group = what, kind, group
        self.name_of, self.aliases_of = name_of, aliases_of
        self.log = log or logging.getLogger(__name__)
        self._objects: dict[str, T] = {}
        self._aliases: dict[str, str] = {}
        self._lazy: dict[str, str] = {}  # name -> "module:object", not imported yet
        self._targets: dict[str, str] = {}  # every add_lazy, imported or not
        self._builtin: set[str] = set()
        self._loaded = group is None
        self._frozen = False

    def fresh(self) -> "Registry[T]":
        """A registry of the same kind, group and lazy built-ins, nothing else registered yet, that reads its entry
        points again (tests)."""
        out = Registry(self.what, self.kind, self.group, name_of=self.name_of, aliases_of=self.aliases_of, log=self.log)
        for name, target in self._targets.items():
            out.add_lazy(name, target)
        return out

    # ------------------------------------------------------------------ filling
    def add_lazy(self, name: str, target: str) -> None:
        """A built-in `module:object`, imported (and type-checked) on first use."""
        self._check_open()
        check_slug(name, self.what)
        if name not in self._objects:
            self._lazy[name] = target
        self._targets[name] = target
        self._builtin.add(name)

    def register(self, obj: T, *, builtin: bool = False) -> T:
        """Add one object: the same object twice is a no-op; a name or alias taken by another object, an object of
        another type, or a name that is not a slug is a ValueError / TypeError (RegistrationRefused for a taken
        name)."""
        self._check_open()
        if not isinstance(obj, self.kind):
            raise TypeError(f"expected {self.kind.__name__}, got {type(obj).__name__}")
        name = check_slug(self.name_of(obj), self.what)
        aliases = [check_slug(a, f"{self.what} alias") for a in self.aliases_of(obj)]
        if name in self._lazy and builtin:
            self._resolve(name)  # a built-in named both lazily and by lenbench's own entry point: the same object
        if self._objects.get(name) is obj:
            return obj
        for taken in (name, *aliases):
            if taken in self._objects or taken in self._lazy or taken in self._aliases:
                owner = self._aliases.get(taken, taken)
                kind = "built-in" if owner in self._builtin else "registered"
                raise RegistrationRefused(f"{self.what} {taken!r} is already a {kind} {self.what}"
                                          + (f" name ({owner!r})" if owner != taken else ""))  # fmt: skip
        self._objects[name] = obj
        for alias in aliases:
            self._aliases[alias] = name
        if builtin:
            self._builtin.add(name)
        return obj

    def freeze(self) -> None:
        """No `register` / `add_lazy` from now on. The entry points are what an installation declared, so they are
        still read on first use (not here: freezing the method registry must not import every method, and torch)."""
        self._frozen = True

    def _check_open(self) -> None:
        if self._frozen:
            raise RegistrationRefused(f"the {self.what} registry is frozen: register {self.what}s before it is used")

    def load(self) -> None:
        """Read the entry-point group once: lenbench's own entry points first (built-ins), then every other."""
        if self._loaded:
            return
        self._loaded = True
        frozen, self._frozen = self._frozen, False  # a frozen registry still reads what was installed
        try:
            entry_points = list(metadata.entry_points(group=self.group))
            for ep in entry_points:
                if _is_own(ep):
                    self._load_entry_point(ep, builtin=True)
            for name in list(self._lazy):  # built-ins the installed metadata does not list (an older install)
                self._resolve(name)
            for ep in entry_points:
                if not _is_own(ep):
                    self._load_entry_point(ep, builtin=False)
        finally:
            self._frozen = frozen

    def _load_entry_point(self, ep: metadata.EntryPoint, builtin: bool) -> None:
        try:
            objects = objects_of(ep.load(), self.kind)
        except Exception as exc:  # noqa: BLE001 - a broken plugin must not take the harness down
            self.log.warning("%s plugin %s (%s) failed to load: %s", self.what, ep.name, ep.value, exc)
            return
        for obj in objects:
            try:
                self.register(obj, builtin=builtin)
            except RegistrationRefused as exc:
                self.log.warning("%s plugin %s (%s) refused: %s; a plug-in cannot replace it, give yours another name",
                                 self.what, ep.name, ep.value, exc)  # fmt: skip
            except (TypeError, ValueError) as exc:
                self.log.warning("%s plugin %s (%s) failed to load: %s", self.what, ep.name, ep.value, exc)

    def _resolve(self, name: str) -> None:
        target = self._lazy.pop(name, None)
        if target is None:
            return
        module, _, attr = target.partition(":")
        (obj,) = objects_of(getattr(importlib.import_module(module), attr), self.kind)
        frozen, self._frozen = self._frozen, False
        try:
            self.register(obj, builtin=True)
        finally:
            self._frozen = frozen

    # ------------------------------------------------------------------ reading
    def canonical(self, name: str) -> str:
        """The name an alias stands for (the name itself otherwise)."""
        self.load()
        return self._aliases.get(name, name)

    def get(self, name: str) -> T | None:
        """The object a name or alias stands for, or None."""
        key = self.canonical(name)
        self._resolve(key)
        return self._objects.get(key)

    def __getitem__(self, name: str) -> T:
        obj = self.get(name)
        if obj is None:
            raise KeyError(name)
        return obj

    def items(self) -> list[tuple[str, T]]:
        """(name, object) pairs, by name."""
        return [(self.name_of(obj), obj) for obj in self.values()]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def is_builtin(self, name: str) -> bool:
        return self.canonical(name) in self._builtin

    def names(self) -> list[str]:
        """Every registered name (aliases not included), sorted."""
        self.load()
        return sorted(set(self._objects) | set(self._lazy))

    def all_names(self) -> list[str]:
        """Names and aliases, sorted."""
        return sorted(set(self.names()) | set(self._aliases))

    def values(self) -> list[T]:
        """Every object, by name (lazy entries imported)."""
        for name in list(self._lazy):
            self._resolve(name)
        return [self._objects[n] for n in self.names()]

    def __iter__(self) -> Iterator[T]:
        return iter(self.values())

    def __len__(self) -> int:
        return len(self.names())

