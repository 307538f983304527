"""The leaderboard's table building and paired bootstrap, on hand-made frames (no Streamlit)."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from bench import stats
from leaderboard import tables


def runs_frame(rows: list[tuple]) -> pd.DataFrame:
    """rows: (id, method, backbone, budget, corpus, seed[, status])."""
    out = []
    for r in rows:
        rid, method, backbone, budget, corpus, seed = r[:6]
        status = r[6] if len(r) > 6 else "finished"
        out.append(dict(id=rid, kind="train", model="m", method=method, backbone=backbone, suite="sts",
                        train_corpus=corpus, budget_label=budget, seed=seed, status=status))  # fmt: skip
    return tables.group_runs(pd.DataFrame(out))


def scores_frame(rows: list[tuple]) -> pd.DataFrame:
    """rows: (run_id, dataset, value[, variant])."""
    return pd.DataFrame(
        [dict(run_id=r[0], dataset=r[1], value=float(r[2]), variant=r[3] if len(r) > 3 else "clean", metric="spearman") for r in rows]
    )


def test_seeds_average_and_rerun_replaces_earlier():
    runs = runs_frame([
        (1, "simcse", "b", "steps=1", "c", 0),
        (2, "simcse", "b", "steps=1", "c", 1),
        (3, "simcse", "b", "steps=1", "c", 1),  # a re-run of seed 1: replaces run 2
        (4, "laser", "b", "steps=1", "c", 0),
    ])  # fmt: skip
    scores = scores_frame([
        (1, "sts12", 70), (1, "stsb", 80),
        (2, "sts12", 0), (2, "stsb", 0),
        (3, "sts12", 74), (3, "stsb", 84),
        (4, "sts12", 90), (4, "stsb", 60),
    ])  # fmt: skip
    board = tables.build_leaderboard(scores, runs)
    frame = board.numeric().set_index("method")
    assert list(frame.index) == ["simcse", "laser"]  # average 77 > 75
    assert frame.loc["simcse", "sts12"] == 72 and frame.loc["simcse", "average"] == 77
    assert frame.loc["simcse", "seeds"] == 2 and frame.loc["simcse", "run ids"] == "1, 3"
    std = board.std.set_index(board.info["method"])
    assert std.loc["simcse", "sts12"] == pytest.approx(np.std([70, 74], ddof=1))
    assert np.isnan(std.loc["laser", "sts12"])
    labels = board.labels().set_index("method")
    assert labels.loc["simcse", "stsb"] == "82.00 ± 2.83 (n=2)" and labels.loc["laser", "stsb"] == "60.00"
    csv = board.csv_frame().set_index("method")
    assert csv.loc["simcse", "stsb seeds"] == 2 and csv.loc["simcse", "stsb std"] == pytest.approx(2.828, abs=1e-3)


def test_average_only_over_complete_rows_and_parts_hidden():
    runs = runs_frame([(1, "a", "b", "", "", 0), (2, "z", "b", "", "", 0)])
    scores = scores_frame([
        (1, "sts12", 50), (1, "stsb", 60),
        (2, "sts12", 99),  # no stsb: no average
        (1, "cqadupstack", 30), (1, "cqadupstack-android", 10), (2, "cqadupstack", 31),
    ])  # fmt: skip
    board = tables.build_leaderboard(scores, runs)
    assert "cqadupstack-android" not in board.score_columns
    assert not board.complete_average
    frame = board.numeric()
    assert list(frame["method"]) == ["a", "z"]  # the incomplete row goes last
    assert np.isnan(frame.loc[1, "average"])
    assert frame.loc[0, "budget"] == tables.NONE_LABEL and frame.loc[0, "corpus"] == tables.NONE_LABEL
    with_parts = tables.build_leaderboard(scores, runs, include_parts=True)
    assert "cqadupstack-android" in with_parts.score_columns


def test_filters():
    runs = runs_frame([
        (1, "a", "b1", "s1", "c1", 0), (2, "a", "b2", "s1", "c1", 1), (3, "b", "b1", "s2", "c2", 0, "failed"),
    ])  # fmt: skip
    assert tables.RunFilters().apply(runs)["id"].tolist() == [1, 2]
    assert tables.RunFilters(finished_only=False).apply(runs)["id"].tolist() == [1, 2, 3]
    assert tables.RunFilters(backbones=["b2"]).apply(runs)["id"].tolist() == [2]
    assert tables.RunFilters(seeds=[0], finished_only=False).apply(runs)["id"].tolist() == [1, 3]
    assert tables.RunFilters(methods=["a"], budgets=["s2"]).apply(runs).empty
    assert tables.build_leaderboard(scores_frame([(9, "x", 1.0)]), runs).empty


def test_robustness_change_is_per_seed_attacked_minus_clean():
    runs = runs_frame([(1, "a", "b", "", "", 0), (2, "a", "b", "", "", 1), (3, "z", "b", "", "", 0)])
    scores = scores_frame([
        (1, "stsb", 80, "clean"), (1, "stsb", 70, "elong-2"), (1, "sts12", 60, "clean"),  # sts12 not attacked
        (2, "stsb", 84, "clean"), (2, "stsb", 78, "elong-2"),
        (3, "stsb", 50, "clean"), (3, "stsb", 49, "elong-2"), (3, "stsb", 40, "elong-4"),
    ])  # fmt: skip
    table = tables.build_robustness(scores, runs).set_index("method")
    assert table.loc["a", "clean"] == 82 and table.loc["a", "elong-2"] == 74 and table.loc["a", "change elong-2"] == -8
    assert table.loc["a", "seeds"] == 2 and np.isnan(table.loc["a", "elong-4"])
    assert table.loc["z", "change elong-4"] == -10
    assert list(table.index) == ["a", "z"]
    long = tables.robustness_long(table.reset_index())
    assert set(long["variant"]) == {"clean", "elong-2", "elong-4"}


def test_seed_mean_survives_pickling():
    cell = tables.SeedMean(1.5, 0.25, 3)
    back = pickle.loads(pickle.dumps(cell))
    assert float(back) == 1.5 and back.std == 0.25 and back.seeds == 3 and back.label() == "1.50 ± 0.25 (n=3)"


def test_paired_bootstrap_spearman_matches_direct_difference():
    rng = np.random.default_rng(0)
    gold = rng.uniform(0, 5, 200)
    good, bad = gold + rng.normal(0, 0.5, 200), gold + rng.normal(0, 3, 200)
    ids = [str(i) for i in range(200)]
    order = rng.permutation(200)  # B lists the same items in another order: matched by id
    a = {"aggregate": "spearman", "item_ids": ids, "values": bad.tolist(), "gold": gold.tolist()}
    b = {"aggregate": "spearman", "item_ids": [ids[i] for i in order], "values": good[order].tolist(), "gold": gold[order].tolist()}
    ci = stats.paired_bootstrap(a, b, resamples=500)
    direct = 100 * (spearmanr(good, gold).statistic - spearmanr(bad, gold).statistic)
    assert ci.difference == pytest.approx(direct)
    assert 0 < ci.low < ci.difference < ci.high and ci.excludes_zero and ci.n_items == 200
    swapped = stats.paired_bootstrap(b, a, resamples=500)
    assert swapped.high < 0


def test_paired_bootstrap_mean_and_errors():
    a = {"aggregate": "mean", "item_ids": ["q1", "q2", "q3"], "values": [0.1, 0.5, 0.9], "gold": None}
    b = {"aggregate": "mean", "item_ids": ["q1", "q2", "q3", "q4"], "values": [0.2, 0.6, 1.0, 0.0], "gold": None}
    ci = stats.paired_bootstrap(a, b, resamples=200)  # q4 is not shared: left out
    assert ci.n_items == 3 and ci.difference == pytest.approx(0.1)
    assert ci.low == pytest.approx(0.1) and ci.high == pytest.approx(0.1)
    with pytest.raises(ValueError, match="aggregate differently"):
        stats.paired_bootstrap(a, {**b, "aggregate": "spearman"})
    with pytest.raises(ValueError, match="share 0"):
        stats.paired_bootstrap(a, {**b, "item_ids": ["x", "y", "z", "w"]})


def test_mean_ci_over_seeds_matches_t_interval_by_hand():
    # values 1, 2, 3: mean 2, sd 1, n 3; t(0.975, 2) = 4.302653 -> half width 4.302653 / sqrt(3) = 2.484138
    ci = stats.mean_ci([1.0, 2.0, 3.0])
    assert ci.mean == pytest.approx(2.0)
    assert ci.low == pytest.approx(2.0 - 2.484138, abs=1e-5)
    assert ci.high == pytest.approx(2.0 + 2.484138, abs=1e-5)
    single = stats.mean_ci([5.0])
    assert single.mean == 5.0 and single.n == 1 and np.isnan(single.low)
