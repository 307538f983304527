"""What `bench sweep` prints: the plan (each point's state, hash and cost) and the comparison of finished points
(mean and 95% t-interval over seeds per cell and dataset, beside the paper's number where the sweep file has one).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from bench.evaluate.subsets import subset_label
from bench.report.stats import MIN_SEEDS, mean_ci
from bench.sweep.points import Point
from bench.sweep.spec import Published, SweepSpec
from bench.sweep.state import PointState, estimate_seconds, seconds_per_example, training_examples

AVERAGE = "average"
BASELINE = "vanilla"  # the untrained backbone: what every trained cell is read against


def duration(seconds: float | None) -> str:
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "?"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def render(frame: pd.DataFrame, digits: int = 2) -> str:
    """A plain-text table: text columns left-aligned, numbers right-aligned."""
    import numbers

    def cell(v) -> str:  # noqa: ANN001
        if isinstance(v, float):
            return "" if math.isnan(v) else f"{v:.{digits}f}"
        return str(v)

    cols = list(frame.columns)
    cells = [[cell(v) for v in row] for row in frame.itertuples(index=False)]
    numeric = [all(isinstance(v, numbers.Number) for v in frame[c]) for c in cols]
    widths = [max([len(str(c)), *(len(r[i]) for r in cells)]) for i, c in enumerate(cols)]

    def line(values: list[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)).rstrip()

    return "\n".join([line([str(c) for c in cols]), *(line(r) for r in cells)])


def plan_table(states: list[PointState], runs: pd.DataFrame) -> str:
    rates = seconds_per_example(runs)
    rows, total, known, examples = [], 0.0, 0, 0
    todo = [s for s in states if s.state != "done"]
    for i, s in enumerate(states, 1):
        est = estimate_seconds(s.point, rates)
        ex = training_examples(s.point)
        if s.state != "done":
            examples += ex or 0
            if est is not None:
                total += est
                known += 1
        rows.append({
            "#": i, "state": s.state, "point": s.point.key,
            "config hash": s.point.config_hash or "(unknown)",
            "train": "-" if ex == 0 else (f"{ex} ex" if ex else s.point.run_args["budget"]),
            "est.": "-" if s.state == "done" else duration(est),
            "run": "" if s.run_id is None else str(s.run_id),
            "note": s.detail or (s.point.hash_note if not s.point.config_hash else ""),
        })
    table = render(pd.DataFrame(rows))
    counts = {k: sum(1 for s in states if s.state == k) for k in ("done", "running", "failed", "missing")}
    summary = (f"{len(states)} points: " + ", ".join(f"{v} {k}" for k, v in counts.items()) + f"; {len(todo)} to run "
               f"({examples} training examples")
    if todo:
        summary += (f", estimated training {duration(total)} for {known} of {len(todo)} points from this database's earlier "
                    "runs of the same method and backbone; evaluation not included)" if known else
                    "; no timing estimate: this database has no finished run of the same method and backbone yet)")
    else:
        summary += ")"
    return table + "\n" + summary


def _run_frame(db, states: list[PointState]) -> pd.DataFrame:  # noqa: ANN001
    done = {s.run_id: s.point for s in states if s.state == "done"}
    if not done:
        return pd.DataFrame()
    scores = db.scores(list(done))
    if scores.empty:
        return scores
    scores = scores[~scores["variant"].astype(str).str.startswith("change")]
    scores = scores.assign(cell=scores["run_id"].map(lambda r: done[r].cell), seed=scores["run_id"].map(lambda r: done[r].seed),
                           limit=scores["info"].map(subset_label))  # a --limit subset: named beside its dataset
    return scores[["run_id", "cell", "seed", "suite", "dataset", "metric", "variant", "value", "limit"]]


def _averages(scores: pd.DataFrame, over: dict[str, tuple[str, ...]] | None = None) -> pd.DataFrame:
    """One 'average' row per (run, suite, metric, variant): the mean over the suite's datasets (cqadupstack's
    forums count once, through its own mean row), or over the datasets a [[published]] entry names."""
    rows = []
    main = scores[~scores["dataset"].astype(str).str.startswith("cqadupstack-")]
    for (run_id, cell, seed, suite, metric, variant), grp in main.groupby(["run_id", "cell", "seed", "suite", "metric", "variant"]):
        wanted = (over or {}).get(suite)
        if wanted:
            grp = grp[grp["dataset"].isin(wanted)]
            if set(grp["dataset"]) != set(wanted):
                continue  # not every dataset of the paper's average was scored: no average to compare
        if len(grp) < 2:
            continue
        rows.append({"run_id": run_id, "cell": cell, "seed": seed, "suite": suite, "dataset": AVERAGE, "metric": metric,
                     "variant": variant, "value": float(grp["value"].mean()), "limit": max(grp["limit"])})
    return pd.DataFrame(rows)


def _published_for(spec: SweepSpec, points: list[Point]) -> dict[tuple, Published]:
    """(cell, suite, dataset, metric, variant) -> the paper's number."""
    out = {}
    for pub in spec.published:
        for p in points:
            labels = {**p.labels, "method": p.method}
            if all(str(labels.get(k)) == str(v) for k, v in pub.cell.items()):
                out[(p.cell, pub.suite, pub.dataset, pub.metric, pub.variant)] = pub
    return out


