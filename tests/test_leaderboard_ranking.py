"""Significance-respecting ranks (leaderboard/ranking.py) on hand-made per-item values."""

from __future__ import annotations

import numpy as np
import pytest

from bench.report import stats
from leaderboard import ranking


def mean_items(values) -> dict:  # noqa: ANN001
    return {"aggregate": "mean", "item_ids": [f"q{i}" for i in range(len(values))], "values": list(map(float, values)), "gold": None}


def test_tied_with_the_best_get_rank_one_and_clear_losers_count_who_beats_them():
    rng = np.random.default_rng(0)
    base = rng.uniform(0, 1, 400)
    items = {
        "d1": {
            0: mean_items(base + 0.20),  # best
            1: mean_items(base + 0.20 + rng.normal(0, 0.05, 400)),  # the same up to noise: tied with the best
            2: mean_items(base),  # clearly worse than both
        }
    }
    ranks = ranking.rank_groups(items, resamples=300)
    assert ranks.per_dataset["d1"].tolist() == [1.0, 1.0, 3.0]
    ci = stats.paired_bootstrap(items["d1"][0], items["d1"][1], resamples=300)
    assert not ci.excludes_zero  # what "tied" means: the pair's CI covers 0
    assert ranks.mean_rank.tolist() == [1.0, 1.0, 3.0]
    assert ranks.low[2] == ranks.high[2] == 3.0  # both others are significantly better: surely last
    assert (ranks.low[0], ranks.high[0]) == (1.0, 2.0)  # tied with group 1: first or second
    assert (ranks.low[1], ranks.high[1]) == (1.0, 2.0)
    assert (ranks.low <= ranks.mean_rank).all() and (ranks.mean_rank <= ranks.high).all()


def test_mean_rank_over_datasets_and_missing_items():
    rng = np.random.default_rng(1)
    base = rng.uniform(0, 1, 300)
    items = {
        "d1": {0: mean_items(base + 0.3), 1: mean_items(base)},  # 0 wins d1
        "d2": {0: mean_items(base), 1: mean_items(base + 0.3), 2: mean_items(base - 0.3)},  # 1 wins d2; 2 only here
    }
    ranks = ranking.rank_groups(items, resamples=200)
    assert ranks.per_dataset.loc[0].tolist() == [1.0, 2.0]
    assert ranks.per_dataset.loc[1].tolist() == [2.0, 1.0]
    assert np.isnan(ranks.per_dataset.loc[2, "d1"]) and ranks.per_dataset.loc[2, "d2"] == 3.0
    assert ranks.mean_rank.tolist() == [1.5, 1.5, 3.0]
    assert ranks.low[0] == ranks.high[0] == 1.5  # every difference is significant: the interval is the rank


def test_spearman_on_resample_counts_equals_scoring_each_drawn_array():
    """The count-weighted Spearman (no copy of the data per resample) is the Spearman of each resampled array, and
    the rank's pairwise CI is the one paired_bootstrap gives the same two scores."""
    rng = np.random.default_rng(2)
    gold = np.round(rng.uniform(0, 5, 150), 1)  # ties in gold too
    ids = [f"{i:03d}" for i in range(150)]
    good, bad = gold + rng.normal(0, 0.5, 150), gold + rng.normal(0, 3, 150)
    full, boot = stats.resampled_score("spearman", good, gold, resamples=400)
    idx = np.random.default_rng(stats.SEED).integers(0, 150, size=(400, 150))
    direct = stats.spearman_x100_rows(good[idx], gold[idx])
    assert boot == pytest.approx(direct, abs=1e-9)
    assert full == pytest.approx(stats.spearman_x100_rows(good[None], gold[None])[0])
    a = {"aggregate": "spearman", "item_ids": ids, "values": bad.tolist(), "gold": gold.tolist()}
    b = {"aggregate": "spearman", "item_ids": ids, "values": good.tolist(), "gold": gold.tolist()}
    ci = stats.paired_bootstrap(a, b, resamples=400)
    ranks = ranking.rank_groups({"d": {0: a, 1: b}}, resamples=400)
    assert ci.excludes_zero and ranks.better["d"] == {(1, 0)}
    assert ranks.per_dataset["d"].tolist() == [2.0, 1.0] and ranks.low.tolist() == [2.0, 1.0] and ranks.high.tolist() == [2.0, 1.0]


def test_resampled_ranks_equal_rankdata_of_each_resample_with_ties():
    from scipy.stats import rankdata

    rng = np.random.default_rng(3)
    values = np.round(rng.uniform(0, 5, 60), 0)  # 6 distinct values: many ties
    counts = stats.resample_counts(60, 20, seed=5)
    idx = np.random.default_rng(5).integers(0, 60, size=(20, 60))  # the draws behind those counts
    ranks = stats.resampled_ranks(values, counts)
    for b in range(20):
        direct = rankdata(values[idx[b]])  # rank of each drawn copy
        for position, item in enumerate(idx[b]):
            assert ranks[b, item] == direct[position]
    assert (counts.sum(axis=1) == 60).all()
