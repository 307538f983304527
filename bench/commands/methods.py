"""`bench methods`: the registered training methods with their paper and default hyper-parameters."""

from __future__ import annotations

import argparse
from dataclasses import MISSING, fields
from typing import Any


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "methods", help="list training methods (built-in and plugins) with paper and defaults",
        description="List every training method `bench run --method` accepts: the built-in ones and those other "
        "packages register through the `lenbench.methods` entry-point group (docs/howto/package-a-method.md), each "
        "with its aliases, paper and default hyper-parameters (override one with --hp METHOD.KEY=VALUE). A method "
        "file passed by path (`--method ./my_method.py`) needs no registration and is not listed.",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bench.train.registry import all_methods

    for spec in all_methods():
        aliases = f" (alias: {', '.join(spec.aliases)})" if spec.aliases else ""
        trains = "" if spec.trains else " [no training]"
        control = " [control]" if spec.control else ""
        print(f"{spec.name}{aliases}{trains}{control}")
        print(f"    {spec.summary}")
        if spec.claim:
            print(f"    tests: {spec.claim}")
        print(f"    paper: {spec.paper}")
        defaults = ", ".join(f"{k}={v!r}" for k, v in declared_defaults(spec.config_cls).items())
        print(f"    defaults: {defaults or '-'}")
    return 0


def declared_defaults(config_cls: type) -> dict[str, Any]:
    """The defaults as the config class declares them, without building a config: building one may check the
    machine (paser resolves WordNet), which belongs to training, not to a listing."""
    out: dict[str, Any] = {}
    for f in fields(config_cls):
        if f.default is not MISSING:
            out[f.name] = f.default
        elif f.default_factory is not MISSING:
            out[f.name] = f.default_factory()
    return out