def baseline_runs(db, states: list[PointState]) -> tuple[dict[int, tuple[str, int]], str]:  # noqa: ANN001
    """The untrained backbone's runs to read the sweep's cells against: run id -> (its cell, its seed). The sweep's own
    `vanilla` points where it has them; else the finished rows of this database whose config hash is the one
    `bench run --method vanilla` would record with a finished point's settings (found wherever they were run).
    The second value: '' or the line that says no baseline is here and how to add one."""
    if any(s.point.method == BASELINE for s in states):
        return {s.run_id: (s.point.cell, s.point.seed) for s in states
                if s.state == "done" and s.point.method == BASELINE}, ""  # fmt: skip
    from bench.experiment.run_spec import RunSpec
    from bench.runtime.errors import ConfigError

    done = [s.point for s in states if s.state == "done"]
    wanted: dict[str, str] = {}
    for point in done:
        options = {**point.options, "method": BASELINE, "no_baseline": True}
        options.pop("hp", None)  # the trained method's hyper-parameters
        try:
            _, chash = RunSpec.from_options(options).configs(0).per_method[BASELINE]
        except (ConfigError, ValueError, KeyError):  # an option the untrained run does not take: no baseline for it
            continue
        others = [part for part in point.cell.split(" ") if not part.startswith("method=") and part != "all"]
        wanted.setdefault(chash, " ".join([f"method={BASELINE}", *others]))
    runs = db.runs()
    found = runs[runs["config_hash"].isin(list(wanted)) & (runs["status"] == "finished")] if not runs.empty else runs
    if found.empty:
        example = done[0] if done else (states[0].point if states else None)
        command = "" if example is None else " (" + "bench run --method vanilla " + " ".join(
            a for a in example.argv if not a.startswith("--method") and a != example.method) + ")"
        return {}, (f"no {BASELINE} baseline in this database with these settings: add \"{BASELINE}\" to [grid] "
                    f"method, or run the untrained backbone on the same suites{command}")
    return {int(r.id): (wanted[r.config_hash] + " (baseline)", int(r.seed)) for r in found.itertuples()}, ""


def comparison_table(db, spec: SweepSpec, states: list[PointState], metric: str | None = None) -> str:  # noqa: ANN001
    scores = _run_frame(db, states)
    if scores.empty:
        return "(no finished point has scores yet)"
    baseline, missing = baseline_runs(db, states)
    extra = {r: c for r, c in baseline.items() if r not in set(scores["run_id"])}  # found outside the sweep's points
    if extra:
        found = db.scores(list(extra))
        found = found[~found["variant"].astype(str).str.startswith("change")]
        runs = found["run_id"].map(extra)
        scores = pd.concat([scores, found.assign(cell=runs.str[0], seed=runs.str[1],
                                                 limit=found["info"].map(subset_label))[scores.columns]],
                           ignore_index=True)  # fmt: skip
    base_cells = {cell for cell, _ in baseline.values()}
    over = {p.suite: p.average_of for p in spec.published if p.dataset == AVERAGE and p.average_of}
    frame = pd.concat([scores, _averages(scores, over)], ignore_index=True)
    if metric:
        frame = frame[frame["metric"] == metric]
    published = _published_for(spec, [s.point for s in states])
    rows = []
    for (cell, suite, dataset, met, variant, limit), grp in frame.groupby(["cell", "suite", "dataset", "metric", "variant", "limit"], sort=False):
        ci = mean_ci(grp.sort_values("seed")["value"].tolist())
        pub = None if limit else published.get((cell, suite, dataset, met, variant))  # a subset is not the paper's set
        rows.append({
            "cell": cell, "suite": suite, "dataset": f"{dataset} ({limit})" if limit else dataset, "metric": met,
            "variant": variant, "seeds": ci.n,
            "mean": ci.mean, "95% CI": f"n/a ({ci.n} seed{'s' if ci.n > 1 else ''}: seed variance not estimated)"
            if ci.n < MIN_SEEDS else f"[{ci.low:.2f}, {ci.high:.2f}]",
            "paper": "" if pub is None else f"{pub.value:.2f}", "source": "" if pub is None else pub.source,
        })
    out = pd.DataFrame(rows)
    out = _against_baseline(out, base_cells)
    order = {"clean": 0}
    out = out.assign(_d=out["dataset"].str.startswith(AVERAGE), _v=out["variant"].map(lambda v: order.get(v, 1)),
                     _b=~out["cell"].isin(base_cells))  # the baseline first in each block
    out = out.sort_values(["suite", "metric", "_d", "dataset", "_v", "variant", "_b", "cell"], kind="stable")
    out = out.drop(columns=["_d", "_v", "_b"])
    if not out["paper"].astype(bool).any():
        out = out.drop(columns=["paper", "source"])
    return render(out) + (f"\nnote: {missing}" if missing else "")


def _against_baseline(out: pd.DataFrame, base_cells: set[str]) -> pd.DataFrame:
    """A column 'vs vanilla': each cell's mean less the baseline's on the same suite, dataset, metric and variant
    (where one baseline cell scored it; blank for the baseline itself)."""
    if not base_cells:
        return out
    keys = ["suite", "dataset", "metric", "variant"]
    base = out[out["cell"].isin(base_cells)].drop_duplicates(keys).set_index(keys)["mean"]
    delta = [float("nan") if cell in base_cells or key not in base.index else mean - float(base.loc[key])
             for cell, mean, key in zip(out["cell"], out["mean"], map(tuple, out[keys].to_numpy()))]  # fmt: skip
    position = list(out.columns).index("mean") + 1
    return out.insert(position, f"vs {BASELINE}", delta) or out
