"""The diag suite's view of the leaderboard: its geometry measures per group and variant, mean over seeds."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bench.evaluate.suites.metadata import SUITES
from leaderboard.grouping import GROUP_KEYS, group_label, latest_per_seed, with_group_keys

DIAG_PLOT_METRICS = SUITES["diag"].plot_metrics



def build_diag(scores: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """diag measures per group and variant, mean over seeds: columns label, metric, variant, value, seeds."""
    keys = ["dataset", "variant", "metric"]
    per_seed, groups = latest_per_seed(scores[["run_id", *keys, "value"]], runs, keys)
    if per_seed.empty:
        return pd.DataFrame(columns=[*GROUP_KEYS, "label", "metric", "variant", "value", "seeds"])
    stats = per_seed.groupby(["group", "metric", "variant"], sort=False)["value"].agg(value="mean", seeds="count").reset_index()
    present = np.unique(stats["group"].to_numpy())
    labels = pd.Series(group_label(groups.iloc[present]).to_numpy(), index=present)
    stats["label"] = labels.reindex(stats["group"].to_numpy()).to_numpy()
    return with_group_keys(stats, groups)

