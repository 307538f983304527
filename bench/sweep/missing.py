"""Why a point has no run in the database (`bench claim --no-run`, `bench sweep --status`): no run of its method at all;
the closest run was made by another code version (its training recipe or method version, whatever else differs); or
the first config field in which the closest run differs, with both values. The closest run is the one of the point's
method whose config differs from the point's in the fewest fields (the newest among equals)."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

CODE_FIELDS = ("train_recipe", "method_version")  # a config field that names the code, not a setting
# recorded in a trained row's config after its hash was taken (bench.experiment.comparison): no part of its identity
RECORDED_AFTER = ("curves", "in_domain")

_ABSENT = object()


def flatten(config: Any, prefix: str = "") -> dict[str, Any]:
    """{"eval.max_len": 64, ...}: nested dicts as dotted keys, in the config's own order."""
    if not isinstance(config, dict):
        return {prefix.rstrip("."): config} if prefix else {}
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict) and value:
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _same(a: Any, b: Any) -> bool:
    # a JSON column hands back lists for tuples: compare as JSON would store them
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def differing_fields(expected: dict[str, Any], stored: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(field, the point's value, the run's value) for each field that differs, in the point's field order; a field
    only one side has shows the other side as absent (None in the tuple is a stored null)."""
    ours = flatten(expected)
    theirs = flatten({k: v for k, v in stored.items() if k not in RECORDED_AFTER})
    out = []
    for key in list(ours) + [k for k in theirs if k not in ours]:
        a, b = ours.get(key, _ABSENT), theirs.get(key, _ABSENT)
        if a is _ABSENT or b is _ABSENT or not _same(a, b):
            out.append((key, a, b))
    return out


def _shown(value: Any) -> str:
    return "none" if value is _ABSENT else json.dumps(value, default=str)


def _config(value: Any) -> dict[str, Any]:
    from results_db.records import json_column

    return json_column(value)


def why_missing(runs: pd.DataFrame, method: str, expected: dict[str, Any] | None) -> str:
    """One phrase saying why no run matches a point whose config is `expected` (None: unknown here, nothing said)."""
    if expected is None:
        return ""
    same_method = runs[runs["method"] == method] if not runs.empty else runs
    if same_method.empty:
        return f"no run of {method} in the database"
    best: tuple[list, int] | None = None
    for _, row in same_method.sort_values("id").iterrows():
        diffs = differing_fields(expected, _config(row["config"]))
        if best is None or len(diffs) <= len(best[0]):  # the newest among equals
            best = (diffs, int(row["id"]))
    diffs, run_id = best
    if not diffs:
        return (f"run {run_id} has this config under another config hash, one an earlier identity recipe took: "
                "`bench db upgrade --db DB` re-keys it")  # fmt: skip
    code = [d for d in diffs if d[0] in CODE_FIELDS]  # no setting brings back a run of other training code
    if code:
        field, ours, theirs = code[0]
        return (f"run {run_id}, the closest, was made by another code version: {field}={_code(theirs)}, this code "
                f"{_code(ours)}")  # fmt: skip
    field, ours, theirs = diffs[0]
    return f"run {run_id}, the closest, has {_setting(field, theirs)}, this one asks {_shown(ours)}"


def _code(value: Any) -> str:
    return "1" if value is _ABSENT else _shown(value)  # a version is recorded from 2 on (bench.experiment.run_spec)


def _setting(field: str, value: Any) -> str:
    return f"no {field}" if value is _ABSENT else f"{field}={_shown(value)}"
