"""A claim file checked whole at the scale it runs at, before anything trains: the file itself (bench.claim.spec),
then its runs (bench.claim.run.arms) and what their suites score.

    every test's dataset and variant     among those the scale's suites score (`sickr` under `sts:stsb`, `elong-5`
                                         when the scale elongates with `rand`, are refused)
    [claim] suite and metric             a suite the scale scores, and a metric it stores its scores under
                                         (`psi`: the position suite's index)
    the comparators                      distinct from the treatment and from each other once aliases and default
                                         hyper-parameters are resolved: two arms with one config hash are one model
                                         (`laser3` is `laser3-self`; `hp = ["m_mode=random"]` is its default)

Every fault is one line of the ClaimFileError raised, naming the file, the table and the key.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.claim.spec import ClaimFileError, ClaimSpec, read_claim
from bench.runtime.errors import ConfigError

PSI = "psi"  # the position suite's index, computed from its per-depth scores (bench.claim.position)


def load_checked(path: str | Path, scale: str) -> tuple[ClaimSpec, list[Any]]:
    """(the claim, its arms at `scale`), or a ClaimFileError naming every fault of the file at that scale."""
    from bench.claim.run import arms

    spec, faults = read_claim(path)
    if spec is None:
        raise ClaimFileError(faults)
    if scale not in spec.scales:
        raise ClaimFileError([*faults, f"{spec.path}: no scale {scale!r}; this claim has {', '.join(spec.scales)}"])
    try:
        arms_ = arms(spec, scale)
    except ConfigError as exc:
        raise ClaimFileError([*faults, *getattr(exc, "faults", [str(exc)])]) from None
    faults += same_models(spec, scale, arms_)
    faults += unscored(spec, scale, arms_[0].points[0].spec)
    if faults:
        raise ClaimFileError(faults)
    return spec, arms_


def same_models(spec: ClaimSpec, scale: str, arms_: list[Any]) -> list[str]:
    """A comparator that is the treatment, or another comparator, under another name (by config hash)."""
    faults, seen = [], {}
    for i, arm in enumerate(arms_):
        identity = arm.points[0].identity
        first = seen.setdefault(identity, arm)
        if first is arm:
            continue
        what = "the treatment" if first.role == "treatment" else f"comparator {first.name!r}"
        faults.append(f"{spec.path} [[comparator]] #{i}: {arm.name!r} trains and scores the same model as {what} at "
                      f"scale {scale} (the same method once aliases and default hp are resolved, the same settings); "
                      "compare against something else, or change its method or hp")  # fmt: skip
    return faults


def scored(run: Any) -> dict[str, tuple[list[str], list[str], tuple[str, ...]]]:
    """What a run's suites store: suite name -> (datasets, variants, metrics; () when the suite does not say)."""
    from bench.evaluate.runner import suite_variants
    from bench.evaluate.suites.metadata import suite_meta
    from bench.evaluate.suites.registry import parse_suite

    ctx = run.eval_settings().context()
    out: dict[str, tuple[list[str], list[str], tuple[str, ...]]] = {}
    for arg in run.settings.suite_args:
        suite, families = parse_suite(arg)
        sub = replace(ctx, attacked=bool(families), families=tuple(families) or ctx.families)
        meta = suite_meta(suite.name)
        datasets, variants, _ = out.get(suite.name, ([], [], ()))
        datasets += [d for d in suite.datasets() if d not in datasets]
        variants += [v for v in suite_variants(suite, sub) if v not in variants]
        out[suite.name] = (datasets, variants, meta.metrics if meta is not None else ())
    return out


def unscored(spec: ClaimSpec, scale: str, run: Any) -> list[str]:
    """The [claim] suite and metric, and each test's dataset and variant, that the scale's runs never score."""
    p, suites = spec.path, scored(run)
    where = f"at scale {scale} (suite {'+'.join(run.settings.suite_args)})"
    if spec.suite not in suites:
        return [f"{p} [claim] suite: {spec.suite!r} is not scored {where}; its scores are stored under "
                f"{', '.join(suites)}"]  # fmt: skip
    datasets, variants, metrics = suites[spec.suite]
    faults = []
    if spec.metric == PSI and spec.suite != "position":
        faults.append(f"{p} [claim] metric: 'psi' is the position suite's index; suite {spec.suite!r} has none")
    elif spec.metric != PSI and metrics and spec.metric not in metrics:
        faults.append(f"{p} [claim] metric: {spec.metric!r} is not a metric of suite {spec.suite!r} (it stores "
                      f"{', '.join(metrics)})")  # fmt: skip
    for i, test in enumerate(spec.tests):
        here = f"{p} [[test]] #{i + 1}"
        if test.dataset not in datasets:
            faults.append(f"{here} dataset: {test.dataset!r} is not scored {where}; it scores {', '.join(datasets)}")
        if spec.metric != PSI and test.variant not in variants:
            faults.append(f"{here} variant: {test.variant!r} is not scored {where}; it scores {', '.join(variants)}")
    return faults
