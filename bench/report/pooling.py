"""Which runs make one comparison: every run whose config names the same comparison (the hash of its shared
settings, bench.experiment.run_spec.comparison_key), whichever command made it. `bench run`'s final table,
`bench results` and sweeps read their groups from here.

Inside a comparison, runs are labelled by method, with the hyper-parameters that tell two configurations of one
method apart ("laser3-self (m_mode=twice)"); the runs of one label are its seeds. A configuration computed twice
(same config hash: a re-run) counts once, the newest finished row.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd


def _config(row: dict) -> dict:
    config = row.get("config")
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except json.JSONDecodeError:
            config = {}
    return config if isinstance(config, dict) else {}


def comparison_of(row: dict) -> str:
    """The comparison a run row belongs to, or 'run-ID' for a run outside any."""
    return _config(row).get("comparison") or f"run-{row['id']}"


def model_name(model: str) -> str:
    """How an evaluated model is named in a table: a hub id or alias as typed ('minilm', 'org/name'); a folder by its
    last two path parts ('runs/x/simcse/encoder' -> 'simcse/encoder')."""
    text = str(model).rstrip("/")
    if text.startswith(("/", ".", "~")) or text.count("/") > 1:
        parts = [p for p in text.split("/") if p not in ("", ".", "~")]
        return "/".join(parts[-2:]) if parts else text
    return text


def evaluated_label(method: str, model: str) -> str:
    """The label of a `bench eval` row: the model it scored ('minilm', 'simcse/encoder'; BM25 stays 'bm25'), not the
    method 'vanilla' every evaluated model shares (bench eval's table, bench results and the leaderboard agree)."""
    return model_name(model) if method == "vanilla" and str(model or "") else method


def row_label(row: dict) -> str:
    """A run row's label: its method; a `bench eval` row outside any `bench run` comparison by its model."""
    method = str(row.get("method") or "")
    if row.get("kind") == "eval" and not _config(row).get("comparison"):
        return evaluated_label(method, str(row.get("model") or ""))
    return method


def method_labels(rows: list[dict]) -> list[str]:
    """Each row's label (`row_label`), with the hyper-parameters whose values differ among the rows of that label."""
    # a method's version (MethodSpec.version, `method_version`; 1 before it was recorded) tells two codes of one
    # method apart as a hyper-parameter does: their runs are never pooled as seeds of one label
    configs = [{**(_config(r).get("method_config") or {}), "method-version": _config(r).get("method_version", 1)} for r in rows]
    labels = [row_label(r) for r in rows]
    for method in dict.fromkeys(labels):
        mine = [i for i, label in enumerate(labels) if label == method]
        seen = [{k: json.dumps(v, sort_keys=True) for k, v in configs[i].items()} for i in mine]
        varying = sorted(k for k in set().union(*seen) if len({s.get(k) for s in seen}) > 1) if seen else []
        for i in mine if varying else ():
            shown = ", ".join(f"{k}={json.loads(seen[mine.index(i)][k]) if k in configs[i] else '-'}" for k in varying)
            labels[i] = f"{method} ({shown})"
    return labels


def by_method(rows: list[dict], finished_only: bool = False) -> dict[str, list[int]]:
    """Method label -> run ids (its seeds) of one comparison's rows, in id order; a config hash computed twice
    counts once (the newest finished row, else the newest)."""
    rows = sorted(rows, key=lambda r: int(r["id"]))
    if finished_only:
        rows = [r for r in rows if r.get("status") == "finished"]
    chosen: dict[tuple, dict] = {}
    for label, row in zip(method_labels(rows), rows):
        key = (label, row.get("config_hash") or f"id-{row['id']}")
        kept = chosen.get(key)
        if kept is None or row.get("status") == "finished" or kept.get("status") != "finished":
            chosen[key] = {**row, "label": label}
    out: dict[str, list[int]] = {}
    for row in sorted(chosen.values(), key=lambda r: int(r["id"])):
        out.setdefault(row["label"], []).append(int(row["id"]))
    return out


def resolve_reference(reference: str | None, labels: list[str]) -> tuple[str | None, str]:
    """The label `--reference NAME` picks among one comparison's method labels, and a line to print when it had to
    choose: NAME itself when it is a label; when NAME's method has several hyper-parameter variants here ("simcse
    (dropout=0.1)", "simcse (dropout=0.2)"), the first of them in sorted order, named in the line; else None (the
    default reference) with no line."""
    if reference is None or reference in labels:
        return reference, ""
    variants = sorted(label for label in labels if label.startswith(f"{reference} ("))
    if not variants:
        return None, ""
    if len(variants) == 1:
        return variants[0], ""
    return variants[0], (f"--reference {reference}: {len(variants)} variants of it in this comparison "
                         f"({'; '.join(variants)}); comparing against {variants[0]!r} (name one exactly to pick another)")


SEED_FREE = ("method", "method_config", "method_version", "comparison")  # what differs between the methods and seeds


def seeds_key(row: dict) -> str | None:
    """What a trained run shares with the other seeds of its comparison: its config less the method and the seed
    (`bench run --seed`, the training seed). Runs of one sweep or claim differ only in --seed from one point to
    the next, so each has a comparison of its own; this key pools them. None for an untrained or evaluated row
    (it joins by its comparison)."""
    config = _config(row)
    train = config.get("train")
    if not isinstance(train, dict):
        return None
    shared = {k: v for k, v in config.items() if k not in SEED_FREE}
    shared["train"] = {k: v for k, v in train.items() if k != "seed"}
    return json.dumps(shared, sort_keys=True, default=str)


def comparison_groups(runs: pd.DataFrame) -> list[list[dict]]:
    """The runs of each comparison, in the order each first appears: every view's one definition (`bench results`,
    `bench run`'s table, the API; a claim's runs are its points). Runs join when they name the same comparison
    (the hash of their shared settings), or are trained with the same settings but the seed (a sweep's or a
    claim's seeds, each `bench run --seed N`, and the untrained reference that ran with one of them). A run outside
    any comparison is a group of its own."""
    if runs.empty:
        return []
    rows = runs.sort_values("id").to_dict("records")
    parent = list(range(len(rows)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[tuple[str, str], int] = {}
    for i, row in enumerate(rows):
        for key in (("comparison", comparison_of(row)), ("seeds", seeds_key(row))):
            if key[1] is None:
                continue
            j = first.setdefault(key, i)
            parent[root(i)] = root(j)
    groups: dict[int, list[dict]] = {}
    for i, row in enumerate(rows):
        groups.setdefault(root(i), []).append(row)
    return sorted(groups.values(), key=lambda g: int(g[0]["id"]))


def comparison_runs(runs: pd.DataFrame, comparison: str) -> dict[str, list[int]]:
    """Method label -> the finished run ids of the comparison a run with this comparison hash belongs to, pooled
    over every command that made them and over their seeds (`comparison_groups`)."""
    if runs.empty:
        return {}
    for group in comparison_groups(runs):
        if any(comparison_of(r) == comparison for r in group):
            return by_method(group, finished_only=True)
    return {}
