"""`results.json`: one run's results in one file beside its encoder (`RUN_FOLDER/results.json`), written when the run
finishes, and readable without lenbench (the layout is the JSON Schema `results.schema.json` of this package).

    {"format": "lenbench-results", "format_version": 1, "scale": 100,
     "run":        {id, kind, method, model (absolute for a folder), backbone, seed, status, comparison, config_hash,
                    started_at, finished_at},
     "config":     the run's config (what its config hash is computed from, plus curve settings; the elongation
                   variants only where a suite attacked with elong),
     "training":   {corpus, budget, budget_asked, budget_consumed} or null for an untrained row,
     "provenance": {code_version, package_versions, data_fingerprint, command, runtime, model_info},
     "scores":     [{suite, dataset, metric, variant, value, n, subset, interval, info}],
     "curves":     [{step, suite, dataset, metric, variant, value, n, subset}]}

Scores are x100 (as every table shows them; "scale": 100 says so in the file). The command's --db is absolute. `subset` is null for a whole dataset, else {"limit": N} (a `--limit`
run: the first N items). `interval` is the 95% percentile bootstrap of that score over its items (the same
resamples as every difference lenbench reports, `bench.report.stats.score_interval`), null when the items were not
kept or are too few.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
from pathlib import Path
from typing import Any

from bench.report.portable import SCALE, absolute_model, command_with_absolute_db, config_as_scored
from results_db.records import json_column

FORMAT = "lenbench-results"
FORMAT_VERSION = 1
FILE_NAME = "results.json"
SCHEMA = Path(__file__).with_name("results.schema.json")


def _finite(value: Any) -> float | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _when(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=value.tzinfo or dt.timezone.utc).isoformat()
    try:
        import pandas as pd

        stamp = pd.Timestamp(value)
        return None if pd.isna(stamp) else stamp.tz_localize("UTC").isoformat() if stamp.tzinfo is None else stamp.isoformat()
    except (TypeError, ValueError):
        return str(value)


def _subset(info: dict[str, Any]) -> dict[str, int] | None:
    limit = info.get("limit")
    return {"limit": int(limit)} if limit else None


def score_entries(db: Any, run_id: int) -> list[dict[str, Any]]:
    """Every score of the run with n, subset and its 95% bootstrap interval (None without items)."""
    from bench.report.stats import DEFAULT_LEVEL, score_interval

    scores = db.scores([run_id])
    out = []
    for _, s in scores.sort_values(["suite", "dataset", "metric", "variant"], kind="stable").iterrows():
        info = json_column(s.get("info"))
        items = db.score_items(int(s["id"]))
        low = high = None
        if items is not None:
            bounds = score_interval({"aggregate": items.aggregate, "item_ids": items.item_ids, "values": items.values,
                                     "gold": items.gold})  # fmt: skip
            low, high = _finite(bounds[0]), _finite(bounds[1])
        out.append({
            "suite": str(s["suite"]), "dataset": str(s["dataset"]), "metric": str(s["metric"]),
            "variant": str(s["variant"]), "value": _finite(s["value"]), "n": int(s["n"] or 0),
            "subset": _subset(info),
            "interval": None if low is None or high is None else {"low": low, "high": high, "level": DEFAULT_LEVEL,
                                                                  "method": "percentile bootstrap over items"},
            "info": {k: v for k, v in info.items() if k != "limit"},
        })  # fmt: skip
    return out


def curve_entries(db: Any, run_id: int) -> list[dict[str, Any]]:
    points = db.curve_points([run_id])
    return [{"step": int(p["step"]), "suite": str(p["suite"]), "dataset": str(p["dataset"]), "metric": str(p["metric"]),
             "variant": str(p["variant"]), "value": _finite(p["value"]), "n": int(p["n"] or 0),
             "subset": _subset(json_column(p.get("info")))} for _, p in points.iterrows()]  # fmt: skip


SCORE_COLUMNS = ["run_id", "kind", "method", "model", "backbone", "budget", "corpus", "seed", "status", "suite", "dataset",
                 "variant", "metric", "value", "n", "subset", "ci_low", "ci_high", "info"]


def scores_frame(db: Any, runs: Any, run_ids: Any, method_labels: dict[int, str] | None = None) -> Any:
    """One row per score (SCORE_COLUMNS) with what it rests on and how it was made: the run's backbone, budget,
    training corpus and seed, n, the subset (`--limit` N, empty for the whole dataset) and the 95% bootstrap interval
    of the score over its items; what `bench results --format csv|json` and the Python API's `to_pandas()` give.
    runs: db.runs() (or a part holding run_ids); method_labels: run id -> the label a comparison shows."""
    import pandas as pd

    from bench.report.pooling import row_label

    meta = runs.set_index("id")
    rows = []
    for run_id in sorted(int(r) for r in run_ids):
        run = meta.loc[run_id]
        label = row_label({**run.to_dict(), "id": run_id})  # a `bench eval` row by its model, as the tables name it
        for entry in score_entries(db, run_id):
            interval = entry["interval"] or {}
            rows.append({
                "run_id": run_id, "kind": run["kind"], "method": (method_labels or {}).get(run_id, label),
                "model": run["model"], "backbone": run["backbone"] or None, "budget": run["budget_label"] or None,
                "corpus": run["train_corpus"] or None, "seed": int(run["seed"]), "status": run["status"],
                **{k: entry[k] for k in ("suite", "dataset", "variant", "metric", "value", "n")},
                "subset": (entry["subset"] or {}).get("limit"), "ci_low": interval.get("low"), "ci_high": interval.get("high"),
                "info": {**entry["info"], **(entry["subset"] or {})} or None,
            })  # fmt: skip
    return pd.DataFrame(rows, columns=SCORE_COLUMNS)


def _db_path(db: Any) -> Path | None:
    """The database's absolute file (None for a server database)."""
    return getattr(getattr(db, "location", None), "path", None)


