"""Which runs make one comparison: every run whose config names the same comparison (the hash of its shared
settings, bench.experiment.run_spec.comparison_key), whichever command made it. `bench run`'s final table,
`bench results` and sweeps read their groups from here.

Inside a comparison, runs are labelled by method, with the hyper-parameters that tell two configurations of one
method apart ("laser3-self (m_mode=twice)"); the runs of one label are its seeds. A configuration computed twice
(same config hash: a re-run) counts once, the newest finished row.

Which runs are seeds of one row is decided here once, for every view: two runs are when their configs are the same
but for the seed (`row_settings`, `row_key`); `bench results` labels by it (`method_labels`) and so does the
leaderboard (leaderboard.grouping.hyperparameter_labels), with `variant_labels`, so the two never pool different runs.
"""

from __future__ import annotations

import hashlib
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


DECLARED_MARK = " (identity declared, not derived)"  # after the label of a model known only by its caller's name


def row_label(row: dict) -> str:
    """A run row's label: its method; a `bench eval` row outside any `bench run` comparison by its model, marked
    when that model's identity was declared by its caller, not derived from its weights (bench.encode.objects)."""
    method = str(row.get("method") or "")
    config = _config(row)
    if row.get("kind") == "eval" and not config.get("comparison"):
        return evaluated_label(method, str(row.get("model") or "")) + declared_mark(config)
    return method


def declared_mark(config: dict) -> str:
    """DECLARED_MARK for the config of a row whose model identity was declared, else ''."""
    from bench.encode.opaque import DECLARED

    return DECLARED_MARK if config.get("identity") == DECLARED else ""


# What a run scored, not how: the suites, and the attacked variants each adds (`--elong`, `--attack`, the needle's
# lengths). A model scored on STS by one command and on BEIR by another is one row with both columns (the board keeps
# each seed's latest score per dataset and variant), not two rows told apart by "suite=...".
SCORED_SELECTION = ("suite", "elong", "attack", "suite_options")
# Which weights an evaluated model is: its label names the model, and the board tells two weights of one name apart
# by their fingerprint (leaderboard.grouping.weights_labels); the fingerprint is absent from rows older than it.
WEIGHTS = ("model", "model_fingerprint")


def row_settings(config: dict) -> dict[str, Any]:
    """What a run shares with every other seed of its row, each setting by the name a label shows it: its config
    less its seed (a trained row's `train.seed`, an evaluation's `seed`) and less the comparison hash (a hash of
    settings that are here one by one). The method's hyper-parameters go by their own names ("m_mode"), the training
    and scoring settings as "train.lr" and "eval.max_len", the versions of a trained row's code as "train.recipe"
    and "method.version" (1 for a row that predates them), every other key by its name ("emb_dtype",
    "corpus_texts"). Left out: what was scored (`SCORED_SELECTION`: one row gathers a model's suites) and an evaluated
    model's name and weights (`WEIGHTS`: its label and the board's weights label say them). Every view's rows are the
    classes of this (`row_key`)."""
    config = config if isinstance(config, dict) else {}
    nested = ("comparison", "seed", "method_config", "train", "eval", "train_recipe", "method_version")
    out = {k: v for k, v in config.items() if k not in nested and k not in SCORED_SELECTION + WEIGHTS}
    out.update({f"eval.{k}": v for k, v in (config.get("eval") or {}).items() if k not in SCORED_SELECTION})
    train = config.get("train")
    if isinstance(train, dict):
        out.update({f"train.{k}": v for k, v in train.items() if k != "seed"})
        out["train.recipe"] = config.get("train_recipe", 1)
        out["method.version"] = config.get("method_version", 1)
    out.update(config.get("method_config") or {})
    return out


def row_key(row: dict) -> str:
    """The row a run is a seed of, in every view (`bench results`, `bench run`'s table, the API, the leaderboard):
    its label's method and its `row_settings`. Two runs with one key differ only in their seed."""
    return json.dumps([row_label(row), row_settings(_config(row))], sort_keys=True, default=str)


def shown_value(value: Any) -> str:
    """A setting's value in a label: text as it is, anything else as JSON ("0.0001", "[\"2\", \"rand\"]")."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


MISSING = "—"  # a setting a row's config lacks (an older row, a default left out of the config)


def variant_labels(labels: list[str], settings: list[dict], within: list[Any] | None = None) -> list[str]:
    """Each label with the settings (`row_settings`) whose values differ among the rows of that label (and of one
    `within` value: the leaderboard's backbone, budget, corpus and subset): "laser3-self (m_mode=twice)". Rows of one
    label and different settings never read alike: where two values would be written the same, the label ends with
    a short hash of its settings."""
    within = [None] * len(labels) if within is None else within
    whole = [json.dumps(s, sort_keys=True, default=str) for s in settings]  # one text per row: most groups are alike
    out = list(labels)
    positions: dict[tuple, list[int]] = {}
    for i, key in enumerate(zip(labels, within)):
        positions.setdefault(key, []).append(i)
    for rows in positions.values():
        distinct = {whole[i]: settings[i] for i in rows}
        if len(distinct) < 2:
            continue
        texts = {w: {k: json.dumps(v, sort_keys=True, default=str) for k, v in s.items()} for w, s in distinct.items()}
        varying = sorted(k for k in set().union(*texts.values()) if len({t.get(k) for t in texts.values()}) > 1)
        named = {w: f" ({', '.join(f'{k}={shown_value(s[k]) if k in s else MISSING}' for k in varying)})"
                 for w, s in distinct.items()}  # fmt: skip
        clash = {n for n in named.values() if list(named.values()).count(n) > 1}
        for w in named:
            if named[w] in clash:  # two settings written alike ("1" and 1): told apart by their hash
                named[w] += f" #{hashlib.sha1(w.encode()).hexdigest()[:6]}"
        for i in rows:
            out[i] = labels[i] + named[whole[i]]
    return out


def method_labels(rows: list[dict]) -> list[str]:
    """Each row's label (`row_label`), with the settings whose values differ among the rows of that label
    (`variant_labels`): inside one comparison, the hyper-parameters and method version that tell two
    configurations of one method apart."""
    return variant_labels([row_label(r) for r in rows], [row_settings(_config(r)) for r in rows])


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
    (it joins by its comparison). Runs of one `row_key` share it: a row's seeds are always in one comparison."""
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
