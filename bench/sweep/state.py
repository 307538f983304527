"""Where each point of a sweep stands, read from the results database (never from the scheduler), and what the
points still to run will cost.

A point is `done` when a finished run with its config hash exists (whoever ran it), `running` when its newest row
is running and its process is alive (`results_db.liveness`: the pid on this host, else a recent heartbeat),
`failed` when its newest row failed or is "running" with its process gone (a killed worker), `missing` when no
row exists (with why: bench.sweep.missing). An executor skips `done` and `running` points; the others run with `bench run --resume`.

A point whose hash is unknown while its corpus file is on this machine (not counted as it is now: the file changed,
or no run here loaded it) is never `done` by its sweep label alone: a finished row with that label may have trained
on another corpus. It is `missing` (only a live row by its label makes it `running`), so it runs, and `bench run`
reuses a finished run only when the full config hash, corpus included, is the same. Only a corpus that is not on
this machine at all (a cluster's, seen from a laptop's `--status`) leaves the label to match.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from bench.sweep.missing import why_missing
from bench.sweep.points import Point
from results_db.liveness import is_stale


@dataclass
class PointState:
    point: Point
    state: str  # done | running | failed | missing
    run_id: int | None = None
    detail: str = ""


def matching_rows(runs: pd.DataFrame, point: Point) -> pd.DataFrame:
    if runs.empty:
        return runs
    if point.config_hash:
        rows = runs[(runs["config_hash"] == point.config_hash) & (runs["method"] == point.method)]
    else:  # hash unknown here (corpus not on this machine): the sweep's own label of the row
        rows = runs[(runs.get("sweep") == point.sweep) & (runs.get("sweep_point") == point.key)]
    return rows.sort_values("id")


def point_states(runs: pd.DataFrame, points: list[Point]) -> list[PointState]:
    out = []
    for point in points:
        rows = matching_rows(runs, point)
        if rows.empty:
            out.append(PointState(point, "missing", None, why_missing(runs, point.method, point.config)))
            continue
        if not point.config_hash and _corpus_here(point):  # a live row by label holds it; nothing else is its result
            live = rows[(rows["status"] == "running") & ~rows.apply(lambda r: is_stale(r.to_dict()), axis=1)]
            if not live.empty:
                out.append(PointState(point, "running", int(live.iloc[-1]["id"]), _holder(live.iloc[-1])))
            else:
                out.append(PointState(point, "missing", None, f"hash unknown here ({point.hash_note}); bench run "
                                      "reuses a finished run only if its full config hash matches"))  # fmt: skip
            continue
        finished = rows[rows["status"] == "finished"]
        if not finished.empty:
            out.append(PointState(point, "done", int(finished.iloc[-1]["id"])))
            continue
        row = rows.iloc[-1]
        if row["status"] == "running":
            if is_stale(row.to_dict()):
                out.append(PointState(point, "failed", int(row["id"]), "stale: its process is gone (killed?); the next run resumes it"))
            else:
                out.append(PointState(point, "running", int(row["id"]), _holder(row)))
            continue
        error = str(row.get("error") or "").strip().splitlines()
        out.append(PointState(point, "failed", int(row["id"]), error[-1] if error else ""))
    return out


def _holder(row: pd.Series) -> str:
    """Which process runs a live row: 'pid 123 on host'."""
    return f"pid {row.get('pid')} on {row.get('host')}" if row.get("pid") is not None else ""


def _corpus_here(point: Point) -> bool:
    from bench.data.corpus import corpus_file

    spec = getattr(point, "spec", None)
    if spec is None:
        return False
    path = corpus_file(spec.corpus, spec.data_dir)
    return path is not None and path.exists()


# ------------------------------------------------------------------------------------- cost
def training_examples(point: Point) -> int | None:
    """Examples the budget allows (steps x batch size, or the examples limit); None for time/token-only budgets."""
    from bench.train import Budget
    from bench.train.registry import get_method

    if not get_method(point.method).trains:
        return 0
    budget = Budget.parse(point.run_args["budget"])
    bounds = [b for b in (budget.examples, budget.steps * point.run_args["batch_size"] if budget.steps else None) if b]
    return min(bounds) if bounds else None


def seconds_per_example(runs: pd.DataFrame) -> dict[tuple[str, str], float]:
    """Median training seconds per example of the finished runs in the database, per (method, backbone)."""
    if runs.empty:
        return {}
    rates: dict[tuple[str, str], list[float]] = {}
    for _, row in runs[(runs["status"] == "finished") & (runs["kind"] == "train")].iterrows():
        used = row["budget_consumed"] or {}
        if isinstance(used, str):
            import json

            used = json.loads(used)
        if used.get("examples") and used.get("seconds"):
            rates.setdefault((row["method"], row["backbone"]), []).append(float(used["seconds"]) / float(used["examples"]))
    return {k: float(pd.Series(v).median()) for k, v in rates.items()}


def estimate_seconds(point: Point, rates: dict[tuple[str, str], float]) -> float | None:
    """Training seconds of one point: its examples at the measured rate, capped by a seconds budget."""
    from bench.train import Budget

    budget = Budget.parse(point.run_args["budget"])
    examples = training_examples(point)
    rate = rates.get((point.method, point.run_args["backbone"]))
    guess = examples * rate if (examples is not None and rate is not None) else None
    if budget.seconds is not None:
        guess = budget.seconds if guess is None else min(guess, budget.seconds)
    return guess
