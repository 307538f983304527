"""The robustness profile the CLI prints under the comparison tables: for each attack family, the score at every
point of the family's axis (length factor m, context length for `needle`, the fact's depth for `position`, ...), with a 95% interval, its change
against clean with a paired interval, and the share of texts the attack changed; then one summary line per run and
family (mean attacked score / clean score).

Order, family and axis of every variant come from the attack registry (`bench.evaluate.attacks.describe_variant`).
Intervals: one run per method -> bootstrap over the items the database keeps (percentile, 1,000 resamples; the
change is a paired bootstrap, `bench.report.stats.paired_bootstrap`); several runs (seeds) -> Student-t over seeds
(`mean_ci`) from 3 seeds on, none for 2. Only each dataset's first metric (its main one: nDCG@10, Spearman, kNN accuracy, nDCG@1) is profiled;
the length diagnostics (`diag`) are geometry, not scores, and stay in their own table.

Reads only the results database; never evaluates or writes anything.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from bench.evaluate.attacks import CLEAN, describe_variant, order_variants
from bench.evaluate.suites.position import position_sensitivity
from bench.report import stats
from bench.report.stats import DEFAULT_LEVEL, paired_bootstrap, seeds_ci

NOT_PROFILED = {"diag"}


def score_interval(items: dict | None, resamples: int = 1000, level: float = DEFAULT_LEVEL, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of one score from its per-item values (nan, nan without them): the one
    computation of `bench.report.stats` (`score_interval`)."""
    return stats.score_interval(items, resamples=resamples, level=level, seed=seed)


def _interval(low: float, high: float) -> str:
    return "" if np.isnan(low) else f"[{low:.2f}, {high:.2f}]"


def _value(v: float) -> str:
    return "" if v is None or np.isnan(v) else f"{v:.2f}"


def profile_tables(scores: pd.DataFrame, items_of: Callable[[int], dict | None],
                   resamples: int = 1000) -> tuple[pd.DataFrame, pd.DataFrame]:  # fmt: skip
    """(profile, summary) of long scores (columns id, run_id, suite, label, metric, variant, value, info, method).

    `items_of(score_id)`: the score's per-item values ({"aggregate", "item_ids", "values", "gold"}) or None.
    """
    rows: list[dict[str, Any]] = []
    summary: list[dict[str, Any]] = []
    scores = scores[~scores["suite"].isin(NOT_PROFILED)]
    if scores.empty or not (scores["variant"] != CLEAN).any():
        return pd.DataFrame(), pd.DataFrame()
    main = scores.drop_duplicates(["suite", "label"])[["suite", "label", "metric"]]
    for suite, label, metric in main.itertuples(index=False):
        group = scores[(scores["suite"] == suite) & (scores["label"] == label) & (scores["metric"] == metric)]
        for method in dict.fromkeys(group["method"]):
            mine = group[group["method"] == method]
            per_run = mine.pivot_table(index="run_id", columns="variant", values="value", aggfunc="first")
            has_clean = CLEAN in per_run
            by_family: dict[str, list[float]] = {}
            for variant in order_variants(mine["variant"].unique().tolist()):
                if variant == CLEAN:
                    continue
                described = describe_variant(variant)
                family = described.family or "other"
                mine_v = mine[mine["variant"] == variant]
                row = {"suite": suite, "dataset": label, "metric": metric, "method": method, "family": family,
                       "variant": variant, "x": described.x_label}  # fmt: skip
                if len(per_run) == 1:
                    attacked = items_of(int(mine_v["id"].iloc[0]))
                    score = float(mine_v["value"].iloc[0])
                    low, high = score_interval(attacked, resamples)
                    change, change_ci = "", ""
                    if has_clean:
                        clean = items_of(int(mine[mine["variant"] == CLEAN]["id"].iloc[0]))
                        change = _value(score - float(per_run[CLEAN].iloc[0]))
                        if clean and attacked:
                            try:
                                ci = paired_bootstrap(clean, attacked, resamples=resamples)
                                change_ci = _interval(ci.low, ci.high) + ("*" if ci.excludes_zero else "")
                            except ValueError:
                                pass
                else:
                    ci_v = seeds_ci(per_run[variant].dropna().tolist())
                    score, low, high = ci_v.mean, ci_v.low, ci_v.high
                    change, change_ci = "", ""
                    if has_clean:
                        d = seeds_ci((per_run[variant] - per_run[CLEAN]).dropna().tolist())
                        change = _value(d.mean)
                        change_ci = _interval(d.low, d.high) + ("*" if not np.isnan(d.low) and (d.low > 0 or d.high < 0) else "")
                changed = [i.get("changed_frac") for i in mine_v["info"] if isinstance(i, dict) and "changed_frac" in i]
                row.update(score=_value(score), ci=_interval(low, high), change=change, **{"change ci": change_ci},
                           changed=f"{100 * np.mean(changed):.0f}%" if changed else "")  # fmt: skip
                rows.append(row)
                if described.x_label != "mean":  # needle's len-mean is itself a summary of the lengths
                    by_family.setdefault(family, []).append(score)
            for family, values in by_family.items():
                line = {"suite": suite, "dataset": label, "metric": metric, "method": method, "family": family,
                        "variants": len(values), "attacked(mean)": _value(float(np.mean(values)))}  # fmt: skip
                if family == "depth" and len(values) > 1:  # the position suite: Zeng et al.'s sensitivity index
                    line["PSI"] = _value(float(position_sensitivity(values)))
                if has_clean:
                    clean_value = float(per_run[CLEAN].mean())
                    line["clean"] = _value(clean_value)
                    line["attacked/clean"] = f"{np.mean(values) / clean_value:.3f}" if clean_value else ""
                summary.append(line)
    return pd.DataFrame(rows), pd.DataFrame(summary).fillna("")


def profile_report(scores: pd.DataFrame, items_of: Callable[[int], dict | None], resamples: int = 1000) -> list[str]:
    """The profile's lines for the CLI ([] when no attacked score is present)."""
    profile, summary = profile_tables(scores, items_of, resamples)
    if profile.empty:
        return []
    return [
        "",
        "robustness profile (per attack family, in its axis order: x = length factor m, or context length in tokens "
        "for needle, or the fact's depth in % of the context for position; ci = 95% bootstrap over items for one run, t-interval over seeds from 3 seeds on (none for 2: "
        "their variance is not estimated); change = attacked "
        "- clean with its paired interval, * = excludes 0; changed = texts whose model input the attack changed)",
        profile.to_string(index=False),
        "",
        "robustness summary (per run and attack family: mean attacked score, clean score, and their ratio; PSI = "
        "position sensitivity index of the position suite's depths, 100 * (best - worst) / best, 0 = no position "
        "effect)",
        summary.to_string(index=False),
    ]
