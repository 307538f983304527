"""Suite strings -> suite objects.

    sts | sts:stsb,sts12      STS sets (Spearman x100)
    beir14 | beir:scifact     retrieval (nDCG@10, recall@100, MRR@10)
    knn | knn:agnews          kNN accuracy (k=10)
    mteb:STS12,SciFact        MTEB tasks run by the mteb package
    diag                      LA(SER)^3 length diagnostics on STS-B test
Any of them with '@elong' adds the elongation-attacked variants. Several suites: repeat --suite or join with '+'.
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
}


def register_suite(prefix: str, target: str) -> None:
    """Add a suite prefix (for plugins and tests): target is 'module:factory'."""
    SUITE_FACTORIES[prefix] = target


def split_suite_args(specs: str | Iterable[str]) -> list[str]:
    items = [specs] if isinstance(specs, str) else list(specs)
    return [part.strip() for item in items for part in item.split("+") if part.strip()]


def parse_suite(spec: str) -> tuple[Suite, bool]:
    """'beir:scifact@elong' -> (retrieval suite over scifact, attacked=True)."""
    text = spec.strip()
    attacked = False
    if text.endswith("@elong"):
        attacked, text = True, text[: -len("@elong")]
    elif "@" in text:
        raise SuiteError(f"suite {spec!r}: the only variant is '@elong' (e.g. sts@elong)")
    prefix, _, arg = text.partition(":")
    target = SUITE_FACTORIES.get(prefix)
    if target is None:
        raise SuiteError(f"unknown suite {spec!r}; known: {', '.join(sorted(SUITE_FACTORIES))} (see `bench eval --help`)")
    module, _, func = target.partition(":")
    factory: Any = getattr(importlib.import_module(module), func)
    return factory(arg or None), attacked


def parse_suites(specs: str | Iterable[str]) -> list[tuple[Suite, bool]]:
    parts = split_suite_args(specs)
    if not parts:
        raise SuiteError("no suite given; e.g. --suite sts or --suite beir:scifact@elong")
    return [parse_suite(p) for p in parts]
