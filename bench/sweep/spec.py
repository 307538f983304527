"""A sweep file (TOML) read into typed dataclasses; this module only reads and validates, it never runs anything.

    [sweep]                     name (default: the file's stem), description
    [grid]                      lists, crossed: one point per combination (method, seed, backbone, budget,
                                corpus, suite, or any other `bench run` option; plural names are accepted)
    [fixed]                     one value for every point: any `bench run` option (batch_size, max_len, lr, hp...)
    [[variant]]                 optional named cells crossed with the grid, each with its own options
    [[published]]               a paper's number for the cells whose options match `cell` (suite: the stored suite
                                name; dataset, default "average" over `average_of`; metric; value; source;
                                score_variant, default "clean")

Option names are `bench run`'s, with dashes or underscores (`max_len`, `eval-max-len`); a boolean is a flag.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.runtime.errors import ConfigError

# Plural spellings the issue and the papers' files use, mapped to `bench run`'s option names.
PLURALS = {"methods": "method", "seeds": "seed", "backbones": "backbone", "budgets": "budget", "corpora": "corpus",
           "suites": "suite"}
# Options the sweep sets itself on every point: a spec may not.
RESERVED = {"db", "resume", "out", "sweep", "sweep_point", "no_baseline", "no_progress", "func", "verbose", "command"}


@dataclass(frozen=True)
class Variant:
    name: str
    options: dict[str, Any]


@dataclass(frozen=True)
class Published:
    """One number from a paper, in lenbench's units (scores x100), for the cells whose options match `cell`.

    `suite` is the suite name the scores are stored under (beir, sts, knn...)."""

    cell: dict[str, Any]
    suite: str
    metric: str
    value: float
    dataset: str = "average"  # "average": the mean over `average_of` (or every dataset the suite scored)
    average_of: tuple[str, ...] = ()
    variant: str = "clean"
    source: str = ""


@dataclass
class SweepSpec:
    name: str
    path: Path
    description: str = ""
    grid: dict[str, list[Any]] = field(default_factory=dict)  # option -> values, in the file's order
    fixed: dict[str, Any] = field(default_factory=dict)
    variants: list[Variant] = field(default_factory=list)
    published: list[Published] = field(default_factory=list)


def run_option_names() -> dict[str, Any]:
    """`bench run`'s options: name -> its RunSpec field."""
    from bench.experiment.run_spec import run_options

    return run_options()


def _option(name: str, where: str, known: dict[str, Any]) -> str:
    dest = PLURALS.get(name, name).replace("-", "_")
    if dest in RESERVED:
        raise ConfigError(f"{where}: {name!r} is set by `bench sweep` itself; remove it from the file")
    if dest not in known:
        raise ConfigError(f"{where}: {name!r} is not a `bench run` option (see `bench run --help`)")
    return dest


def _average_of(value: Any, where: str) -> tuple[str, ...]:
    """A list of datasets, or the name of a published set: "beir14" (the 14 BEIR sets), "sts7" (STS12-16, STS-B, SICK-R)."""
    from bench.data.catalog import BEIR14, STS_SUITE

    named = {"beir14": tuple(BEIR14), "sts7": tuple(STS_SUITE)}
    if isinstance(value, str):
        if value not in named:
            raise ConfigError(f"{where}: average_of {value!r} is not a list of datasets nor one of {sorted(named)}")
        return named[value]
    return tuple(str(v) for v in value)


def load_spec(path: str | Path) -> SweepSpec:
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text())
    except FileNotFoundError:
        raise ConfigError(f"sweep file {p} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"sweep file {p} is not valid TOML: {exc}") from None
    unknown = set(data) - {"sweep", "grid", "fixed", "variant", "published"}
    if unknown:
        raise ConfigError(f"{p}: unknown table(s) {sorted(unknown)}; known: sweep, grid, fixed, variant, published")
    known = run_option_names()
    head = data.get("sweep", {})
    spec = SweepSpec(name=str(head.get("name", p.stem)), path=p, description=str(head.get("description", "")))
    if not spec.name or any(c.isspace() for c in spec.name):
        raise ConfigError(f"{p}: [sweep] name {spec.name!r} must be a non-empty word")
    for key, values in data.get("grid", {}).items():
        dest = _option(key, f"{p} [grid]", known)
        values = values if isinstance(values, list) else [values]
        if not values:
            raise ConfigError(f"{p} [grid]: {key!r} is an empty list; give at least one value")
        if len(set(map(repr, values))) != len(values):
            raise ConfigError(f"{p} [grid]: {key!r} repeats a value")
        spec.grid[dest] = values
    for key, value in data.get("fixed", {}).items():
        dest = _option(key, f"{p} [fixed]", known)
        if dest in spec.grid:
            raise ConfigError(f"{p}: {key!r} is both in [grid] and [fixed]; keep one")
        spec.fixed[dest] = value
    names = set()
    for i, table in enumerate(data.get("variant", [])):
        name = str(table.get("name", ""))
        if not name or name in names:
            raise ConfigError(f"{p} [[variant]] #{i + 1}: needs a unique name")
        names.add(name)
        opts = {_option(k, f"{p} variant {name!r}", known): v for k, v in table.items() if k != "name"}
        spec.variants.append(Variant(name, opts))
    for i, table in enumerate(data.get("published", [])):
        where = f"{p} [[published]] #{i + 1}"
        try:
            cell = {("variant" if k == "variant" else _option(k, where, known)): v for k, v in table.get("cell", {}).items()}
            spec.published.append(Published(
                cell=cell, suite=str(table["suite"]), metric=str(table["metric"]), value=float(table["value"]),
                dataset=str(table.get("dataset", "average")), average_of=_average_of(table.get("average_of", ()), where),
                variant=str(table.get("score_variant", "clean")), source=str(table.get("source", "")),
            ))
        except KeyError as exc:
            raise ConfigError(f"{where}: missing {exc.args[0]!r} (needs suite, metric, value)") from None
    if "method" not in spec.grid and "method" not in spec.fixed and not any("method" in v.options for v in spec.variants):
        raise ConfigError(f"{p}: no method given; add e.g. [grid] method = [\"simcse\", \"laser3-self\"]")
    return spec
