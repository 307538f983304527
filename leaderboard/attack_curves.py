"""Robustness and length curves of the leaderboard: clean vs attacked per group (the robustness table), score vs
the attack's axis per group and variant (the robustness curve), and score vs context length for variants without a
clean score (the needle suite's len-N). Groups and seeds as `leaderboard.grouping` defines them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bench.evaluate.attacks import CLEAN, describe_variant, order_variants  # the one definition of the clean variant's name
from leaderboard.grouping import GROUP_KEYS, coded_groups, group_label, latest_per_seed, part_datasets, with_group_keys




def family_axis(family: str) -> str:
    """The x axis title of a family's robustness curve (from the attack registry)."""
    from bench.evaluate.attacks import families

    return next((f.axis for f in families() if f.name == family), "variant")



def _paired_per_seed(scores: pd.DataFrame, runs: pd.DataFrame, dataset: str | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per (group, seed, variant): the attacked score and the clean score over the same datasets ("value",
    "value_clean"), and the groups. dataset None: the mean over the datasets scored both ways."""
    if dataset is not None:
        scores = scores[scores["dataset"] == dataset]
    else:
        scores = scores[~scores["dataset"].isin(part_datasets(scores["dataset"].unique().tolist()))]
    per_seed, groups = latest_per_seed(scores[["run_id", "dataset", "variant", "value"]], runs, ["dataset", "variant"])
    is_clean = (per_seed["variant"] == CLEAN).to_numpy(dtype=bool)
    columns = ["group", "seed", "variant", "value", "value_clean"]
    if not is_clean.any():
        return pd.DataFrame(columns=columns), groups
    per_seed["dataset"] = pd.factorize(per_seed["dataset"])[0]
    clean = per_seed.loc[is_clean, ["group", "seed", "dataset", "value"]]
    attacked = per_seed.loc[~is_clean, ["group", "seed", "dataset", "variant", "value"]]
    paired = attacked.merge(clean, on=["group", "seed", "dataset"], suffixes=("", "_clean"))
    if paired.empty:
        return pd.DataFrame(columns=columns), groups
    return paired.groupby(["group", "seed", "variant"], sort=False)[["value", "value_clean"]].mean().reset_index(), groups



def attack_rate_by_group(rates: pd.DataFrame, runs: pd.DataFrame, dataset: str | None = None) -> pd.DataFrame:
    """Mean fraction of texts each attack changed, per (group, variant), over the group's runs and the datasets
    shown: columns group, variant, changed_frac (group codes as `coded_groups` numbers `runs`)."""
    if rates is None or rates.empty:
        return pd.DataFrame(columns=["group", "variant", "changed_frac"])
    runs = runs.reset_index(drop=True)
    codes, _ = coded_groups(runs)
    if dataset is not None:
        rates = rates[rates["dataset"] == dataset]
    position = pd.Index(runs["id"]).get_indexer(rates["run_id"])
    mine = rates[position >= 0].assign(group=codes[position[position >= 0]])
    return mine.groupby(["group", "variant"], sort=False)["changed_frac"].mean().reset_index()



def build_robustness(scores: pd.DataFrame, runs: pd.DataFrame, dataset: str | None = None,
                     rates: pd.DataFrame | None = None) -> pd.DataFrame:  # fmt: skip
    """Clean vs attacked per group: columns clean, each variant, 'change <variant>' (attacked - clean) and, with
    `rates` (run_id, dataset, variant, changed_frac), 'changed <variant>' (fraction of texts the attack changed).

    scores: run_id, dataset, variant, value (one suite and metric). dataset None: the average over the
    datasets a run has both clean and attacked (per seed, per variant), so the change compares like with like.
    """
    empty = pd.DataFrame(columns=[*GROUP_KEYS, "seeds"])
    per_variant, groups = _paired_per_seed(scores, runs, dataset)
    if per_variant.empty:
        return empty
    per_variant["change"] = per_variant["value"] - per_variant["value_clean"]
    means = per_variant.groupby(["group", "variant"], sort=False)[["value", "value_clean", "change"]].mean()
    seeds = per_variant.groupby("group", sort=False)["seed"].nunique().rename("seeds")
    variants = order_variants(per_variant["variant"].unique().tolist())
    changed = attack_rate_by_group(rates, runs, dataset).set_index(["group", "variant"])["changed_frac"]
    out = seeds.to_frame()
    # clean column: the clean score over the datasets paired with the first attack that has them (the same set
    # for every attack unless a run lacks an attacked dataset; each change uses its own pairs either way).
    out[CLEAN] = np.nan
    for variant in variants:
        sub = means.xs(variant, level="variant")
        out[CLEAN] = out[CLEAN].fillna(sub["value_clean"])
        out[variant] = sub["value"]
        out[f"change {variant}"] = sub["change"]
    for variant in variants:
        if not changed.empty and variant in changed.index.get_level_values("variant"):
            out[f"changed {variant}"] = changed.xs(variant, level="variant").reindex(out.index)
    out = with_group_keys(out.reset_index(), groups)
    return out.sort_values(CLEAN, ascending=False, kind="stable").reset_index(drop=True)



def variant_family(variant: str) -> str:
    """The attack family of a variant name, as the attack registry parses it ("elong" for elong-2 ... elong-rand, a
    plug-in family "word-swap" for word-swap-2); a name no registered family knows (its plug-in not installed here):
    the text before its first '-'."""
    family = describe_variant(variant).family
    return family if family is not None else variant.split("-", 1)[0]



def on_axis(variant: str) -> bool:
    """Whether a variant is a point of its family's ordered axis, joined by the curve's line (the family declares it:
    AttackFamily.ordered; random m and needle's mean have no x and stand apart)."""
    return describe_variant(variant).on_axis


def variant_m(variant: str) -> str:
    """The x position of a variant on the robustness curve: "1 (clean)", then the variant without its family prefix:
    "2", "4", "8", "rand" (elong), "start-2" (pad), "64" (needle's context lengths), "shuffle"."""
    if variant == CLEAN:
        return "1 (clean)"
    family = describe_variant(variant).family
    return variant.removeprefix(f"{family}-") if family else variant



def length_curve(scores: pd.DataFrame, runs: pd.DataFrame, dataset: str | None = None) -> pd.DataFrame:
    """Score vs context length per group for variants without a clean score (the needle suite's len-N): the mean
    over seeds (of the mean over datasets) with its 95% Student-t interval from 3 seeds on; columns as
    `robustness_curve`."""
    from bench.report.stats import seeds_ci as mean_ci  # no t(1) interval over 2 seeds

    columns = [*GROUP_KEYS, "label", "variant", "m", "on_axis", "score", "low", "high", "seeds", "changed_frac"]
    if dataset is not None:
        scores = scores[scores["dataset"] == dataset]
    per_seed, groups = latest_per_seed(scores[["run_id", "dataset", "variant", "value"]], runs, ["dataset", "variant"])
    if per_seed.empty:
        return pd.DataFrame(columns=columns)
    per_seed = per_seed.groupby(["group", "seed", "variant"], sort=False)["value"].mean().reset_index()
    rows = []
    for (group, variant), values in per_seed.groupby(["group", "variant"], sort=False)["value"]:
        ci = mean_ci(values.to_numpy(dtype=float))
        rows.append({"group": group, "variant": variant, "score": ci.mean, "low": ci.low, "high": ci.high, "seeds": ci.n})
    out = pd.DataFrame(rows).assign(changed_frac=np.nan)
    out["m"] = out["variant"].map(variant_m)
    out["on_axis"] = out["variant"].map(on_axis)
    present = np.unique(out["group"].to_numpy())
    labels = pd.Series(group_label(groups.iloc[present]).to_numpy(), index=present)
    out["label"] = labels.reindex(out["group"].to_numpy()).to_numpy()
    out = with_group_keys(out, groups)
    order = {v: i for i, v in enumerate(order_variants(out["variant"].unique().tolist()))}
    return out.sort_values(["label", "variant"], key=lambda c: c.map(order) if c.name == "variant" else c)[columns].reset_index(drop=True)



def robustness_curve(scores: pd.DataFrame, runs: pd.DataFrame, dataset: str | None = None,
                     rates: pd.DataFrame | None = None) -> pd.DataFrame:  # fmt: skip
    """Score vs m per group: one row per (group, variant incl. clean) with the mean over seeds and its 95%
    Student-t interval (`bench.report.stats.mean_ci`) from 3 seeds on (none from 1 or 2), the seed count and the fraction of
    texts the attack changed. Columns: GROUP_KEYS, label, variant, m, score, low, high, seeds, changed_frac, and
    row (the group's code, as `coded_groups` numbers `runs`)."""
    from bench.report.stats import seeds_ci as mean_ci  # no t(1) interval over 2 seeds

    columns = [*GROUP_KEYS, "label", "variant", "m", "on_axis", "score", "low", "high", "seeds", "changed_frac", "row"]
    per_variant, groups = _paired_per_seed(scores, runs, dataset)
    if per_variant.empty:
        return pd.DataFrame(columns=columns)
    first = per_variant.drop_duplicates(["group", "seed"])  # the clean score of each seed (the paired datasets)
    clean = first[["group", "seed"]].assign(variant=CLEAN, value=first["value_clean"].to_numpy())
    long = pd.concat([clean, per_variant[["group", "seed", "variant", "value"]]], ignore_index=True)
    rows = []
    for (group, variant), values in long.groupby(["group", "variant"], sort=False)["value"]:
        ci = mean_ci(values.to_numpy(dtype=float))
        rows.append({"group": group, "variant": variant, "score": ci.mean, "low": ci.low, "high": ci.high, "seeds": ci.n})
    out = pd.DataFrame(rows)
    changed = attack_rate_by_group(rates, runs, dataset)
    out = out.merge(changed, on=["group", "variant"], how="left") if not changed.empty else out.assign(changed_frac=np.nan)
    out["m"] = out["variant"].map(variant_m)
    out["on_axis"] = out["variant"].map(on_axis)
    present = np.unique(out["group"].to_numpy())
    labels = pd.Series(group_label(groups.iloc[present]).to_numpy(), index=present)
    out["label"] = labels.reindex(out["group"].to_numpy()).to_numpy()
    out["row"] = out["group"].to_numpy()
    out = with_group_keys(out, groups)
    order = {v: i for i, v in enumerate(order_variants(out["variant"].unique().tolist()))}
    return out.sort_values(["label", "variant"], key=lambda c: c.map(order) if c.name == "variant" else c)[columns].reset_index(drop=True)



def robustness_long(table: pd.DataFrame) -> pd.DataFrame:
    """The robustness table as (label, variant, score) rows for the plot."""
    if table.empty:
        return pd.DataFrame(columns=["label", "variant", "score"])
    variants = [c for c in table.columns if c == CLEAN or describe_variant(str(c)).family is not None]
    frame = table.assign(label=group_label(table))
    return frame.melt(id_vars=["label"], value_vars=variants, var_name="variant", value_name="score").dropna()

