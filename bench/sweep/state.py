"""Where each point of a sweep stands, read from the results database (never from the scheduler), and what the
points still to run will cost.

A point is `done` when a finished run with its config hash exists (whoever ran it), `running` when its newest row
is running and its process is alive (same host: the pid exists; other host: a heartbeat in the last few minutes),
`failed` when its newest row failed or is "running" with its process gone (a killed worker), `missing` when no
row exists. Only `done` points are skipped by an executor; the others run with `bench run --resume`.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
from dataclasses import dataclass

import pandas as pd

from bench.sweep.points import Point

LIVE_HEARTBEAT = dt.timedelta(minutes=5)


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


def _alive(row: pd.Series) -> bool | None:
    """Is the process holding a running row alive? None when the row does not say (no pid, no heartbeat)."""
    host, pid, beat = row.get("host") or "", row.get("pid"), row.get("heartbeat_at")
    if host == socket.gethostname() and pid is not None and not pd.isna(pid):
        try:
            os.kill(int(pid), 0)
            return True
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
    if beat is not None and not pd.isna(beat):
        now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
        return now - pd.Timestamp(beat).to_pydatetime() < LIVE_HEARTBEAT
    return None


def point_states(runs: pd.DataFrame, points: list[Point]) -> list[PointState]:
    out = []
    for point in points:
        rows = matching_rows(runs, point)
        if rows.empty:
            out.append(PointState(point, "missing"))
            continue
        finished = rows[rows["status"] == "finished"]
        if not finished.empty:
            out.append(PointState(point, "done", int(finished.iloc[-1]["id"])))
            continue
        row = rows.iloc[-1]
        if row["status"] == "running":
            alive = _alive(row)
            if alive is False:
                out.append(PointState(point, "failed", int(row["id"]), "its process is gone (killed?); resumes on the next run"))
            else:
                note = "" if alive else "no heartbeat recorded: if its worker died, the next run resumes it"
                out.append(PointState(point, "running", int(row["id"]), note))
            continue
        error = str(row.get("error") or "").strip().splitlines()
        out.append(PointState(point, "failed", int(row["id"]), error[-1] if error else ""))
    return out


# ------------------------------------------------------------------------------------- cost
def training_examples(point: Point) -> int | None:
    """Examples the budget allows (steps x batch size, or the examples limit); None for time/token-only budgets."""
    from bench.train import Budget
    from methods import get_method

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
