"""A claim whose metric is `psi`: each run's position sensitivity index (bench.evaluate.suites.position), on all
items and on each item resample, from its per-depth scores. Every depth scores the same queries, so one resample
draws the same queries at every depth, and the index of the resampled depth scores is the index's resample."""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.claim.items import items_of
from bench.evaluate.suites.position import depth_of, position_sensitivity
from bench.report import stats

PSI_SOURCE_METRIC = "ndcg_at_1"  # what the position suite scores each depth by


def _depth_scores(scores: Any, run_id: int, dataset: str) -> list[int]:
    rows = scores[(scores["run_id"] == run_id) & (scores["dataset"] == dataset) & (scores["metric"] == PSI_SOURCE_METRIC)]
    rows = rows[rows["variant"].map(depth_of).notna()]
    return rows.assign(_d=rows["variant"].map(depth_of)).sort_values("_d")["id"].astype(int).tolist()


def run_psi(db: Any, score_ids: list[int], common: tuple[str, ...]) -> tuple[float, np.ndarray]:
    """(PSI on all items, PSI on each item resample) of one run's depth scores."""
    pairs = [stats.resampled(items_of(db, i), common, (db.url, int(i))) for i in score_ids]
    full = np.array([p[0] for p in pairs])
    boot = np.stack([p[1] for p in pairs], axis=1)  # (R, depths)
    return float(position_sensitivity(full)), position_sensitivity(boot)


def psi_inputs(db: Any, scores: Any, comparator_ids: list[int], treatment_ids: list[int], dataset: str) -> tuple | None:
    """((comparator PSI per run, resamples), (treatment ...), n items), or None when a run lacks its depths."""
    if not comparator_ids or not treatment_ids or scores.empty:
        return None
    per_run = {r: _depth_scores(scores, r, dataset) for r in [*comparator_ids, *treatment_ids]}
    counts = {len(v) for v in per_run.values()}
    if len(counts) != 1 or counts.pop() < 2:
        return None
    items = [items_of(db, i) for ids in per_run.values() for i in ids]
    if any(i is None for i in items):
        return None
    common = stats.common_items(*items)
    if not common:
        return None
    out = []
    for ids in (comparator_ids, treatment_ids):
        got = [run_psi(db, per_run[r], common) for r in ids]
        out.append((np.array([g[0] for g in got]), np.stack([g[1] for g in got])))
    return out[0], out[1], len(common)
