"""Running a claim at one scale: its runs are sweep points (the treatment and each comparator, at every seed; an
untrained comparator once), run with `bench sweep`'s machinery, so a run that exists (by its config hash, whoever
ran it) is reused and only the missing ones train. Then each comparison's runs are read back and judged
(`bench.report.verdicts`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.claim.items import items_of
from bench.claim.spec import ClaimSpec, Comparator
from bench.report import stats
from bench.report.verdicts import MISSING, Comparison, Verdict, verdicts
from bench.runtime.errors import ConfigError
from bench.sweep.points import Point, expand
from bench.sweep.spec import SweepSpec, Variant


@dataclass(frozen=True)
class Arm:
    """The treatment or one comparator: a method with its hyper-parameters, and its points (one per seed)."""

    name: str
    role: str
    points: tuple[Point, ...]
    trains: bool


def sweep_name(spec: ClaimSpec, scale: str) -> str:
    return f"claim-{spec.name}-{scale}"


def arms(spec: ClaimSpec, scale: str) -> list[Arm]:
    """The treatment first, then the comparators in the file's order."""
    from bench.train.registry import UnknownMethodError, get_method

    if scale not in spec.scales:
        raise ConfigError(f"{spec.path}: no scale {scale!r}; this claim has {', '.join(spec.scales)}")
    out = []
    treatment = Comparator(spec.treatment, spec.treatment, (), "treatment")
    for c in [treatment, *spec.comparators]:
        try:
            method = get_method(c.method)
        except UnknownMethodError as exc:
            raise ConfigError(f"{spec.path}: comparator {c.name!r}: {exc}") from None
        seeds = spec.seeds if method.trains else spec.seeds[:1]  # an untrained model is one run, whatever the seed
        fixed = {**spec.scales[scale], "method": method.name, "hp": [f"{method.name}.{h}" for h in c.hp]}
        sweep = SweepSpec(name=sweep_name(spec, scale), path=spec.path, grid={"seed": seeds}, fixed=fixed,
                          variants=[Variant(c.name, {})])  # fmt: skip
        out.append(Arm(c.name, c.role, tuple(expand(sweep)), method.trains))
    return out


def run_missing(arms_: list[Arm], db_url: str, folder: Path, jobs: int, retries: int, echo=print) -> int:  # noqa: ANN001
    """Run the points that are not done (`bench run --resume` each, as `bench sweep`); returns 0, 1 (a point
    failed) or 130 (interrupted)."""
    from bench.sweep.executors import run_local
    from bench.sweep.state import point_states
    from bench.sweep.worker import WorkerSettings
    from results_db import ResultsDB

    points = [p for a in arms_ for p in a.points]
    states = point_states(ResultsDB(db_url).runs(), points)
    todo = [s.point for s in states if s.state not in ("done", "running")]
    done = sum(s.state == "done" for s in states)
    echo(f"{len(points)} runs: {done} already in the database (reused), {len(todo)} to run")
    if not todo:
        return 0
    settings = WorkerSettings(db=db_url, out=str((folder / "runs").resolve()), log_dir=str((folder / "logs").resolve()),
                              retries=retries)  # fmt: skip
    results, interrupted = run_local(todo, settings, jobs, echo=echo)
    if interrupted:
        return 130
    return 1 if any(r.status == "failed" for r in results) else 0


def run_ids(db: Any, arms_: list[Arm]) -> dict[str, list[int]]:
    """Each arm's finished runs (one per seed), from the database."""
    from bench.sweep.state import point_states

    runs = db.runs()
    return {a.name: [s.run_id for s in point_states(runs, list(a.points)) if s.state == "done"] for a in arms_}


def _score_ids(scores: Any, ids: list[int], dataset: str, variant: str) -> list[int]:
    rows = scores[scores["run_id"].isin(ids) & (scores["dataset"] == dataset) & (scores["variant"] == variant)]
    return rows.sort_values("run_id")["id"].astype(int).tolist() if len(rows) == len(ids) else []


def comparisons(db: Any, spec: ClaimSpec, arms_: list[Arm], ids: dict[str, list[int]]) -> tuple[list[Comparison], list[tuple]]:
    """The family's comparisons with their runs' resampled scores, and the (comparator, test) pairs that have no
    scores yet (a run missing, or a dataset not scored)."""
    all_ids = [i for v in ids.values() for i in v]
    scores = db.scores(all_ids)
    metric = "ndcg_at_1" if spec.metric == "psi" else spec.metric  # psi: from the position suite's depth scores
    scores = scores[(scores["suite"] == spec.suite) & (scores["metric"] == metric)] if not scores.empty else scores
    vary = {a.name: a.trains for a in arms_}
    out, missing = [], []
    for test in spec.tests:
        for c in spec.comparators:
            t_ids, c_ids = ids.get(spec.treatment, []), ids.get(c.name, [])
            if spec.metric == "psi":  # the position sweep's index, computed from each run's per-depth scores
                from bench.claim.position import psi_inputs

                got = psi_inputs(db, scores, c_ids, t_ids, test.dataset)
            else:
                got = _resampled(db, _score_ids(scores, c_ids, test.dataset, test.variant),
                                 _score_ids(scores, t_ids, test.dataset, test.variant))  # fmt: skip
            if got is None or not t_ids or not c_ids:
                missing.append((c.name, test))
                continue
            (c_full, c_boot), (t_full, t_boot), n_items = got
            out.append(Comparison(c.name, test.dataset, test.variant, test.direction, test.threshold, c_full, c_boot,
                                  t_full, t_boot, comparator_seeds_vary=vary[c.name], n_items=n_items))  # fmt: skip
    return out, missing


def _resampled(db: Any, a_ids: list[int], b_ids: list[int]) -> tuple | None:
    """((a full, a boot), (b full, b boot), n items) on the items every score shares, or None."""
    if not a_ids or not b_ids:
        return None
    items = [items_of(db, i) for i in [*a_ids, *b_ids]]
    if any(i is None for i in items) or len({i["aggregate"] for i in items}) > 1:
        return None
    common = stats.common_items(*items)
    if len(common) < stats.MIN_ITEMS.get(items[0]["aggregate"], 1):
        return None
    pairs = [stats.resampled(item, common, (db.url, int(i))) for item, i in zip(items, [*a_ids, *b_ids])]
    full, boot = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
    k = len(a_ids)
    return (full[:k], boot[:k]), (full[k:], boot[k:]), len(common)


def judge(db: Any, spec: ClaimSpec, scale: str) -> tuple[list[Verdict], list[tuple], dict[str, list[int]]]:
    """(verdicts of the comparisons that have scores, the missing ones, the runs read)."""
    arms_ = arms(spec, scale)
    ids = run_ids(db, arms_)
    found, missing = comparisons(db, spec, arms_, ids)
    return (verdicts(found, spec.alpha) if found else []), missing, ids


def missing_rows(missing: list[tuple]) -> list[dict]:
    return [{"comparator": name, "dataset": t.dataset, "variant": t.variant, "direction": t.direction,
             "verdict": MISSING} for name, t in missing]  # fmt: skip
