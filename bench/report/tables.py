"""The comparison tables the CLI prints (`bench run`, `bench results`, `bench eval`): what a reviewer asks for.

For each dataset: n (items scored) and its subset beside a `--limit` one (`stsb (sample of 300 of 1,379)`); per method the clean and
attacked scores (the mean over seeds when a method has several runs, +- 95% t-interval from 3 seeds on); for
each method against the reference row the difference with a 95% interval (`bench.report.stats.seed_item_ci`: a
paired bootstrap over the items the database keeps, STS pairs, retrieval queries, kNN test items, plus the
between-seed variance with 3 or more seeds) and stars corrected over the table (Holm by default); the aggregate over
datasets (mean, IQM, probability of improvement) when a metric was scored on several; and for every attacked variant the share of texts the
attack changed and of clean texts already cut at max_len (Score.info), with a warning when under half changed.

Reads only the results database; never evaluates or writes anything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from bench.evaluate.attacks import CLEAN, describe_variant, order_variants
from bench.evaluate.subsets import labelled_dataset
from bench.evaluate.suites.metadata import items_word
from bench.report import stats
from bench.report.stats import DEFAULT_RESAMPLES, mean_ci
from results_db import ResultsDB

FEW_CHANGED = 0.5  # an attacked variant that changed fewer texts than this is mostly the clean score
# Training loss that never rises above this from step 1 on: the backbone already solves the method's task.
SOLVED_LOSS = 1e-3


def _info(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def dataset_label(dataset: str, info: Any) -> str:
    """'stsb' or, for a `--limit 300` subset, 'stsb (sample of 300 of 1,379)' (bench.evaluate.subsets): a subset's
    scores sit in rows of their own, never beside the full set's or another subset's."""
    return labelled_dataset(dataset, info)


def _variant_order(variants: Sequence[str]) -> list[str]:
    """clean, then each attack family in registry order and each family's variants in their axis order."""
    return order_variants(variants)


def load_scores(db: ResultsDB, runs_by_method: Mapping[str, Sequence[int]]) -> pd.DataFrame:
    """Long scores of every run, with columns method and label (dataset with its subset flag)."""
    ids = [i for runs in runs_by_method.values() for i in runs]
    scores = db.scores(ids)
    if scores.empty:
        return scores
    method_of = {i: m for m, runs in runs_by_method.items() for i in runs}
    scores = scores.assign(method=scores["run_id"].map(method_of))
    scores["label"] = [dataset_label(d, i) for d, i in zip(scores["dataset"], scores["info"])]
    return scores


def with_run_columns(db: ResultsDB, scores: pd.DataFrame) -> pd.DataFrame:
    """`scores` with each score's run's seed and kind (run_seed, run_kind), which the intervals need."""
    runs = db.runs().set_index("id")
    scores["run_seed"] = scores["run_id"].map(runs["seed"])
    scores["run_kind"] = scores["run_id"].map(runs["kind"])
    return scores


def _fmt(value: float) -> str:
    return "" if value is None or np.isnan(value) else f"{value:.2f}"


def _cell(values: Sequence[float]) -> str:
    """One run: its score; several (seeds): their mean, +- half-width of the 95% t-interval from 3 seeds on (over 2
    seeds a t(1) interval says nothing: the mean alone)."""
    if len(values) < stats.MIN_SEEDS:
        return _fmt(float(np.mean(values))) if len(values) else ""
    ci = mean_ci(values)
    return f"{ci.mean:.2f}±{(ci.high - ci.low) / 2:.2f}" if not np.isnan(ci.low) else _fmt(ci.mean)


def _items_count(n: pd.Series) -> int | str:
    """The items a score rests on; '-' where its source did not say (an imported MTEB score stores n 0)."""
    largest = pd.to_numeric(n, errors="coerce").max()
    return int(largest) if largest == largest and largest > 0 else "-"


