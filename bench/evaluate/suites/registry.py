"""Suite strings -> suite objects.

    sts | sts:stsb,sts12      STS sets (Spearman x100)
    beir14 | beir:scifact     retrieval (nDCG@10, recall@100, MRR@10)
    knn | knn:agnews          kNN accuracy (k=10)
    mteb:STS12,SciFact        MTEB tasks run by the mteb package
    diag                      LA(SER)^3 length diagnostics on STS-B test
    needle                    passkey and needle retrieval at context lengths 64..1024 (LongEmbed-style)
A suite string's prefix is a registered suite (`bench.evaluate.suites.metadata.SUITES`: the built-ins and the
`lenbench.suites` plug-ins) or a named set (`bench.data.catalog.NAMED_SETS`: `beir14`, `sts7`), which its suite
scores whole. Any of them with '@FAMILY[,FAMILY]' adds attacked variants: '@elong' (elongation), '@pad'
(distractor padding), '@shuffle' (sentence order), or a plug-in family (bench.evaluate.attacks.registry). Several
suites: repeat --suite or join with '+'.
Factories are imported lazily so `bench eval --suite sts` never imports mteb.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import Any

from bench.data.catalog import NAMED_SETS
from bench.evaluate.suites.base import Suite, SuiteError
from bench.evaluate.suites import metadata
from bench.evaluate.suites.metadata import SuiteMeta


def register_suite(meta: SuiteMeta) -> SuiteMeta:
    """Add a suite in-process (tests, notebooks; an installed plug-in uses the `lenbench.suites` entry points)."""
    return metadata.SUITES.register(meta)


def split_suite_args(specs: str | Iterable[str]) -> list[str]:
    items = [specs] if isinstance(specs, str) else list(specs)
    return [part.strip() for item in items for part in item.split("+") if part.strip()]


def attacked_families(suite_args: list[str]) -> set[str]:
    """The attack families the suites run: each `@FAMILY` suffix, and elong for `diag`, which always attacks."""
    used: set[str] = set()
    for spec in (part for arg in suite_args for part in arg.split("+")):
        text, _, suffix = spec.partition("@")
        used |= {name.strip() for name in suffix.split(",") if name.strip()}
        if text.strip().partition(":")[0] == "diag":
            used.add("elong")
    return used


def parse_families(spec: str, suffix: str) -> tuple[str, ...]:
    """'elong,pad' -> ('elong', 'pad'); each a registered, selectable attack family."""
    from bench.evaluate.attacks import families, get_family
    from bench.runtime.errors import ConfigError

    names = tuple(dict.fromkeys(n.strip() for n in suffix.split(",") if n.strip()))
    if not names:
        known = ", ".join(f.name for f in families() if f.selectable)
        raise SuiteError(f"suite {spec!r}: name an attack family after '@' ({known}; e.g. sts@elong or beir:scifact@elong,pad)")
    for name in names:
        try:
            get_family(name)
        except ConfigError as exc:
            raise SuiteError(f"suite {spec!r}: {exc}") from None
    return names


def parse_suite(spec: str) -> tuple[Suite, tuple[str, ...]]:
    """'beir:scifact@elong,pad' -> (retrieval suite over scifact, ('elong', 'pad')); no suffix: ()."""
    text, at, suffix = spec.strip().partition("@")
    families = parse_families(spec, suffix) if at else ()
    prefix, _, arg = text.partition(":")
    named = NAMED_SETS.get(prefix)
    if named is not None:
        if arg:
            raise SuiteError(f"{prefix} takes no datasets (got {arg!r}); use {named.suite}:{arg} for a selection")
        prefix, arg = named.suite, ",".join(named.members)
    meta = metadata.SUITES.get(prefix)
    if meta is None:
        known = ", ".join(sorted({*metadata.SUITES.names(), *NAMED_SETS}))
        raise SuiteError(f"unknown suite {spec!r}; known: {known} (see `bench eval --help`)")
    module, _, func = meta.factory.partition(":")
    factory: Any = getattr(importlib.import_module(module), func)
    return factory(arg or None), families


def parse_suites(specs: str | Iterable[str]) -> list[tuple[Suite, tuple[str, ...]]]:
    parts = split_suite_args(specs)
    if not parts:
        raise SuiteError("no suite given; e.g. --suite sts or --suite beir:scifact@elong")
    return [parse_suite(p) for p in parts]
