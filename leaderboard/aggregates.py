"""The main board's aggregate over datasets, the computation `bench results` prints (bench.report.stats): per row,
the mean and interquartile mean over the datasets every shown row scored, with stratified-bootstrap 95% intervals
(items within each dataset, seeds within the row), the probability of improvement over the reference row
(rliable's: per dataset P(a seed of the row beats a seed of the reference), averaged), and the performance profile
(rliable's: the share of a row's (seed, dataset) scores above each threshold, each dataset weighing the same).

Pure functions of the board's per-seed scores and their stored items; no Streamlit here.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from bench.report import stats
from leaderboard import comparable

PROFILE_POINTS = 60  # thresholds of the performance profile


def per_seed(long: pd.DataFrame, groups: list[int], datasets: list[str]) -> dict[int, dict[str, pd.DataFrame]]:
    """{group: {dataset: its seeds' rows (run_id, seed, value)}} for the groups that scored every dataset."""
    out: dict[int, dict[str, pd.DataFrame]] = {}
    for g in groups:
        mine = long[long["group"] == g]
        cells = {d: mine[mine["dataset"] == d].sort_values("run_id") for d in datasets}
        if all(len(c) for c in cells.values()):
            out[int(g)] = cells
    return out


@dataclass(frozen=True)
class StoredItems:
    """The per-item scores an aggregate resamples: score_ids, (run_id, dataset) -> score id with stored items;
    items, score id -> its stored items; key, score id -> the key its item resamples are drawn under."""

    score_ids: dict[tuple[int, str], int] = field(default_factory=dict)
    items: dict[int, dict] = field(default_factory=dict)
    key: Callable[[int], Hashable] = lambda i: i


def aggregate_table(long: pd.DataFrame, groups: list[int], labels: dict[int, str], datasets: list[str],
                    stored: StoredItems = StoredItems(), reference: int | None = None,
                    imported: frozenset[int] | set[int] = frozenset()) -> pd.DataFrame:  # fmt: skip
    """One row per group that scored every dataset: datasets, seeds, mean and IQM with their 95% intervals, and
    P(> reference). stored: the scores' stored items; a score without items adds no item noise (its run's score on
    every item resample is its score). imported: the groups of imported published scores, whose differences from
    another row below their file's rounding are ties in P(> reference)."""
    if len(datasets) < 2:
        return pd.DataFrame()
    cells = per_seed(long, groups, datasets)
    rows, full_of = [], {}
    for g, per in cells.items():
        full, boot = [], []
        for d in datasets:
            cell = per[d]
            values = cell["value"].to_numpy(dtype=float)
            resamples = _item_resamples(cell, d, stored.score_ids, stored.items, stored.key)
            full.append(values)
            boot.append(resamples if resamples is not None else np.repeat(values[:, None], 2, axis=1))
        full_of[g] = full
        agg = stats.aggregate_over_datasets(full, boot)
        rows.append({"group": g, "row": labels.get(g, str(g)), "datasets": len(datasets), "seeds": agg["mean"].seeds,
                     "mean": agg["mean"].value, "mean low": agg["mean"].low, "mean high": agg["mean"].high,
                     "IQM": agg["IQM"].value, "IQM low": agg["IQM"].low, "IQM high": agg["IQM"].high})  # fmt: skip
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    if reference is not None and reference in full_of:
        table["P(> reference)"] = [
            np.nan if g == reference else stats.probability_of_improvement(
                tied_to(full_of[g], full_of[reference], g in imported, reference in imported), full_of[reference])
            for g in table["group"]]  # fmt: skip
    return table.sort_values("IQM", ascending=False).reset_index(drop=True)


def tied_to(row: list[np.ndarray], reference: list[np.ndarray], row_imported: bool, reference_imported: bool,
            ) -> list[np.ndarray]:  # fmt: skip
    """The row's seed values per dataset, with each value that ties a one-seed reference within the rounding of an
    imported score (`leaderboard.comparable`) set to the reference's value, so the comparison counts it as a tie."""
    out = []
    for x, y in zip(row, reference):
        x = np.asarray(x, dtype=float).copy()
        if len(y) == 1:
            step_y = comparable.stated_step(float(y[0])) if reference_imported else 0.0
            step_x = comparable.steps(x, np.full(len(x), row_imported))
            tolerance = (step_x + step_y) / 2.0
            x[(tolerance > 0) & (np.abs(x - float(y[0])) <= tolerance + 1e-12)] = float(y[0])
        out.append(x)
    return out


def _item_resamples(cell: pd.DataFrame, dataset: str, score_ids: dict[tuple[int, str], int], items: dict[int, dict],
                    key: Callable[[int], Hashable]) -> np.ndarray | None:  # fmt: skip
    """(seeds, R): each seed's score on the item resamples of the items all of them share; None without items."""
    ids = [score_ids.get((int(r), dataset)) for r in cell["run_id"]]
    if any(i is None or i not in items for i in ids):
        return None
    chosen = [items[i] for i in ids]
    if len({c["aggregate"] for c in chosen}) > 1:
        return None
    common = stats.common_items(*chosen)
    if len(common) < stats.MIN_ITEMS.get(chosen[0]["aggregate"], 1):
        return None
    return np.array([stats.resampled(c, common, key(i))[1] for c, i in zip(chosen, ids)])


def performance_profile(long: pd.DataFrame, groups: list[int], labels: dict[int, str], datasets: list[str],
                        points: int = PROFILE_POINTS) -> pd.DataFrame:  # fmt: skip
    """(row, threshold, share): for each threshold tau, the share of a row's runs scoring above tau on a dataset,
    averaged over datasets (rliable's run-score distribution, each dataset weighing the same)."""
    cells = per_seed(long, groups, datasets)
    if not cells or len(datasets) < 2:
        return pd.DataFrame(columns=["row", "threshold", "share"])
    values = np.concatenate([c["value"].to_numpy(dtype=float) for per in cells.values() for c in per.values()])
    taus = np.linspace(np.nanmin(values), np.nanmax(values), points)
    rows = []
    for g, per in cells.items():
        shares = np.mean([(c["value"].to_numpy(dtype=float)[:, None] > taus[None, :]).mean(axis=0) for c in per.values()], axis=0)
        rows += [{"row": labels.get(g, str(g)), "threshold": float(t), "share": float(s)} for t, s in zip(taus, shares)]
    return pd.DataFrame(rows)