def scores_table(scores: pd.DataFrame, methods: Sequence[str]) -> pd.DataFrame:
    """One row per (suite, dataset, metric, method): n, seeds, clean, each attacked variant, and the change: of each
    variant for one method, of the variants' mean when methods are compared (a narrower table)."""
    variants = _variant_order(scores["variant"].unique().tolist())
    attacked = [v for v in variants if v != CLEAN]
    rows = []
    for (suite, label, metric), group in scores.groupby(["suite", "label", "metric"], sort=False):
        for method in methods:
            mine = group[group["method"] == method]
            if mine.empty:
                continue
            row: dict[str, Any] = {"suite": suite, "dataset": label, "metric": metric, "n": _items_count(mine["n"]),
                                   "method": method, "seeds": mine["run_id"].nunique()}  # fmt: skip
            per_run = mine.pivot_table(index="run_id", columns="variant", values="value", aggfunc="first")
            for v in variants:
                row[v] = _cell(per_run[v].dropna().tolist()) if v in per_run else ""
            present = [v for v in attacked if v in per_run]
            if len(methods) == 1 and CLEAN in per_run:  # one model (bench eval): the change of each variant
                for v in present:
                    row[f"change({v})"] = _cell((per_run[v] - per_run[CLEAN]).dropna().tolist())
            elif present and CLEAN in per_run:  # without clean (needle's lengths) the variants are the scores
                mean_attacked = per_run[present].mean(axis=1)
                row["attacked(mean)"] = _cell(mean_attacked.dropna().tolist())
                if CLEAN in per_run:
                    row["change(mean)"] = _cell((mean_attacked - per_run[CLEAN]).dropna().tolist())
            rows.append(row)
    table = pd.DataFrame(rows)
    if not table.empty and (table["seeds"] == 1).all():
        table = table.drop(columns="seeds")
    return table.fillna("")


def _items(db: ResultsDB, score_id: int) -> dict | None:
    items = db.score_items(int(score_id))
    if items is None:
        return None
    return {"aggregate": items.aggregate, "item_ids": items.item_ids, "values": items.values, "gold": items.gold}


def _resamples(db: ResultsDB, score_ids: Sequence[int], resamples: int) -> tuple[np.ndarray, np.ndarray, int] | str:
    """Each score's value and item resamples on the items all of them share ((k,), (k, R), n), or why not."""
    items = [_items(db, i) for i in score_ids]
    if any(item is None for item in items):
        return "(no per-item values)"
    if len({item["aggregate"] for item in items}) > 1:
        return "(the runs aggregate differently)"
    common = stats.common_items(*items)
    minimum = stats.MIN_ITEMS.get(items[0]["aggregate"], 1)
    if len(common) < minimum:
        return f"(the runs share {len(common)} item(s); the bootstrap needs at least {minimum})"
    pairs = [stats.resampled(item, common, (db.url, int(i)), resamples) for item, i in zip(items, score_ids)]
    return np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs]), len(common)


def _seeds_vary(rows: pd.DataFrame) -> bool:
    """Whether a method's runs are training seeds (a trained method), not one untrained model scored once."""
    kinds = set(rows["run_kind"]) if "run_kind" in rows else set()
    return "train" in kinds or rows["run_id"].nunique() > 1


