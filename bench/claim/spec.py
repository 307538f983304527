"""A claim file (TOML, `claims/NAME.toml`) read into typed dataclasses; this module only reads and validates.

    [claim]          name (default: the file's stem), paper, statement, treatment (a method), seeds (3 or more),
                     suite (where the scores are stored, e.g. "sts"), metric (e.g. "spearman"; "psi" for the
                     position sweep's index), alpha (default 0.05)
    [[comparator]]   name, role ("reference", "baseline" or "control"), why (what it rules out); method (default:
                     the name) and hp (["KEY=VALUE", ...], the method's hyper-parameters) when the comparator is a
                     method with other settings (laser3-self without elongation: method = "laser3-self",
                     hp = ["m_mode=none"])
    [[test]]         dataset, variant, direction (higher | lower | not-lower | not-higher), min_effect (higher/lower:
                     the smallest difference that counts) or margin (not-lower/not-higher); with metric "psi" (suite
                     "position") the variant names the test only (e.g. "psi"): the index is computed from every depth
    [scale.NAME]     `bench run` options shared by every run at that scale (backbone, corpus, budget, batch_size,
                     max_len, lr, suite, elong, limit...), and `needs`: what it needs that is not on this machine
                     (a GPU, a hub backbone, a download), printed before it runs

Every comparison is (comparator, test): the treatment minus the comparator on that dataset and variant, in the
test's direction. The family corrected together is all of them (bench.report.verdicts).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.report.verdicts import DIRECTIONS, threshold_of
from bench.runtime.errors import ConfigError
from bench.runtime.terminal import safe
from bench.sweep.spec import read_toml

ROLES = ("reference", "baseline", "control")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
RESERVED_OPTIONS = {"method", "seed", "seeds", "hp", "db", "out", "resume", "sweep", "sweep_point", "no_baseline"}


@dataclass(frozen=True)
class Comparator:
    name: str
    method: str
    hp: tuple[str, ...] = ()
    role: str = "control"
    why: str = ""


@dataclass(frozen=True)
class Test:
    dataset: str
    variant: str
    direction: str
    min_effect: float = 0.0
    margin: float = 0.0

    @property
    def threshold(self) -> float:
        return threshold_of(self.direction, self.min_effect, self.margin)

    @property
    def label(self) -> str:
        return f"{self.dataset} {self.variant}"


@dataclass
class ClaimSpec:
    name: str
    path: Path
    treatment: str
    suite: str
    metric: str
    seeds: list[int]
    comparators: list[Comparator]
    tests: list[Test]
    scales: dict[str, dict[str, Any]]
    needs: dict[str, str] = field(default_factory=dict)
    statement: str = ""
    paper: str = ""
    alpha: float = 0.05

    @property
    def family_size(self) -> int:
        return len(self.comparators) * len(self.tests)


MAX_EFFECT = 200.0  # scores are x100: no difference of two of them is larger


class ClaimFileError(ConfigError):
    """Every fault found in a claim file, one line each (`faults`), so a file is fixed in one pass."""

    def __init__(self, faults: list[str]):
        self.faults = list(faults)
        super().__init__("\n".join(self.faults))


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_EFFECT:
        raise ConfigError(f"{where}: {safe(repr(value))} is not a number from 0 to {MAX_EFFECT:g} (scores are x100)")
    return float(value)


def _comparator(table: Any, where: str, treatment: str) -> Comparator:
    if not isinstance(table, dict) or not isinstance(table.get("name"), str) or not NAME.fullmatch(table["name"]):
        raise ConfigError(f"{where} name: needs name = \"...\" (one word: letters, digits, '.', '_', '-')")
    unknown = set(table) - {"name", "method", "hp", "role", "why"}
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}; known: name, method, hp, role, why")
    role = table.get("role", "control")
    if role not in ROLES:
        raise ConfigError(f"{where} role: {safe(repr(role))} is not one of {', '.join(ROLES)}")
    hp = table.get("hp", [])
    if not isinstance(hp, list) or not all(isinstance(h, str) and "=" in h and "." not in h.split("=")[0] for h in hp):
        raise ConfigError(f"{where} hp: must be a list of \"KEY=VALUE\" strings (the method's own keys), e.g. [\"m_mode=none\"]")
    method = table.get("method", table["name"])
    if not isinstance(method, str) or not method:
        raise ConfigError(f"{where} method: {safe(repr(method))} is not a method name (see `bench methods`)")
    if table["name"] == treatment:
        raise ConfigError(f"{where} name: comparator {table['name']!r} is the treatment itself; give it another name")
    return Comparator(table["name"], method, tuple(hp), role, str(table.get("why", "")))


def _test(table: Any, where: str) -> Test:
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: must be a table ([[test]])")
    missing = [k for k in ("dataset", "variant", "direction") if not isinstance(table.get(k), str)]
    if missing:
        raise ConfigError(f"{where} {missing[0]}: needs {missing[0]} = \"...\" (dataset, variant, direction)")
    if table["direction"] not in DIRECTIONS:
        raise ConfigError(f"{where} direction: {safe(repr(table['direction']))} is not one of {', '.join(DIRECTIONS)}")
    unknown = set(table) - {"dataset", "variant", "direction", "min_effect", "margin"}
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}; known: dataset, variant, direction, min_effect, margin")
    if "margin" in table and table["direction"] in ("higher", "lower"):
        raise ConfigError(f"{where} margin: margin is for not-lower / not-higher; a higher / lower test takes min_effect")
    if "min_effect" in table and table["direction"] not in ("higher", "lower"):
        raise ConfigError(f"{where} min_effect: min_effect is for higher / lower; a not-lower / not-higher test takes margin")
    return Test(table["dataset"], table["variant"], table["direction"],
                _number(table.get("min_effect", 0.0), f"{where} min_effect"),
                _number(table.get("margin", 0.0), f"{where} margin"))  # fmt: skip


def _seeds(seeds: Any, p: Path) -> tuple[list[int], list[str]]:
    """(the seeds, the faults of the list); with a fault, the different whole numbers listed (or [0]), so the rest
    of the file is still checked."""
    whole = [s for s in seeds if isinstance(s, int) and not isinstance(s, bool)] if isinstance(seeds, list) else []
    usable = list(dict.fromkeys(whole)) or [0]
    if not isinstance(seeds, list) or len(whole) != len(seeds):
        return usable, [f"{p} [claim] seeds: must list 3 or more different whole numbers (seed variance needs 3)"]
    twice = [s for s in usable if seeds.count(s) > 1]
    if twice:
        return usable, [f"{p} [claim] seeds: {', '.join(map(str, twice))} listed more than once; each seed is one "
                        "run and a repeated one would count that run twice: list 3 or more different seeds"]  # fmt: skip
    if len(seeds) < 3:
        return usable, [f"{p} [claim] seeds: must list 3 or more different whole numbers (seed variance needs 3)"]
    return [int(s) for s in seeds], []


def _collect(faults: list[str], make: Any, *args: Any) -> Any:
    """make(*args), or None with its ConfigError kept as one more fault."""
    try:
        return make(*args)
    except ConfigError as exc:
        faults.extend(getattr(exc, "faults", [str(exc)]))
        return None


def _distinct_tests(tests: list[Test | None], p: Path) -> list[str]:
    seen: dict[tuple[str, str], int] = {}
    faults = []
    for i, t in enumerate(tests):
        if t is None:
            continue
        first = seen.setdefault((t.dataset, t.variant), i)
        if first != i:
            faults.append(f"{p} [[test]] #{i + 1}: tests {t.label} again (as [[test]] #{first + 1} does); each dataset "
                          "and variant is tested once (a repeated test only widens every interval)")  # fmt: skip
    return faults


def _scales(data: Any, p: Path) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    from bench.sweep.spec import run_option_names

    if not isinstance(data, dict) or not data:
        raise ConfigError(f"{p}: no [scale.NAME] table; give at least [scale.cpu] with its `bench run` options")
    known = run_option_names()
    scales, needs = {}, {}
    for name, table in data.items():
        if not isinstance(table, dict):
            raise ConfigError(f"{p}: scale.{name} must be a table of `bench run` options")
        options = {}
        for key, value in table.items():
            if key == "needs":
                needs[name] = str(value)
                continue
            dest = key.replace("-", "_")
            if dest in RESERVED_OPTIONS:
                raise ConfigError(f"{p} scale.{name}: {key!r} is set by the claim itself (treatment, comparators, seeds)")
            if dest not in known:
                raise ConfigError(f"{p} scale.{name}: {key!r} is not a `bench run` option (see `bench run --help`)")
            options[dest] = value
        scales[name] = options
    return scales, needs


def load_claim(path: str | Path) -> ClaimSpec:
    """The claim file read and checked as a file (its scales against the suites they score: bench.claim.check);
    every fault is one line of the ClaimFileError raised."""
    spec, faults = read_claim(path)
    if faults or spec is None:
        raise ClaimFileError(faults)
    return spec


def read_claim(path: str | Path) -> tuple[ClaimSpec | None, list[str]]:
    """(the claim, every fault found): a table with a fault is left out of the claim, the rest is read on, so one
    pass names them all; None when the file has no claim to speak of (not TOML, no [claim])."""
    p = Path(path)
    data = read_toml(p, "claim", "; the shipped claims are in claims/")
    faults: list[str] = []
    unknown = set(data) - {"claim", "comparator", "test", "scale"}
    if unknown:
        faults.append(f"{p}: unknown table(s) {sorted(unknown)}; known: claim, comparator, test, scale")
    head = data.get("claim")
    if not isinstance(head, dict):
        return None, [*faults, f"{p}: no [claim] table (name, treatment, seeds, suite, metric)"]
    name = head.get("name", p.stem)
    if not isinstance(name, str) or not NAME.fullmatch(name):
        faults.append(f"{p} [claim] name: {safe(repr(name))} must be one word of letters, digits, '.', '_' or '-'")
    for key in ("treatment", "suite", "metric"):
        if not isinstance(head.get(key), str) or not head[key]:
            faults.append(f"{p} [claim] {key}: needs {key} = \"...\"")
    treatment = head.get("treatment") if isinstance(head.get("treatment"), str) else ""
    seeds, seed_faults = _seeds(head.get("seeds"), p)
    faults += seed_faults
    tables = data.get("comparator", [])
    comparators = [_collect(faults, _comparator, t, f"{p} [[comparator]] #{i + 1}", treatment)
                   for i, t in enumerate(tables if isinstance(tables, list) else [tables])]  # fmt: skip
    if not comparators:
        faults.append(f"{p}: no [[comparator]]; a claim faces at least its reference row")
    names = [c.name for c in comparators if c is not None]
    for n in sorted({n for n in names if names.count(n) > 1}):
        faults.append(f"{p} [[comparator]] name: {n!r} names two comparators; give each its own name")
    tables = data.get("test", [])
    tests = [_collect(faults, _test, t, f"{p} [[test]] #{i + 1}")
             for i, t in enumerate(tables if isinstance(tables, list) else [tables])]  # fmt: skip
    if not tests:
        faults.append(f"{p}: no [[test]] (dataset, variant, direction)")
    faults += _distinct_tests(tests, p)
    scales, needs = _collect(faults, _scales, data.get("scale"), p) or ({}, {})
    alpha = head.get("alpha", 0.05)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 0.5:
        faults.append(f"{p} [claim] alpha: must be a number in (0, 0.5), e.g. 0.05")
        alpha = 0.05
    if any(not isinstance(head.get(k), str) or not head[k] for k in ("treatment", "suite", "metric")) or not scales:
        return None, faults
    spec = ClaimSpec(name=name if isinstance(name, str) else p.stem, path=p, treatment=head["treatment"],
                     suite=head["suite"], metric=head["metric"], seeds=seeds,
                     comparators=[c for c in comparators if c is not None], tests=[t for t in tests if t is not None],
                     scales=scales, needs=needs, statement=str(head.get("statement", "")), paper=str(head.get("paper", "")),
                     alpha=float(alpha))  # fmt: skip
    return spec, faults
