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


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ConfigError(f"{where}: {safe(repr(value))} is not a number >= 0")
    return float(value)


def _comparator(table: Any, where: str, treatment: str) -> Comparator:
    if not isinstance(table, dict) or not isinstance(table.get("name"), str) or not NAME.fullmatch(table["name"]):
        raise ConfigError(f"{where}: needs name = \"...\" (one word: letters, digits, '.', '_', '-')")
    unknown = set(table) - {"name", "method", "hp", "role", "why"}
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}; known: name, method, hp, role, why")
    role = table.get("role", "control")
    if role not in ROLES:
        raise ConfigError(f"{where}: role {safe(repr(role))} is not one of {', '.join(ROLES)}")
    hp = table.get("hp", [])
    if not isinstance(hp, list) or not all(isinstance(h, str) and "=" in h and "." not in h.split("=")[0] for h in hp):
        raise ConfigError(f"{where}: hp must be a list of \"KEY=VALUE\" strings (the method's own keys), e.g. [\"m_mode=none\"]")
    method = table.get("method", table["name"])
    if table["name"] == treatment:
        raise ConfigError(f"{where}: comparator {table['name']!r} is the treatment itself; give it another name")
    return Comparator(table["name"], str(method), tuple(hp), role, str(table.get("why", "")))


def _test(table: Any, where: str) -> Test:
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: must be a table ([[test]])")
    missing = [k for k in ("dataset", "variant", "direction") if not isinstance(table.get(k), str)]
    if missing:
        raise ConfigError(f"{where}: needs {missing[0]} = \"...\" (dataset, variant, direction)")
    if table["direction"] not in DIRECTIONS:
        raise ConfigError(f"{where}: direction {safe(repr(table['direction']))} is not one of {', '.join(DIRECTIONS)}")
    unknown = set(table) - {"dataset", "variant", "direction", "min_effect", "margin"}
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}; known: dataset, variant, direction, min_effect, margin")
    if "margin" in table and table["direction"] in ("higher", "lower"):
        raise ConfigError(f"{where}: margin is for not-lower / not-higher; a higher / lower test takes min_effect")
    if "min_effect" in table and table["direction"] not in ("higher", "lower"):
        raise ConfigError(f"{where}: min_effect is for higher / lower; a not-lower / not-higher test takes margin")
    return Test(table["dataset"], table["variant"], table["direction"], _number(table.get("min_effect", 0.0), where),
                _number(table.get("margin", 0.0), where))  # fmt: skip


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
    p = Path(path)
    data = read_toml(p, "claim", "; the shipped claims are in claims/")
    unknown = set(data) - {"claim", "comparator", "test", "scale"}
    if unknown:
        raise ConfigError(f"{p}: unknown table(s) {sorted(unknown)}; known: claim, comparator, test, scale")
    head = data.get("claim")
    if not isinstance(head, dict):
        raise ConfigError(f"{p}: no [claim] table (name, treatment, seeds, suite, metric)")
    name = head.get("name", p.stem)
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise ConfigError(f"{p}: [claim] name {safe(repr(name))} must be one word of letters, digits, '.', '_' or '-'")
    for key in ("treatment", "suite", "metric"):
        if not isinstance(head.get(key), str) or not head[key]:
            raise ConfigError(f"{p}: [claim] needs {key} = \"...\"")
    seeds = head.get("seeds")
    if not isinstance(seeds, list) or len(set(seeds)) < 3 or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
        raise ConfigError(f"{p}: [claim] seeds must list 3 or more different whole numbers (seed variance needs 3)")
    comparators = [_comparator(t, f"{p} [[comparator]] #{i + 1}", head["treatment"]) for i, t in enumerate(data.get("comparator", []))]
    if not comparators:
        raise ConfigError(f"{p}: no [[comparator]]; a claim faces at least its reference row")
    if len({c.name for c in comparators}) != len(comparators):
        raise ConfigError(f"{p}: two comparators share a name")
    tests = [_test(t, f"{p} [[test]] #{i + 1}") for i, t in enumerate(data.get("test", []))]
    if not tests:
        raise ConfigError(f"{p}: no [[test]] (dataset, variant, direction)")
    scales, needs = _scales(data.get("scale"), p)
    alpha = head.get("alpha", 0.05)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 0.5:
        raise ConfigError(f"{p}: [claim] alpha must be a number in (0, 0.5), e.g. 0.05")
    return ClaimSpec(name=name, path=p, treatment=head["treatment"], suite=head["suite"], metric=head["metric"],
                     seeds=[int(s) for s in seeds], comparators=comparators, tests=tests, scales=scales, needs=needs,
                     statement=str(head.get("statement", "")), paper=str(head.get("paper", "")), alpha=float(alpha))  # fmt: skip