def difference_numbers(db: ResultsDB, scores: pd.DataFrame, reference: str, methods: Sequence[str],
                       resamples: int = DEFAULT_RESAMPLES, correction: str = "holm") -> pd.DataFrame:  # fmt: skip
    """Each method minus the reference on every (suite, dataset, metric, variant), with its 95% interval, as numbers:
    columns suite, dataset (the catalog name, as in every score frame: docs/reference/naming.md), subset (the
    `--limit` N, None for the whole dataset), metric, variant, method, n, diff, ci_low, ci_high, p (floats; NaN where no interval
    could be computed, `interval` then says why), significant (the interval excludes 0 after the `correction`,
    Holm by default, over every difference of this table; never where a trained side has fewer than 3 seeds:
    `stats.seed_variance_estimated`) and interval (how it was computed).

    The difference of the methods' means over their runs (seeds), every run rescored on the same resamples of the
    items all of them share (`bench.report.stats.seed_item_ci`): with 3 or more seeds per trained method, the
    interval combines the between-seed variance and the item sampling (t, Welch-Satterthwaite df; interval
    "seeds+items"); with fewer, the paired bootstrap over the items (percentile; "items"), and the note says the
    seed variance is not estimated. One run against one run is exactly `paired_bootstrap` (the leaderboard's
    computation). `p` is each difference's own two-sided p-value, `ci_low`/`ci_high` its uncorrected interval.
    """
    rows = []
    keys = ["suite", "label", "metric", "variant"]
    for (suite, label, metric, variant), group in scores.groupby(keys, sort=False) if not scores.empty else ():
        ref = group[group["method"] == reference].sort_values("run_id")
        if ref.empty:
            continue
        for method in methods:
            if method == reference:
                continue
            mine = group[group["method"] == method].sort_values("run_id")
            if mine.empty:
                continue
            subset = _info(group["info"].iloc[0]).get("limit")  # one label: one dataset at one subset
            row = {"suite": suite, "dataset": group["dataset"].iloc[0], "subset": subset, "metric": metric,
                   "variant": variant, "method": method,
                   "n": int(mine["n"].max()), "judged": stats.seed_variance_estimated(
                       (ref["run_id"].nunique(), mine["run_id"].nunique()), (_seeds_vary(ref), _seeds_vary(mine)))}  # fmt: skip
            got = _resamples(db, [*ref["id"], *mine["id"]], resamples)
            if isinstance(got, str):
                diff = float(mine["value"].mean() - ref["value"].mean())
                row.update(diff=diff, ci_low=np.nan, ci_high=np.nan, p=np.nan, interval=got)
            else:
                full, boot, n_items = got
                k = len(ref)
                ci = stats.seed_item_ci(full[:k], boot[:k], full[k:], boot[k:], seeds_vary=(_seeds_vary(ref), _seeds_vary(mine)),
                                        n_items=n_items)  # fmt: skip
                interval = f"seeds+items ({min(len(ref), len(mine)) if len(ref) > 1 else len(mine)} seeds)" \
                    if ci.method == "seeds+items" else "bootstrap"  # fmt: skip
                if ci.note:
                    interval += f"; {ci.note}"
                row.update(diff=float(ci.difference), ci_low=float(ci.low), ci_high=float(ci.high), p=float(ci.p),
                           interval=interval)  # fmt: skip
            rows.append(row)
    columns = ["suite", "dataset", "subset", "metric", "variant", "method", "n", "diff", "ci_low", "ci_high", "p",
               "significant", "interval"]  # fmt: skip
    table = pd.DataFrame(rows, columns=[c for c in columns if c != "significant"])
    judged = [r["judged"] for r in rows]
    table.insert(columns.index("significant"), "significant",
                 stats.corrected_stars(table["p"].to_numpy(dtype=float), correction, judged=judged) if len(table) else [])
    return table.astype({"diff": float, "ci_low": float, "ci_high": float, "p": float, "significant": bool})


def differences_table(db: ResultsDB, scores: pd.DataFrame, reference: str, methods: Sequence[str],
                      resamples: int = DEFAULT_RESAMPLES, correction: str = "holm") -> pd.DataFrame:  # fmt: skip
    """`difference_numbers` as the report prints it: `*` after the difference when it excludes 0 after the
    `correction` over every difference of this table, `ci` the uncorrected interval as text (or why there is none),
    `p` each difference's own two-sided p-value."""
    numbers = difference_numbers(db, scores, reference, methods, resamples=resamples, correction=correction)
    if numbers.empty:
        return pd.DataFrame()
    table = numbers.copy()
    table["dataset"] = [dataset_label(d, {"limit": s}) for d, s in zip(numbers["dataset"], numbers["subset"])]
    table["diff"] = [_fmt(d) + ("*" if s else "") for d, s in zip(numbers["diff"], numbers["significant"])]
    has_ci = numbers["ci_low"].notna()
    table["ci"] = [f"[{lo:.2f}, {hi:.2f}]" if ok else why for lo, hi, ok, why
                   in zip(numbers["ci_low"], numbers["ci_high"], has_ci, numbers["interval"])]  # fmt: skip
    table["interval"] = [why if ok else "" for ok, why in zip(has_ci, numbers["interval"])]
    table["p"] = [f"{p:.3g}" if np.isfinite(p) else "" for p in numbers["p"]]
    return table[["suite", "dataset", "metric", "variant", "method", "n", "diff", "ci", "p", "interval"]]


