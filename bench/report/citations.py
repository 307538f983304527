"""What to cite for a table: the deduplicated bibliography of exactly the methods, suites, attacks, datasets and
significance procedures its scores rest on, plus lenbench itself.

Each method (`MethodSpec.cite`), suite (`SuiteMeta.cite`), attack family (`AttackFamily.cite`) and catalog dataset
(`DatasetInfo.cite`) declares its citations as keys of `references.bib` (shipped beside this module) or, for a
plug-in, as whole BibTeX entries. An MTEB task cites what mteb's own task metadata carries. This module only reads
those declarations; it never decides what a table holds (`for_runs` is given the runs a table shows).

Used by `bench results --cite` and the API's `citations()`; `tests/test_citations.py` fails when a registered
method, suite, attack or catalog dataset declares none, or names a key the file lacks.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

BIB_FILE = Path(__file__).with_name("references.bib")
LENBENCH = "lenbench"
BOOTSTRAP = "efron1993bootstrap"  # the paired bootstrap of every difference (bench.report.stats)
CORRECTIONS = {"holm": ("holm1979simple",), "bh": ("benjamini1995fdr",), "none": ()}
LEXICAL = {"bm25": ("robertson2009bm25",)}  # models scored without an encoder (bench.evaluate.models)
_ENTRY = re.compile(r"^@(\w+)\s*\{\s*([^,\s]+)\s*,", re.MULTILINE)


@dataclass(frozen=True)
class Citation:
    key: str
    bibtex: str
    cited_for: tuple[str, ...]  # what of the table needs it: "method simcse", "dataset scifact", ...


@lru_cache(maxsize=1)
def bibliography() -> dict[str, str]:
    """Every entry of references.bib by key (the file's comment lines are left out)."""
    text = BIB_FILE.read_text(encoding="utf-8")
    starts = [m.start() for m in _ENTRY.finditer(text)] + [len(text)]
    entries = {}
    for begin, end in zip(starts, starts[1:]):
        chunk = text[begin:end].strip()
        entries[_ENTRY.match(chunk).group(2)] = chunk
    return entries


def resolve(cite: str) -> tuple[str, str]:
    """(key, BibTeX) of one declared citation: a key of references.bib, or a whole entry starting with '@'."""
    cite = cite.strip()
    if cite.startswith("@"):
        match = _ENTRY.match(cite)
        if match is None:
            raise ValueError(f"citation {cite[:60]!r}: not a BibTeX entry (expected '@type{{key, ...}}')")
        return match.group(2), cite
    entries = bibliography()
    if cite not in entries:
        raise KeyError(f"citation key {cite!r} is not in {BIB_FILE.name}")
    return cite, entries[cite]


def method_cites(name: str) -> tuple[str, ...]:
    from bench.train.registry import get_method

    return tuple(get_method(name).cite)


def suite_cites(suite: str) -> tuple[str, ...]:
    from bench.evaluate.suites.metadata import suite_meta

    meta = suite_meta(suite)
    return tuple(meta.cite) if meta is not None else ()


def dataset_cites(suite: str, dataset: str) -> tuple[str, ...]:
    """A catalog dataset's citations; an MTEB task's from mteb's metadata (a whole entry); () for a local set."""
    from bench.data.catalog import CATALOG

    if suite.split(":", 1)[0] == "mteb":
        return _mteb_task_cites(dataset)
    info = CATALOG.get(dataset)
    return tuple(info.cite) if info is not None else ()


@lru_cache(maxsize=256)
def _mteb_task_cites(task: str) -> tuple[str, ...]:
    try:
        import mteb

        bibtex = (mteb.get_task(task).metadata.bibtex_citation or "").strip()
    except Exception:  # noqa: BLE001 - an unknown or renamed task: the suite's own citation still stands
        return ()
    return (bibtex,) if bibtex.startswith("@") else ()


def variant_cites(variant: str) -> tuple[str, ...]:
    """The attack family's citations of a stored variant ('elong-2', 'pad-start-2'); () for 'clean'."""
    if variant == "clean":
        return ()
    from bench.evaluate.attacks.registry import FAMILIES, describe_variant

    family = FAMILIES.get(describe_variant(variant).family or "")
    return tuple(family.cite) if family is not None else ()


def collect(*, methods: Iterable[str] = (), models: Iterable[str] = (), suites: Iterable[tuple[str, str]] = (),
            variants: Iterable[str] = (), correction: str | None = "holm") -> list[Citation]:  # fmt: skip
    """The citations of a table: lenbench, then each method, lexical model, suite (with its datasets: pairs of
    (suite, dataset)), attack, and the significance procedures when differences are shown (`correction` None: no
    differences). Each entry once, in that order, with everything it is cited for."""
    wanted: dict[str, list[str]] = {}
    texts: dict[str, str] = {}

    def add(cites: Sequence[str], why: str) -> None:
        for cite in cites:
            key, text = resolve(cite)
            texts.setdefault(key, text)
            reasons = wanted.setdefault(key, [])
            if why not in reasons:
                reasons.append(why)

    add((LENBENCH,), "lenbench")
    for method in dict.fromkeys(methods):
        add(method_cites(method), f"method {method}")
    for model in dict.fromkeys(models):
        add(LEXICAL.get(model, ()), f"model {model}")
    for suite, dataset in dict.fromkeys(suites):
        add(suite_cites(suite), f"suite {suite.split(':', 1)[0]}")
        add(dataset_cites(suite, dataset), f"dataset {dataset}")
    for variant in dict.fromkeys(variants):
        add(variant_cites(variant), f"attack {variant}")
    if correction is not None:
        add((BOOTSTRAP, *CORRECTIONS.get(correction, ())), "significance")
    return [Citation(key, texts[key], tuple(why)) for key, why in wanted.items()]


def for_runs(db: Any, run_ids: Iterable[int], *, correction: str | None = "holm") -> list[Citation]:
    """The citations of a table of these runs of a results database (results_db.ResultsDB): their methods and
    models as the run rows name them (not the tables' labels), and every suite, dataset and variant they scored."""
    from bench.train.registry import METHODS

    ids = [int(i) for i in run_ids]
    runs = db.runs()
    runs = runs[runs["id"].isin(ids)]
    scores = db.scores(ids)
    methods = [m for m in runs["method"] if isinstance(m, str) and METHODS.get(m) is not None]
    models = [m for m in runs["model"] if isinstance(m, str)]
    suites = list(zip(scores["suite"], scores["dataset"])) if len(scores) else []
    variants = list(scores["variant"]) if len(scores) else []
    return collect(methods=methods, models=models, suites=suites, variants=variants, correction=correction)


def render(citations: Sequence[Citation], *, reasons: bool = True) -> str:
    """The bibliography as BibTeX, each entry preceded by a comment saying what of the table it is cited for."""
    blocks = []
    for c in citations:
        head = f"% {', '.join(c.cited_for)}\n" if reasons else ""
        blocks.append(head + c.bibtex)
    return "\n\n".join(blocks) + "\n"
