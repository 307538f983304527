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

import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.runtime.errors import ConfigError
from bench.runtime.terminal import safe

# Plural spellings the issue and the papers' files use, mapped to `bench run`'s option names.
PLURALS = {"methods": "method", "seeds": "seed", "backbones": "backbone", "budgets": "budget", "corpora": "corpus",
           "suites": "suite"}
# Options the sweep sets itself on every point: a spec may not.
RESERVED = {"db", "resume", "out", "sweep", "sweep_point", "no_baseline", "no_progress", "func", "verbose", "debug",
            "command", "estimate"}


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
    """`bench run`'s options: name -> its declaration (bench.experiment.options)."""
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
    """A list of datasets, or the name of a published set (`bench.data.catalog.NAMED_SETS`, e.g. the 14 BEIR sets)."""
    from bench.data.catalog import NAMED_SETS

    if isinstance(value, str):
        if value not in NAMED_SETS:
            raise ConfigError(f"{where}: average_of {value!r} is not a list of datasets nor one of {sorted(NAMED_SETS)}")
        return NAMED_SETS[value].members
    return tuple(str(v) for v in value)


# A sweep's name is a folder under runs/sweeps/ and a label in the database: one plain path component.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
SCALARS = (str, int, float, bool)
CONTROL = re.compile("[\x00-\x1f\x7f]")
TABLE_SHAPES = {"sweep": "table", "grid": "table", "fixed": "table", "variant": "array", "published": "array"}


def _check_strings(value: Any, where: str) -> None:
    """No control character (a NUL, an escape sequence, a newline) in any name or value of the file: each ends up in
    a command line, a folder name or a table."""
    if isinstance(value, str):
        if CONTROL.search(value):
            raise ConfigError(f"{where}: {safe(repr(value))} holds a control character (NUL, newline, escape...); remove it")
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_strings(key, where)
            _check_strings(item, f"{where} {key}")
    elif isinstance(value, list):
        for item in value:
            _check_strings(item, where)


def _check_shapes(data: dict[str, Any], p: Path) -> None:
    """Each table of the file has the shape the schema (module docstring) gives it, before anything reads it."""
    unknown = set(data) - set(TABLE_SHAPES)
    if unknown:
        raise ConfigError(f"{p}: unknown table(s) {sorted(unknown)}; known: sweep, grid, fixed, variant, published")
    for name, shape in TABLE_SHAPES.items():
        if name not in data:
            continue
        value = data[name]
        if shape == "table" and not isinstance(value, dict):
            raise ConfigError(f"{p}: {name} must be a table ([{name}] with key = value lines), not a {_kind(value)}")
        if shape == "array" and not (isinstance(value, list) and all(isinstance(t, dict) for t in value)):
            hint = f"write [[{name}]] (double brackets) for each one" if isinstance(value, dict) else f"use [[{name}]] tables"
            raise ConfigError(f"{p}: {name} must be an array of tables; {hint}")


def _kind(value: Any) -> str:
    return {dict: "table", list: "list", str: "string", bool: "boolean", int: "number", float: "number"}.get(type(value), type(value).__name__)


def _check_value(value: Any, dest: str, where: str, known: dict[str, Any], in_grid: bool = False) -> None:
    """One option value: a scalar, or (for an option that repeats, such as suite or hp) a list of scalars."""
    many = known[dest].many
    if isinstance(value, SCALARS):
        return
    if isinstance(value, list) and many and all(isinstance(v, SCALARS) for v in value):
        return
    if isinstance(value, list):
        shape = "a list of lists" if in_grid else "a list"
        raise ConfigError(f"{where}: {dest} = {safe(repr(value))}: {dest} takes one value per point, not {shape}"
                          + (f"; list its values once: {dest} = [\"a\", \"b\"]" if in_grid else ""))  # fmt: skip
    raise ConfigError(f"{where}: {dest} is a {_kind(value)}; give a string, number or boolean")


def _published_value(table: dict[str, Any], where: str) -> float:
    value = table.get("value")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{where}: value {safe(repr(value))} is not a number; give the paper's score, e.g. value = 76.3")
    if not math.isfinite(value):
        raise ConfigError(f"{where}: value {value} is not a finite number")
    return float(value)