def aggregates_table(db: ResultsDB, scores: pd.DataFrame, reference: str, methods: Sequence[str],
                     resamples: int = DEFAULT_RESAMPLES) -> pd.DataFrame:  # fmt: skip
    """Per (metric, variant) scored on 2 or more datasets, each method's mean and interquartile mean over the
    datasets every method scored, with stratified-bootstrap 95% intervals (items within each dataset, seeds within
    the method; `bench.report.stats.aggregate_over_datasets`), and its probability of improvement over the
    reference (rliable's: per dataset P(a seed of the method > a seed of the reference), averaged over datasets)."""
    rows = []
    for (metric, variant), group in scores.groupby(["metric", "variant"], sort=False):
        cells = group.groupby(["suite", "label"], sort=False)
        datasets = [key for key, cell in cells if set(methods) <= set(cell["method"])]
        if len(datasets) < 2:
            continue
        per_method: dict[str, tuple[list, list]] = {}
        for method in methods:
            full, boot = [], []
            for key in datasets:
                cell = cells.get_group(key)
                got = _resamples(db, cell[cell["method"] == method].sort_values("run_id")["id"].tolist(), resamples)
                if isinstance(got, str):
                    break
                full.append(got[0])
                boot.append(got[1])
            else:
                per_method[method] = (full, boot)
        for method, (full, boot) in per_method.items():
            agg = stats.aggregate_over_datasets(full, boot, resamples=resamples)
            row = {"metric": metric, "variant": variant, "method": method, "datasets": len(datasets),
                   "seeds": agg["mean"].seeds}  # fmt: skip
            for name in ("mean", "IQM"):
                a = agg[name]
                row[name] = f"{a.value:.2f} [{a.low:.2f}, {a.high:.2f}]"
            if method != reference and reference in per_method:
                row[f"P(> {reference})"] = f"{stats.probability_of_improvement(full, per_method[reference][0]):.2f}"
            rows.append(row)
    table = pd.DataFrame(rows)
    if not table.empty and (table["seeds"] == 1).all():
        table = table.drop(columns="seeds")
    return table.fillna("")


def attack_table(scores: pd.DataFrame) -> pd.DataFrame:
    """What each attack changed, per (dataset, variant) and, when they differ (another tokenizer), per method."""
    rows = []
    for _, s in scores.iterrows():
        info = _info(s["info"])
        if s["variant"] == CLEAN or "changed_frac" not in info:
            continue
        rows.append({"dataset": s["label"], "variant": s["variant"], "method": s["method"],
                     "changed": info["changed_frac"], "truncated(clean)": info.get("truncated_frac", np.nan)})  # fmt: skip
    if not rows:
        return pd.DataFrame()
    table = pd.DataFrame(rows).drop_duplicates(["dataset", "variant", "method"])
    same = table.groupby(["dataset", "variant"])[["changed", "truncated(clean)"]].nunique().max(axis=1).max() <= 1
    if same:
        table = table.drop(columns="method").drop_duplicates(["dataset", "variant"])
    return table


def attack_warnings(table: pd.DataFrame) -> list[str]:
    """One line per attacked variant that changed under half of the texts."""
    if table.empty:
        return []
    out = []
    for _, row in table[table["changed"] < FEW_CHANGED].iterrows():
        who = f" ({row['method']})" if "method" in row else ""
        head = f"warning: {row['variant']} changed only {100 * row['changed']:.0f}% of {row['dataset']}'s texts{who}: "
        if describe_variant(row["variant"]).family == "elong":
            out.append(head + elong_unchanged(row["variant"], row["changed"], row["truncated(clean)"])
                       + ", so this 'attacked' score is mostly the clean one")  # fmt: skip
        else:
            out.append(head + f"the others' model input is as it was ({100 * row['truncated(clean)']:.0f}% of the "
                       "texts already fill max_len), so this 'attacked' score is mostly the clean one")  # fmt: skip
    return out


def elong_unchanged(variant: str, changed: float, truncated: float) -> str:
    """Why an elongation left texts as they were, in shares that add up to the share unchanged. A text already cut at
    max_len is always unchanged (its copies are cut off again); every other unchanged text got m = 1, which only
    random m draws (from 1 to the copies that fit; a text over half of max_len fits one)."""
    unchanged = round(100 * (1 - changed))
    full = min(round(100 * (truncated if truncated == truncated else 0.0)), unchanged)  # NaN: not recorded
    parts = [f"{full}% already fill max_len (an elongation cut at max_len leaves them as they are)"]
    if unchanged - full:
        why = ("drew m = 1 (random m is drawn from 1 to the copies that fit; a text over half of max_len fits one)"
               if variant.endswith("rand") else "were left as they were for another reason (e.g. empty texts)")
        parts.append(f"{unchanged - full}% {why}")
    return f"of the {unchanged}% left as they were, " + " and ".join(parts)


