"""Learning curves read back: score vs training step per run, with 95% intervals (`bench results --curves`, the
leaderboard's Run and Compare views).

One run: a percentile bootstrap over the point's items (queries, pairs, test examples; the same resampling as
`bench.report.stats.paired_bootstrap`, one run instead of a difference). Several seeds of one configuration: the
Student-t interval over seeds at each step (`mean_ci`), as every other table in lenbench does for seeds.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from bench.report.stats import DEFAULT_LEVEL, DEFAULT_RESAMPLES, mean_ci, score_interval

CURVE_COLUMNS = ["run_id", "method", "seed", "step", "suite", "dataset", "variant", "metric", "value", "n"]


def bootstrap_interval(items: dict | None, resamples: int = DEFAULT_RESAMPLES, level: float = DEFAULT_LEVEL,
                       seed: int = 0) -> tuple[float, float]:  # fmt: skip
    """Percentile interval of one score from its items ({"aggregate", "values", "gold"}); (nan, nan) without them.
    The one computation of `bench.report.stats` (`score_interval`)."""
    return score_interval(items, resamples=resamples, level=level, seed=seed)


def curve_frame(db, run_ids: Sequence[int] | None = None, with_items: bool = False) -> pd.DataFrame:  # noqa: ANN001
    """Curve points joined with their run's method and seed: CURVE_COLUMNS (+ items), by run and step."""
    points = db.curve_points(run_ids, with_items=with_items)
    extra = ["items"] if with_items else []
    if points.empty:
        return pd.DataFrame(columns=CURVE_COLUMNS + extra)
    runs = db.runs()[["id", "method", "seed"]].rename(columns={"id": "run_id"})
    frame = points.merge(runs, on="run_id", how="left")
    return frame[CURVE_COLUMNS + extra].sort_values(["run_id", "step", "suite", "dataset", "variant", "metric"],
                                                    kind="stable").reset_index(drop=True)  # fmt: skip


def with_intervals(frame: pd.DataFrame) -> pd.DataFrame:
    """One run's points (needs `items`) with `low`/`high`: the bootstrap interval of each point."""
    out = frame.copy()
    bounds = [bootstrap_interval(items) for items in out.get("items", [None] * len(out))]
    out["low"] = [b[0] for b in bounds]
    out["high"] = [b[1] for b in bounds]
    return out


def over_seeds(frame: pd.DataFrame, group: Sequence[str] = ("method",)) -> pd.DataFrame:
    """Mean and t-interval over the runs (seeds) of each group at each step: columns *group, step, suite, dataset,
    variant, metric, value (mean), low, high, seeds."""
    keys = [*group, "step", "suite", "dataset", "variant", "metric"]
    rows = []
    for key, part in frame.groupby(keys, sort=True):
        ci = mean_ci(part["value"].to_numpy())
        rows.append({**dict(zip(keys, key)), "value": ci.mean, "low": ci.low, "high": ci.high, "seeds": ci.n})
    return pd.DataFrame(rows, columns=[*keys, "value", "low", "high", "seeds"])


def curves_text(frame: pd.DataFrame) -> str:
    """The curves as a table: one line per run, dataset, metric and variant; one column per step."""
    if frame.empty:
        return "(no learning-curve points: train with `bench run --eval-every N`)"
    wide = frame.pivot_table(index=["run_id", "method", "seed", "dataset", "metric", "variant"], columns="step",
                             values="value", aggfunc="first")  # fmt: skip
    wide.columns = [f"step {c}" for c in wide.columns]
    return wide.reset_index().to_string(index=False, float_format=lambda v: f"{v:.2f}", na_rep="")