def run_results(db: Any, run_id: int) -> dict[str, Any]:
    """The results document of one run (see the module docstring)."""
    from bench.report.pooling import row_label

    run = db.get_run(run_id)
    config = run.get("config") or {}
    trained = run.get("kind") == "train"
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "scale": SCALE,
        "run": {
            "id": int(run["id"]), "kind": run.get("kind"), "method": run.get("method"), "label": row_label(run),
            "model": absolute_model(run.get("model"), run.get("kind")),
            "backbone": run.get("backbone") or None, "seed": run.get("seed"), "status": run.get("status"),
            "comparison": config.get("comparison"), "config_hash": run.get("config_hash") or None,
            "started_at": _when(run.get("started_at")), "finished_at": _when(run.get("finished_at")),
        },
        "config": config_as_scored(config),
        "training": {
            "corpus": run.get("train_corpus") or None, "budget": run.get("budget_label") or None,
            "budget_asked": run.get("budget_asked") or {}, "budget_consumed": run.get("budget_consumed") or {},
        } if trained else None,
        "provenance": {
            "code_version": run.get("code_version") or None, "package_versions": run.get("package_versions") or {},
            "data_fingerprint": run.get("data_fingerprint") or {}, "command": command_with_absolute_db(run.get("command"), _db_path(db)) or None,
            "runtime": run.get("runtime") or {}, "model_info": run.get("model_info") or {},
        },
        "scores": score_entries(db, run_id),
        "curves": curve_entries(db, run_id),
    }  # fmt: skip


def _clean(value: Any) -> Any:
    """JSON without NaN or infinity (not JSON): such numbers become null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def write_results(db: Any, run_id: int, folder: str | os.PathLike[str], finished_at: Any = None) -> Path:
    """RUN_FOLDER/results.json of the run, written atomically (bench.runtime.writes: a temporary file renamed into
    place; a write the disk refuses is one line naming results.json). finished_at: the run is being finished at
    that time (the file is written before the row is marked, so the row is finished only once its file exists)."""
    from bench.runtime.writes import atomic_file

    document = run_results(db, run_id)
    if finished_at is not None:
        document["run"].update(status="finished", finished_at=_when(finished_at))
    document = _clean(json.loads(json.dumps(document, default=str)))
    target = Path(folder) / FILE_NAME
    with atomic_file(target, f"run {run_id}'s {FILE_NAME}") as tmp:
        with open(tmp, "w") as fh:
            json.dump(document, fh, indent=2, default=str, allow_nan=False)
            fh.write("\n")
    return target


def load_schema() -> dict[str, Any]:
    return json.loads(SCHEMA.read_text())
