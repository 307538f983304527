"""Attack registry: family names -> `AttackFamily`, filled from the `lenbench.attacks` entry-point group, exactly as
methods fill theirs (`bench.train.registry`).

Built-in families (elong, pad, shuffle, and `len`, the needle suite's context lengths) register the same way as a
plug-in: an entry point in that group (lenbench's own are in pyproject.toml) names an `AttackFamily` or a
zero-argument callable returning one or a list. A new attack is one module defining its family plus one entry point.
Entry points are read from installed package metadata; a checkout whose metadata predates this group (installed
before it existed) still gets the built-ins, imported directly (`Registry.add_lazy`).

Reports and the leaderboard read variant order and labels from here (`describe_variant`, `order_variants`): a
stored variant name is looked up in every family; names no family knows sort after the known ones, alphabetically.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bench.evaluate.attacks.base import CLEAN, Attack, AttackFamily
from bench.runtime.errors import ConfigError
from bench.runtime.plugins import Registry

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "lenbench.attacks"
BUILTIN = {  # name -> "module:attribute", the same targets as pyproject.toml's entry points
    "elong": "bench.evaluate.attacks.elong:FAMILY",
    "pad": "bench.evaluate.attacks.pad:FAMILY",
    "shuffle": "bench.evaluate.attacks.shuffle:FAMILY",
    "len": "bench.evaluate.attacks.length:FAMILY",
    "depth": "bench.evaluate.attacks.depth:FAMILY",
}

FAMILIES: Registry[AttackFamily] = Registry("attack", AttackFamily, ENTRY_POINT_GROUP, log=log)
for _name, _target in BUILTIN.items():  # imported only when the installed metadata lacks lenbench's own entry points
    FAMILIES.add_lazy(_name, _target)


def register(family: AttackFamily) -> AttackFamily:
    """Add one family; the same object twice is a no-op, a different one under a taken name an error."""
    return FAMILIES.register(family)


def families() -> list[AttackFamily]:
    """Every registered family, in report order."""
    return sorted(FAMILIES.values(), key=lambda f: (f.order, f.name))


def get_family(name: str) -> AttackFamily:
    family = FAMILIES.get(name)
    if family is None or not family.selectable:
        known = ", ".join(f"@{f.name}" for f in families() if f.selectable)
        raise ConfigError(f"unknown attack family {name!r}; known: {known} (a plug-in registers more through the "
                          f"`{ENTRY_POINT_GROUP}` entry-point group)")  # fmt: skip
    return family


def attacks_for(family: str, params: Sequence[str] | None = None) -> list[Attack]:
    """The attacks one family runs: its defaults, or those `params` name (a bad one is a ConfigError)."""
    return get_family(family).attacks(params)


@dataclass(frozen=True)
class VariantInfo:
    """What a report needs to place a stored variant: its family (None: unknown), axis, x label and order."""

    name: str
    family: str | None
    axis: str
    x_label: str
    x: float | None
    order: tuple
    on_axis: bool = False  # a point of its family's ordered axis, joined by the curve's line (AttackFamily.ordered)


def describe_variant(variant: str) -> VariantInfo:
    if variant == CLEAN:
        return VariantInfo(CLEAN, None, "", "clean", 1.0, (-1, 0.0, ""), True)
    for rank, family in enumerate(families()):
        attack = family.parse_variant(variant)
        if attack is not None:
            return VariantInfo(variant, family.name, family.axis, attack.x_label, attack.x, (rank, attack.order, variant),
                               family.ordered and attack.x is not None)  # fmt: skip
    return VariantInfo(variant, None, "", variant, None, (len(FAMILIES) + 1, 0.0, variant))


def family_ordered(name: str) -> bool:
    """Whether a family's variants lie on an ordered axis (a curve joins them); an unknown family: no."""
    family = FAMILIES.get(name)
    return bool(family is not None and family.ordered)


def order_variants(variants: Iterable[str]) -> list[str]:
    """clean first, then each family in registry order, each family's variants in their display order."""
    return sorted(set(variants), key=lambda v: describe_variant(v).order)


def parse_attack_options(options: Sequence[str] | None) -> dict[str, list[str]]:
    """`--attack pad=start-2,end-4` (repeatable) -> {'pad': ['start-2', 'end-4']}; each parameter checked."""
    out: dict[str, list[str]] = {}
    for option in options or []:
        name, eq, params = option.partition("=")
        name = name.strip()
        if not eq or not name:
            raise ConfigError(f"--attack {option!r}: use FAMILY=PARAM[,PARAM] (e.g. --attack pad=start-2,end-2)")
        family = get_family(name)
        values = [p.strip() for p in params.split(",") if p.strip()] or list(family.defaults)
        family.attacks(values)  # a bad parameter: one clear error now, not after a model load
        out[name] = values
    return out
