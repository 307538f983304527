"""The leaderboard's aggregate over datasets (leaderboard.aggregates) is `bench results`' computation, its
performance profile is rliable's run-score distribution, and scores of two versions of a suite's scoring never
share a row (issue 27)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bench.report import stats
from leaderboard import aggregates, grouping


def long_frame(values: dict[int, dict[str, list[float]]]) -> pd.DataFrame:
    rows, run = [], 0
    for group, per in values.items():
        for dataset, seeds in per.items():
            for seed, v in enumerate(seeds):
                run += 1
                rows.append({"run_id": run, "group": group, "seed": seed, "dataset": dataset, "value": v})
    return pd.DataFrame(rows)


VALUES = {0: {"a": [50.0, 52.0, 51.0], "b": [70.0, 71.0, 69.0], "c": [30.0, 35.0, 33.0]},
          1: {"a": [55.0, 56.0, 57.0], "b": [72.0, 70.0, 74.0], "c": [31.0, 36.0, 34.0]},
          2: {"a": [60.0], "b": [80.0]}}  # fmt: skip


def test_aggregate_table_is_the_cli_computation_and_skips_rows_missing_a_dataset():
    long = long_frame(VALUES)
    table = aggregates.aggregate_table(long, [0, 1, 2], {0: "ref", 1: "new", 2: "partial"}, ["a", "b", "c"],
                                       aggregates.StoredItems(), reference=0).set_index("row")  # fmt: skip
    assert set(table.index) == {"ref", "new"}  # the partial row scored 2 of 3 datasets
    full = [np.array(VALUES[1][d]) for d in "abc"]
    expected = stats.aggregate_over_datasets(full, [np.repeat(f[:, None], 2, axis=1) for f in full])
    assert table.loc["new", "mean"] == pytest.approx(np.mean([np.mean(f) for f in full]))
    assert (table.loc["new", "mean low"], table.loc["new", "mean high"]) == pytest.approx((expected["mean"].low, expected["mean"].high))
    assert table.loc["new", "IQM"] == pytest.approx(stats.iqm(np.array(full)))
    # P(new > ref): a 9/9, b 5/9 (72 and 74 beat all three; 70 ties 70, beats 69: 1.5/3 ... ), c by hand
    p_a = 1.0
    p_b = (3 + 1.5 + 3) / 9  # 72 > 70,71,69; 70 == 70 (half), > 69; 74 > all
    p_c = ((31 > np.array([30, 35, 33])).sum() + (36 > np.array([30, 35, 33])).sum() + (34 > np.array([30, 35, 33])).sum()) / 9
    assert table.loc["new", "P(> reference)"] == pytest.approx(np.mean([p_a, p_b, p_c]))
    assert np.isnan(table.loc["ref", "P(> reference)"])


def test_item_resamples_widen_the_interval():
    """With stored items, each seed's score is resampled over the items too (stratified: items within dataset)."""
    rng = np.random.default_rng(0)
    long = long_frame({0: {d: [float(v) for v in rng.normal(50, 1, 3)] for d in "ab"}})
    items, score_ids = {}, {}
    for row in long.itertuples():
        values = rng.normal(row.value, 20.0, 50)
        values += row.value - values.mean()  # the score is the mean of its items
        score_ids[(row.run_id, row.dataset)] = row.run_id
        items[row.run_id] = {"aggregate": "mean", "item_ids": [f"q{i}" for i in range(50)], "values": values.tolist(), "gold": None}
    with_items = aggregates.aggregate_table(long, [0], {0: "x"}, ["a", "b"], aggregates.StoredItems(score_ids, items, lambda i: ("t", i)))
    without = aggregates.aggregate_table(long, [0], {0: "x"}, ["a", "b"], aggregates.StoredItems())
    width = lambda t: float(t["mean high"].iloc[0] - t["mean low"].iloc[0])  # noqa: E731
    assert with_items["mean"].iloc[0] == pytest.approx(without["mean"].iloc[0])
    assert width(with_items) > 2 * width(without)


def test_performance_profile_is_the_share_of_runs_above_each_threshold():
    long = long_frame(VALUES)
    profile = aggregates.performance_profile(long, [0, 1], {0: "ref", 1: "new"}, ["a", "b", "c"], points=5)
    taus = np.linspace(30.0, 74.0, 5)
    for row in ("ref", "new"):
        mine = profile[profile["row"] == row]["share"].to_numpy()
        group = 0 if row == "ref" else 1
        expected = [np.mean([np.mean(np.array(VALUES[group][d]) > t) for d in "abc"]) for t in taus]
        assert mine == pytest.approx(expected)
        assert (np.diff(mine) <= 0).all()


def test_two_scoring_versions_of_a_suite_never_share_a_row():
    runs = pd.DataFrame({"id": [1, 2, 3], "method": ["simcse", "simcse", "vanilla"]})
    same = grouping.split_scoring_versions(runs, pd.DataFrame({"run_id": [1, 2, 3], "suite_version": [1, 1, 1]}))
    assert same["method"].tolist() == ["simcse", "simcse", "vanilla"]
    split = grouping.split_scoring_versions(runs, pd.DataFrame({"run_id": [1, 2, 3], "suite_version": [1, 2, 2]}))
    assert split["method"].tolist() == ["simcse [scoring v1]", "simcse [scoring v2]", "vanilla [scoring v2]"]


def test_runs_with_other_training_settings_never_pool_as_seeds(tmp_path):
    """Two seeds at lr 1e-4 and one at lr 1e-3 of one (method, backbone, budget, corpus): two rows, named by the
    setting that differs; the seeds of one setting pool into one row."""
    from results_db import ResultsDB, ScoreRecord

    db = ResultsDB(tmp_path / "r.sqlite")
    for seed, lr in ((0, 1e-4), (1, 1e-4), (0, 1e-3)):
        config = {"train": {"lr": lr, "batch_size": 16, "seed": seed}, "eval": {"max_len": 256, "pooling": "mean"},
                  "method_config": {"temperature": 0.05}}  # fmt: skip
        run = db.create_run(kind="train", model="m", method="simcse", backbone="b", budget_label="steps=5",
                            train_corpus="c", seed=seed, config=config, status="finished")  # fmt: skip
        db.add_scores(run, [ScoreRecord("sts", "stsb", "spearman", 50.0 + 10 * (lr > 5e-4) + seed, 10)])
    from leaderboard import main_board, queries

    runs = grouping.group_runs(queries.run_list(db))
    board = main_board.build_leaderboard(queries.suite_scores(db, "sts", ["spearman"], ["clean"]), runs).numeric()
    rows = board.set_index("method")
    assert sorted(rows.index) == ["simcse (train.lr=0.0001)", "simcse (train.lr=0.001)"]
    assert rows.loc["simcse (train.lr=0.0001)", "seeds"] == 2 and rows.loc["simcse (train.lr=0.001)", "seeds"] == 1
