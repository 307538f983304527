"""Running a claim at one scale: its runs are sweep points (the treatment and each comparator, at every seed; an
untrained comparator once), run with `bench sweep`'s machinery, so a run that exists (by its config hash, whoever
ran it) is reused and only the missing ones train. Then each comparison's runs are read back and judged
(`bench.report.verdicts`).
"""

from __future__ import annotations

import time
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
    return claim_sweep(spec.name, scale)


def claim_sweep(claim: str, scale: str) -> str:
    """The sweep name a claim's runs are recorded under, at one scale."""
    return f"claim-{claim}-{scale}"


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
        out.append(Arm(c.name, c.role, tuple(expand(sweep, count=True)), method.trains))
    return out


WAIT_MINUTES = 60.0  # how long `bench claim` waits, by default, for its runs that another process is running
POLL_SECONDS = 2.0  # how often it looks at them again


def run_missing(arms_: list[Arm], db_url: str, folder: Path, jobs: int, retries: int, echo=print,  # noqa: ANN001
                wait_minutes: float = WAIT_MINUTES, poll: float = POLL_SECONDS) -> int:  # fmt: skip
    """Run the points that are not done (`bench run --resume` each, as `bench sweep`), and wait (at most
    `wait_minutes`) for those another process is running (another `bench claim` of the file, a sweep): a verdict is
    judged on all of a claim's seeds, never on the ones finished so far. A point another process was running and
    left unfinished (it failed, or was killed) is run here. Returns 0, 1 (a point failed or is still running
    elsewhere) or 130 (interrupted)."""
    from bench.sweep.executors import run_local
    from bench.sweep.worker import WorkerSettings

    points = interleaved(arms_)
    states = _states(db_url, points)
    done = sum(s.state == "done" for s in states)
    running = sum(s.state == "running" for s in states)
    echo(f"{len(points)} runs: {done} already in the database (reused), {len(points) - done - running} to run"
         + (f", {running} being run by another process" if running else ""))  # fmt: skip
    settings = WorkerSettings(db=db_url, out=str((folder / "runs").resolve()), log_dir=str((folder / "logs").resolve()),
                              retries=retries)  # fmt: skip
    deadline = None  # set when the waiting starts: the runs trained here do not eat into it
    failed: set[str] = set()  # points that failed here: not tried again while waiting for the others
    say = echo
    while True:
        todo = [s.point for s in _states(db_url, points) if s.state != "done" and s.point.key not in failed]
        if not todo:
            return 1 if failed else 0
        results, interrupted = run_local(todo, settings, jobs, echo=say)
        if interrupted:
            return 130
        failed |= {r.key for r in results if r.status == "failed"}
        elsewhere = [r for r in results if r.status == "running elsewhere"]
        if not elsewhere:
            return 1 if failed else 0
        if deadline is None:
            echo(f"{len(elsewhere)} run(s) of this claim are being run by another process ({elsewhere[0].key}: "
                 f"{elsewhere[0].last_line}); waiting for them (at most {wait_minutes:g} min, --wait), then judging "
                 "on all seeds")  # fmt: skip
            deadline, say = time.monotonic() + 60.0 * wait_minutes, (lambda line: None)
        elif time.monotonic() >= deadline:
            echo(f"{len(elsewhere)} run(s) of this claim still being run by another process after {wait_minutes:g} "
                 "min: the verdict waits for all its seeds (`bench claim FILE --status` shows each run)")  # fmt: skip
            return 1
        time.sleep(min(poll, max(0.0, deadline - time.monotonic()) + 0.01))


def interleaved(arms_: list[Arm]) -> list[Point]:
    """The points in the order they start: each arm's first seed, then each arm's second... Not one arm's seeds side
    by side: those prepare the same corpus (sentence splits, token ids) at the same moment, and the later ones would
    wait for the first (`bench.runtime.writes.one_at_a_time`) instead of training another arm meanwhile."""
    rounds = max((len(a.points) for a in arms_), default=0)
    return [a.points[i] for i in range(rounds) for a in arms_ if i < len(a.points)]


def _states(db_url: str, points: list[Point]) -> list[Any]:
    from bench.sweep.state import point_states
    from results_db import ResultsDB

    db = ResultsDB(db_url)
    try:
        return point_states(db.runs(), points)
    finally:
        db.engine.dispose()


def run_ids(db: Any, arms_: list[Arm]) -> dict[str, list[int]]:
    """Each arm's finished runs (one per seed), from the database; an arm some of whose seeds are not finished
    has none: a comparison is judged on all of a claim's seeds or not at all."""
    states = arm_states(db, arms_)
    return {a.name: [s.run_id for s in states[a.name]] if all(s.state == "done" for s in states[a.name]) else []
            for a in arms_}  # fmt: skip


def arm_states(db: Any, arms_: list[Arm]) -> dict[str, list[Any]]:
    """Each arm's points with their state (done | running | failed | missing) and why (bench.sweep.state)."""
    from bench.sweep.state import point_states

    runs = db.runs()
    return {a.name: point_states(runs, list(a.points)) for a in arms_}


def state_lines(states: dict[str, list[Any]], only_unfinished: bool = False) -> list[str]:
    """One line per run of the claim: its arm, seed, state, run id and why (`bench claim --status`; the runs a
    verdict still waits for, under an incomplete one)."""
    lines = []
    for name, got in states.items():
        for s in got:
            if only_unfinished and s.state == "done":
                continue
            run = f" run {s.run_id}" if s.run_id is not None else ""
            lines.append(f"  {name} seed {s.point.seed}: {s.state}{run}" + (f" ({s.detail})" if s.detail else ""))
    return lines


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


def store_verdict(db: Any, spec: ClaimSpec, scale: str, verdict: str, line: str, rows: list[dict],
                  run_ids: list[int]) -> bool:  # fmt: skip
    """Store a verdict judged on all of the claim's runs, unless the newest stored one of this claim and scale was
    judged on the same runs and says the same (two `bench claim` of one file that end together store it once).
    The look and the insert are one step under a lease in the database (`results_db.leases`). True when stored."""
    import json

    from results_db.leases import Lease, lease_name, release, take

    key = lease_name("claim-verdict", spec.name, scale)
    while not isinstance(held := take(db, key), Lease):  # another process stores this claim's verdict now: a moment
        time.sleep(0.1)
    try:
        newest = next((v for v in db.claim_verdicts() if (v["claim"], v["scale"]) == (spec.name, scale)), None)
        same = json.dumps(json.loads(json.dumps(rows, default=float)), sort_keys=True)
        if (newest is not None and sorted(newest["run_ids"] or []) == run_ids and newest["verdict"] == verdict
                and newest["summary"] == line and json.dumps(newest["rows"], sort_keys=True) == same):  # fmt: skip
            return False
        db.add_claim_verdict(claim=spec.name, scale=scale, statement=spec.statement, treatment=spec.treatment,
                             verdict=verdict, summary=line, rows=rows, run_ids=run_ids)  # fmt: skip
        return True
    finally:
        release(db, held)