def read_toml(path: Path, kind: str, missing_hint: str = "") -> dict[str, Any]:
    """The tables of a TOML file a user gives (`kind`: "sweep", "claim"), or one ConfigError line naming the file and
    what is wrong: missing (then `missing_hint`, e.g. where the shipped ones are), a folder, unreadable, not UTF-8,
    not TOML. A leading UTF-8 byte order mark (Windows editors write one) is accepted, as everywhere in lenbench."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise ConfigError(f"{kind} file {path} does not exist{missing_hint}") from None
    except IsADirectoryError:
        raise ConfigError(f"{kind} file {path} is a folder; give the .toml file") from None
    except OSError as exc:
        raise ConfigError(f"{kind} file {path} cannot be read ({exc.strerror or exc}); check its permissions") from None
    except UnicodeDecodeError as exc:
        byte = f"byte {exc.object[exc.start]:#04x} at {exc.start}"
        raise ConfigError(f"{kind} file {path} is not UTF-8 text ({byte}); save it as UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{kind} file {path} is not valid TOML: {exc}") from None


def load_spec(path: str | Path) -> SweepSpec:
    p = Path(path)
    data = read_toml(p, "sweep")
    _check_shapes(data, p)
    _check_strings(data, str(p))
    known = run_option_names()
    head = data.get("sweep", {})
    name = head.get("name", p.stem)
    if not isinstance(name, str) or not NAME.fullmatch(name) or name in (".", ".."):
        raise ConfigError(f"{p}: [sweep] name {safe(repr(name))} must be one word of letters, digits, '.', '_' or '-' (it names "
                          "the folder runs/sweeps/NAME); set [sweep] name = \"my-sweep\"")  # fmt: skip
    if not isinstance(head.get("description", ""), str):
        raise ConfigError(f"{p}: [sweep] description must be a string")
    spec = SweepSpec(name=name, path=p, description=str(head.get("description", "")))
    for key, values in data.get("grid", {}).items():
        dest = _option(key, f"{p} [grid]", known)
        values = values if isinstance(values, list) else [values]
        if not values:
            raise ConfigError(f"{p} [grid]: {key!r} is an empty list; give at least one value")
        for value in values:
            _check_value(value, dest, f"{p} [grid]", known, in_grid=True)
        if len(set(map(repr, values))) != len(values):
            raise ConfigError(f"{p} [grid]: {key!r} repeats a value")
        spec.grid[dest] = values
    for key, value in data.get("fixed", {}).items():
        dest = _option(key, f"{p} [fixed]", known)
        if dest in spec.grid:
            raise ConfigError(f"{p}: {key!r} is both in [grid] and [fixed]; keep one")
        _check_value(value, dest, f"{p} [fixed]", known)
        spec.fixed[dest] = value
    names = set()
    for i, table in enumerate(data.get("variant", [])):
        name = table.get("name", "")
        if not isinstance(name, str) or not name.strip() or name in names:
            raise ConfigError(f"{p} [[variant]] #{i + 1}: needs a unique name (a string)")
        names.add(name)
        opts = {_option(k, f"{p} variant {name!r}", known): v for k, v in table.items() if k != "name"}
        for dest, value in opts.items():
            _check_value(value, dest, f"{p} variant {name!r}", known)
        spec.variants.append(Variant(name, opts))
    for i, table in enumerate(data.get("published", [])):
        where = f"{p} [[published]] #{i + 1}"
        missing = [k for k in ("suite", "metric", "value") if k not in table]
        if missing:
            raise ConfigError(f"{where}: missing {missing[0]!r} (needs suite, metric, value)")
        cell = table.get("cell", {})
        if not isinstance(cell, dict):
            raise ConfigError(f"{where}: cell must be a table (cell = {{ method = \"simcse\" }}), not a {_kind(cell)}")
        for key in ("suite", "metric", "dataset", "source", "score_variant"):
            if key in table and not isinstance(table[key], str):
                raise ConfigError(f"{where}: {key} must be a string, not a {_kind(table[key])}")
        average_of = table.get("average_of", ())
        if not isinstance(average_of, (str, list, tuple)) or isinstance(average_of, list) and not all(isinstance(d, str) for d in average_of):
            from bench.data.catalog import NAMED_SETS

            raise ConfigError(f"{where}: average_of must be a list of dataset names or one of {' / '.join(map(repr, NAMED_SETS))}")
        cell = {("variant" if k == "variant" else _option(k, where, known)): v for k, v in cell.items()}
        spec.published.append(Published(
            cell=cell, suite=table["suite"], metric=table["metric"], value=_published_value(table, where),
            dataset=table.get("dataset", "average"), average_of=_average_of(average_of, where),
            variant=table.get("score_variant", "clean"), source=table.get("source", ""),
        ))  # fmt: skip
    if "method" not in spec.grid and "method" not in spec.fixed and not any("method" in v.options for v in spec.variants):
        raise ConfigError(f"{p}: no method given; add e.g. [grid] method = [\"simcse\", \"laser3-self\"]")
    return spec
