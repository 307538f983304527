"""Method registry: names -> `MethodSpec`, filled from the `lenbench.methods` entry-point group.

Built-in methods (the `methods` package) and third-party ones register the same way: an entry point in that group
(lenbench's own are in pyproject.toml) names a `MethodSpec` or a zero-argument callable returning one or a list.
The harness therefore never imports a method module by name: `methods` depends on `bench`, never the reverse.
Entry points are read from installed package metadata, so a source checkout must be installed (`pip install -e .`).
"""

from __future__ import annotations

import logging

from bench.runtime.plugins import Registry
from bench.train.method import MethodSpec

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "lenbench.methods"

METHODS: Registry[MethodSpec] = Registry("method", MethodSpec, ENTRY_POINT_GROUP, log=log)
# The same targets as pyproject.toml's entry points: imported only when the installed metadata lacks one (a checkout
# newer than its install), so a new built-in method resolves without reinstalling.
BUILTIN = {
    "vanilla": "methods.vanilla:SPEC", "simcse": "methods.simcse:SPEC", "esimcse": "methods.esimcse:SPEC",
    "laser3-self": "methods.laser3:SPEC_SELF", "laser3-intra": "methods.laser3:SPEC_INTRA",
    "cocodr-pt": "methods.cocodr:SPEC", "crop": "methods.crop:SPEC", "paser": "methods.paser:SPEC",
    "mlm": "methods.mlm:SPEC", "delete-words": "methods.controls:SPEC_DELETE",
    "random-span": "methods.controls:SPEC_SPAN", "identity": "methods.controls:SPEC_IDENTITY",
    "eda-positive": "methods.controls:SPEC_EDA",
}
for _name, _target in BUILTIN.items():
    METHODS.add_lazy(_name, _target)


class UnknownMethodError(KeyError):
    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0])


def register(spec: MethodSpec) -> MethodSpec:
    """Add one spec; registering the same object twice is a no-op, a different one under a taken name an error."""
    return METHODS.register(spec)


def get_method(name: str) -> MethodSpec:
    """The method a name or alias stands for, or the one a method file defines (`./my_method.py`, `FILE:NAME`:
    bench.train.method_file; a file defining several needs `:NAME`)."""
    from bench.train import method_file

    if method_file.is_method_file(name):
        return method_file.one_spec(name, METHODS)
    spec = METHODS.get(name) or method_file.by_name(name)
    if spec is None:
        if not len(METHODS):
            raise UnknownMethodError(
                f"unknown method {name!r}: no methods are registered, because lenbench's `{ENTRY_POINT_GROUP}` entry "
                "points are not installed; install the checkout with `pip install -e .` (./setup.sh does)"
            )
        raise UnknownMethodError(f"unknown method {name!r}; known: {', '.join(all_names())} (see `bench methods`)")
    return spec


def methods_of(entry: str) -> list[MethodSpec]:
    """What one --method entry stands for: every method a file defines (`./my_method.py`), else the one method."""
    from bench.train import method_file

    if method_file.is_method_file(entry):
        return method_file.specs_of(entry, METHODS)
    return [get_method(entry)]


def all_methods() -> list[MethodSpec]:
    return METHODS.values()


def all_names() -> list[str]:
    return METHODS.all_names()
