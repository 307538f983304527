"""Learning curves read back: score vs training step per run, with 95% intervals (`bench results --curves`, the
leaderboard's Run and Compare views).

One run: a percentile bootstrap over the point's items (queries, pairs, test examples; the same resampling as
`bench.report.stats.paired_bootstrap`, one run instead of a difference). Several seeds of one configuration: the
Student-t interval over seeds at each step (`mean_ci`) from 3 seeds on (none for 2: their variance is not
estimated), as every other table in lenbench does for seeds.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from bench.report.stats import DEFAULT_LEVEL, DEFAULT_RESAMPLES, score_interval, seeds_ci

CURVE_COLUMNS = ["run_id", "method", "seed", "step", "suite", "dataset", "variant", "metric", "value", "n", "subset"]
FINAL_COLUMNS = ["final_value", "final_n", "final_subset"]  # the run's final score on the same dataset, metric, variant


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
    frame["subset"] = [_limit(i) for i in frame["info"]]  # a --curve-limit subset: its N (None: the whole dataset)
    return frame[CURVE_COLUMNS + extra].sort_values(["run_id", "step", "suite", "dataset", "variant", "metric"],
                                                    kind="stable").reset_index(drop=True)  # fmt: skip


def _limit(info: object) -> int | None:
    if isinstance(info, str):
        import json

        try:
            info = json.loads(info)
        except ValueError:
            return None
    limit = info.get("limit") if isinstance(info, dict) else None
    return int(limit) if limit else None


def with_final(frame: pd.DataFrame, db) -> pd.DataFrame:  # noqa: ANN001
    """Each point with its run's final score on the same dataset, metric and variant (FINAL_COLUMNS): a curve on a
    `--curve-limit` subset next to the number its tables report (the whole dataset, or the run's --limit)."""
    if frame.empty:
        return frame.assign(**{c: [] for c in FINAL_COLUMNS})
    scores = db.scores(sorted(frame["run_id"].unique().tolist()))
    final = pd.DataFrame({
        "run_id": scores["run_id"], "suite": scores["suite"], "dataset": scores["dataset"], "variant": scores["variant"],
        "metric": scores["metric"], "final_value": scores["value"], "final_n": scores["n"],
        "final_subset": [_limit(i) for i in scores["info"]],
    }) if not scores.empty else pd.DataFrame(columns=["run_id", "suite", "dataset", "variant", "metric", *FINAL_COLUMNS])  # fmt: skip
    return frame.merge(final, on=["run_id", "suite", "dataset", "variant", "metric"], how="left")


def _label(dataset: str, subset: object) -> str:
    return f"{dataset}[{int(subset)}]" if subset is not None and subset == subset else str(dataset)


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
        ci = seeds_ci(part["value"].to_numpy().tolist())
        rows.append({**dict(zip(keys, key)), "value": ci.mean, "low": ci.low, "high": ci.high, "seeds": ci.n})
    return pd.DataFrame(rows, columns=[*keys, "value", "low", "high", "seeds"])


def curves_text(frame: pd.DataFrame) -> str:
    """The curves as a table: one line per run, dataset, metric and variant; one column per step (step 0: the
    untrained model), the items each point rests on (`n`, DATASET[N] for a subset), and the run's final score with
    its own n (`final`), so a curve on a subset is never read as the reported number."""
    if frame.empty:
        return "(no learning-curve points: train with `bench run --eval-every N`)"
    frame = frame.assign(dataset=[_label(d, s) for d, s in zip(frame["dataset"], frame["subset"])])
    index = ["run_id", "method", "seed", "dataset", "metric", "variant"]
    wide = frame.pivot_table(index=index, columns="step", values="value", aggfunc="first")
    wide.columns = [f"step {c}" for c in wide.columns]
    wide = wide.reset_index()
    first = frame.drop_duplicates(index).set_index(index)
    wide.insert(len(index), "n", [int(first.loc[tuple(r)]["n"]) for r in wide[index].itertuples(index=False)])
    if "final_value" in frame:
        def final(row: tuple) -> str:
            point = first.loc[row]
            if point["final_value"] != point["final_value"]:  # no final score (a run that did not finish)
                return ""
            return f"{point['final_value']:.2f} ({_label(row[3].split('[')[0], point['final_subset'])}, n={int(point['final_n'])})"

        wide["final"] = [final(tuple(r)) for r in wide[index].itertuples(index=False)]
    head = ("learning curves (step 0 = the untrained model; n = items each point rests on, DATASET[N] = a subset of N "
            "items, a seeded sample unless --limit-mode first; final = the run's reported score and its n)")
    return head + "\n" + wide.to_string(index=False, float_format=lambda v: f"{v:.2f}", na_rep="")