def _to_text(table: pd.DataFrame) -> str:
    return table.to_string(index=False, float_format=lambda v: f"{v:.2f}")


def comparison_report(db: ResultsDB, runs_by_method: Mapping[str, Sequence[int]], reference: str | None = None,
                      resamples: int = DEFAULT_RESAMPLES, profile: bool | None = None,
                      correction: str = "holm") -> str:  # fmt: skip
    """The full text block: scores with n, differences against the reference with intervals, attack effects, and
    the robustness profile (`bench.report.robustness`): always with `profile=True` (`bench eval`, `bench run`),
    never with False, and with None (`bench results`) when a family other than elong was run, so tables of
    elongation-only databases read as they always did."""
    methods = list(runs_by_method)
    scores = load_scores(db, runs_by_method)
    if scores.empty:
        return "(no scores)"
    scores = with_run_columns(db, scores)
    parts = ["scores (n = items per dataset; DATASET (sample of N of M) = a --limit subset of N of its M items, a seeded "
             "sample, or 'first N' in file order"
             + ("; several seeds: their mean, ±half-width of the 95% t-interval from 3 seeds on"
                if any(len(r) > 1 for r in runs_by_method.values()) else "")
             + ")", _to_text(scores_table(scores, methods))]  # fmt: skip
    if reference is None:
        reference = "vanilla" if "vanilla" in methods else methods[0]
    if reference not in methods:
        raise KeyError(f"--reference {reference!r} is not one of the compared methods ({', '.join(methods)})")
    if len(methods) > 1:
        diffs = differences_table(db, scores, reference, methods, resamples=resamples, correction=correction)
        if not diffs.empty:
            items = items_word(diffs["suite"].unique().tolist())
            family = len(diffs)
            star = (f"* = excludes 0 after {stats.CORRECTION_NAMES[correction]} correction over the {family} differences "
                    "of this table" if correction != "none" else "* = p < 0.05, uncorrected")
            star += "; none where a learned method has fewer than 3 seeds (its interval is the items' alone)"
            parts += ["", f"difference vs {reference} (95% CI, uncorrected: interval 'bootstrap' = paired bootstrap "
                          f"over the {items}; 'seeds+items' = the between-seed variance (3+ seeds) plus the paired "
                          f"bootstrap over the {items}, t with Welch-Satterthwaite df; p = two-sided; {star})",
                      _to_text(diffs)]  # fmt: skip
        aggregates = aggregates_table(db, scores, reference, methods, resamples=resamples)
        if not aggregates.empty:
            parts += ["", "aggregate over datasets (mean and interquartile mean of the datasets every method scored, "
                          "95% stratified-bootstrap CI: items within each dataset, seeds within each method; "
                          f"P(> {reference}) = probability of improvement: per dataset P(a seed of the method beats "
                          f"one of {reference}), Mann-Whitney, averaged over datasets)", _to_text(aggregates)]  # fmt: skip
    attacks = attack_table(scores)
    if not attacks.empty:
        shown = attacks.assign(**{c: (100 * attacks[c]).map(lambda v: f"{v:.0f}%") for c in ("changed", "truncated(clean)")})
        parts += ["", "attacks (changed = texts whose model input the attack changed; truncated = clean texts "
                      "longer than max_len)", _to_text(shown)]  # fmt: skip
        parts += attack_warnings(attacks)
    if profile is None:
        profile = any(describe_variant(v).family not in (None, "elong") for v in scores["variant"].unique())
    if profile:
        from bench.report.robustness import profile_report

        parts += profile_report(scores, lambda score_id: _items(db, score_id), resamples)
    return "\n".join(parts)


def loss_warning(method: str, losses: Sequence[float], threshold: float = SOLVED_LOSS) -> str | None:
    """The one note for a training loss that stays below `threshold` from step 1: it states what the loss says
    (the backbone already solves this method's training task), not what the scores will do."""
    if losses and max(losses) < threshold:
        return (f"note: [{method}] loss < {threshold:.0e} from step 1 (max {max(losses):.2e}): the backbone already "
                "solves this method's training task")
    return None
