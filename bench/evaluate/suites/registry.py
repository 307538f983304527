"""Suite strings -> suite objects.

    sts | sts:stsb,sts12      STS sets (Spearman x100)
    beir14 | beir:scifact     retrieval (nDCG@10, recall@100, MRR@10)
    knn | knn:agnews          kNN accuracy (k=10)
    mteb:STS12,SciFact        MTEB tasks run by the mteb package
    diag                      LA(SER)^3 length diagnostics on STS-B test
    needle                    passkey and needle retrieval at context lengths 64..1024 (LongEmbed-style)
Any of them with '@FAMILY[,FAMILY]' adds attacked variants: '@elong' (elongation), '@pad' (distractor padding),
'@shuffle' (sentence order), or a plug-in family (bench.evaluate.attacks.registry). Several suites: repeat --suite
or join with '+'.
Factories are imported lazily so `bench eval --suite sts` never imports mteb.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import Any

from bench.evaluate.suites.base import Suite, SuiteError

# prefix -> "module:factory"; factory(arg: str | None) -> Suite
SUITE_FACTORIES: dict[str, str] = {
    "sts": "bench.evaluate.suites.sts:make_suite",
    "beir": "bench.evaluate.suites.retrieval:make_suite",
    "beir14": "bench.evaluate.suites.retrieval:make_beir14",
    "knn": "bench.evaluate.suites.knn:make_suite",
    "mteb": "bench.evaluate.suites.mteb_suite:make_suite",
    "diag": "bench.evaluate.suites.diag:make_suite",
    "heldout": "bench.evaluate.suites.heldout:make_suite",  # constructed known-item task (bench run offline default)
    "needle": "bench.evaluate.suites.needle:make_suite",  # synthetic passkey / needle retrieval per context length
}


def register_suite(prefix: str, target: str) -> None:
    """Add a suite prefix (for plugins and tests): target is 'module:factory'."""
    SUITE_FACTORIES[prefix] = target


def split_suite_args(specs: str | Iterable[str]) -> list[str]:
    items = [specs] if isinstance(specs, str) else list(specs)
    return [part.strip() for item in items for part in item.split("+") if part.strip()]


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
    target = SUITE_FACTORIES.get(prefix)
    if target is None:
        raise SuiteError(f"unknown suite {spec!r}; known: {', '.join(sorted(SUITE_FACTORIES))} (see `bench eval --help`)")
    module, _, func = target.partition(":")
    factory: Any = getattr(importlib.import_module(module), func)
    return factory(arg or None), families


def parse_suites(specs: str | Iterable[str]) -> list[tuple[Suite, tuple[str, ...]]]:
    parts = split_suite_args(specs)
    if not parts:
        raise SuiteError("no suite given; e.g. --suite sts or --suite beir:scifact@elong")
    return [parse_suite(p) for p in parts]
