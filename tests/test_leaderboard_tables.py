"""The leaderboard's table building and paired bootstrap, on hand-made frames (no Streamlit)."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from bench.evaluate.suites.metadata import CQADUPSTACK_PARTS
from bench.report import stats
from leaderboard import attack_curves, grouping, main_board


def runs_frame(rows: list[tuple]) -> pd.DataFrame:
    """rows: (id, method, backbone, budget, corpus, seed[, status])."""
    out = []
    for r in rows:
        rid, method, backbone, budget, corpus, seed = r[:6]
        status = r[6] if len(r) > 6 else "finished"
        out.append(dict(id=rid, kind="train", model="m", method=method, backbone=backbone, suite="sts",
                        train_corpus=corpus, budget_label=budget, seed=seed, status=status))  # fmt: skip
    return grouping.group_runs(pd.DataFrame(out))


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
    board = main_board.build_leaderboard(scores, runs)
    frame = board.numeric().set_index("method")
    assert list(frame.index) == ["simcse", "laser"]  # average 77 > 75
    assert frame.loc["simcse", "sts12"] == 72 and frame.loc["simcse", "average"] == 77
    assert frame.loc["simcse", "seeds"] == 2 and frame.loc["simcse", "run ids"] == "1, 3"
    std = board.std.set_index(board.info["method"])
    assert std.loc["simcse", "sts12"] == pytest.approx(np.std([70, 74], ddof=1))
    assert np.isnan(std.loc["laser", "sts12"])
    labels = board.labels().set_index("method")
    # 2 seeds: the mean and the count; a t(1) interval (t(0.975, 1) * 2.83 / sqrt(2) = 25.41) says nothing
    assert labels.loc["simcse", "stsb"] == "82.00 (2 seeds)"
    assert labels.loc["laser", "stsb"] == "60.00"
    csv = board.csv_frame().set_index("method")
    assert csv.loc["simcse", "stsb seeds"] == 2 and csv.loc["simcse", "stsb std"] == pytest.approx(2.828, abs=1e-3)
    assert np.isnan(csv.loc["simcse", "stsb ci low"]) and np.isnan(csv.loc["simcse", "stsb ci high"])
    # from 3 seeds on: the Student-t interval over seeds, as the CLI
    three = main_board.build_leaderboard(scores_frame([(1, "stsb", 80), (2, "stsb", 84), (4, "stsb", 83)]),
                                         runs_frame([(1, "s", "b", "", "", 0), (2, "s", "b", "", "", 1), (4, "s", "b", "", "", 2)]))
    ci = stats.mean_ci([80.0, 84.0, 83.0])
    # the half-width (4.303 * 2.08 / sqrt(3) = 5.17) to two significant digits, the mean to the same place
    assert ci.high - ci.mean == pytest.approx(5.17, abs=0.01)
    assert three.labels().set_index("method").loc["s", "stsb"] == "82.3 ± 5.2 (3 seeds)"
    assert main_board.SeedMean(80.1234, 0.0123, 5).label() == "80.123 ± 0.012 (5 seeds)"
    assert main_board.SeedMean(80.1234, 12.3, 3).label() == "80 ± 12 (3 seeds)"


def test_average_only_over_complete_rows_and_parts_hidden():
    runs = runs_frame([(1, "a", "b", "", "", 0), (2, "z", "b", "", "", 0)])
    scores = scores_frame([
        (1, "sts12", 50), (1, "stsb", 60),
        (2, "sts12", 99),  # no stsb: no average
        (1, "cqadupstack", 30), (1, "cqadupstack-android", 10), (2, "cqadupstack", 31),
    ])  # fmt: skip
    board = main_board.build_leaderboard(scores, runs)
    assert "cqadupstack-android" not in board.score_columns
    assert not board.complete_average
    frame = board.numeric()
    assert list(frame["method"]) == ["a", "z"]  # the incomplete row goes last
    assert np.isnan(frame.loc[1, "average"])
    assert frame.loc[0, "budget"] == grouping.NONE_LABEL and frame.loc[0, "corpus"] == grouping.NONE_LABEL
    with_parts = main_board.build_leaderboard(scores, runs, include_parts=True)
    assert "cqadupstack-android" in with_parts.score_columns


def test_filters():
    runs = runs_frame([
        (1, "a", "b1", "s1", "c1", 0), (2, "a", "b2", "s1", "c1", 1), (3, "b", "b1", "s2", "c2", 0, "failed"),
    ])  # fmt: skip
    assert grouping.RunFilters().apply(runs)["id"].tolist() == [1, 2]
    assert grouping.RunFilters(finished_only=False).apply(runs)["id"].tolist() == [1, 2, 3]
    assert grouping.RunFilters(backbones=["b2"]).apply(runs)["id"].tolist() == [2]
    assert grouping.RunFilters(seeds=[0], finished_only=False).apply(runs)["id"].tolist() == [1, 3]
    assert grouping.RunFilters(methods=["a"], budgets=["s2"]).apply(runs).empty
    assert main_board.build_leaderboard(scores_frame([(9, "x", 1.0)]), runs).empty


def test_robustness_change_is_per_seed_attacked_minus_clean():
    runs = runs_frame([(1, "a", "b", "", "", 0), (2, "a", "b", "", "", 1), (3, "z", "b", "", "", 0)])
    scores = scores_frame([
        (1, "stsb", 80, "clean"), (1, "stsb", 70, "elong-2"), (1, "sts12", 60, "clean"),  # sts12 not attacked
        (2, "stsb", 84, "clean"), (2, "stsb", 78, "elong-2"),
        (3, "stsb", 50, "clean"), (3, "stsb", 49, "elong-2"), (3, "stsb", 40, "elong-4"),
    ])  # fmt: skip
    table = attack_curves.build_robustness(scores, runs).set_index("method")
    assert table.loc["a", "clean"] == 82 and table.loc["a", "elong-2"] == 74 and table.loc["a", "change elong-2"] == -8
    assert table.loc["a", "seeds"] == 2 and np.isnan(table.loc["a", "elong-4"])
    assert table.loc["z", "change elong-4"] == -10
    assert list(table.index) == ["a", "z"]
    long = attack_curves.robustness_long(table.reset_index())
    assert set(long["variant"]) == {"clean", "elong-2", "elong-4"}


def test_seed_mean_survives_pickling():
    cell = main_board.SeedMean(1.5, 0.25, 3)
    back = pickle.loads(pickle.dumps(cell))
    assert float(back) == 1.5 and back.half == 0.25 and back.seeds == 3 and back.label() == "1.50 ± 0.25 (3 seeds)"


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


def test_t_half_width_matches_mean_ci_for_several_seed_counts():
    rng = np.random.default_rng(1)
    for n in (2, 3, 5, 10):
        x = rng.normal(70, 2, n)
        ci = stats.mean_ci(x)
        assert stats.t_half_width(np.array([x.std(ddof=1)]), np.array([n]))[0] == pytest.approx(ci.high - ci.mean)
    assert np.isnan(stats.t_half_width(np.array([np.nan]), np.array([1]))[0])


def test_paper_averages_and_cqadupstack_from_forums():
    sts = list(main_board.SUITE_STANDARDS["sts"][1])
    runs = runs_frame([(1, "a", "b", "", "", 0), (2, "z", "b", "", "", 0)])
    scores = scores_frame([(1, d, 70 + k) for k, d in enumerate(sts)] + [(1, "sts-extra", 10.0)]
                          + [(2, d, 60.0) for d in sts[:3]])  # fmt: skip
    board = main_board.build_leaderboard(scores, runs, suite="sts")
    name = main_board.SUITE_STANDARDS["sts"][0]
    assert name == "STS avg (7)" and name in board.score_columns and "average" in board.score_columns
    frame = board.numeric().set_index("method")
    assert frame.loc["a", name] == pytest.approx(np.mean([70 + k for k in range(7)]))  # without sts-extra
    assert frame.loc["a", "average"] == pytest.approx(np.mean([70 + k for k in range(7)] + [10.0]))
    assert np.isnan(frame.loc["z", name])  # 3 of the 7 sets: no STS average
    exactly = main_board.build_leaderboard(scores[scores["dataset"] != "sts-extra"], runs, suite="sts")
    assert exactly.score_columns[-1] == name and "average" not in exactly.score_columns  # one average, named

    beir = list(main_board.SUITE_STANDARDS["beir"][1])
    forums = list(CQADUPSTACK_PARTS)
    assert len(beir) == 14 and len(forums) == 12
    rows = [(1, d, 40.0) for d in beir if d != "cqadupstack"] + [(1, f, float(k)) for k, f in enumerate(forums)]
    rows += [(2, d, 40.0) for d in beir]  # run 2 has its own cqadupstack mean row (30 below)
    rows = [r if r[:2] != (2, "cqadupstack") else (2, "cqadupstack", 30.0) for r in rows]
    board = main_board.build_leaderboard(scores_frame(rows), runs, suite="beir")
    frame = board.numeric().set_index("method")
    assert frame.loc["a", "cqadupstack"] == pytest.approx(np.mean(range(12)))  # the mean of the 12 forums
    assert frame.loc["z", "cqadupstack"] == 30.0
    assert frame.loc["a", "BEIR-14 avg"] == pytest.approx((13 * 40.0 + 5.5) / 14)
    assert not set(forums) & set(board.score_columns)


def test_types_sizes_subsets_and_sweeps():
    out = [
        dict(id=1, kind="train", model="runs/x", method="simcse", backbone="b", suite="sts", train_corpus="c",
             budget_label="steps=1", seed=0, status="finished", sweep="grid", config_limit=np.nan,
             model_info={"parameters": 22_700_000, "embedding_dim": 384, "max_tokens": 256}),
        dict(id=2, kind="reference", model="org/ref-model", method="", backbone="", suite="sts", train_corpus="",
             budget_label="", seed=0, status="finished", sweep="", config_limit=np.nan,
             model_info={"n_parameters": 110_000_000, "embed_dim": 768}),
        dict(id=3, kind="eval", model="minilm", method="vanilla", backbone="minilm", suite="sts", train_corpus="",
             budget_label="", seed=0, status="finished", sweep="", config_limit=300.0, model_info={}),
    ]  # fmt: skip
    runs = grouping.group_runs(pd.DataFrame(out))
    assert list(runs["type"]) == ["trained", "reference", "untrained"]
    assert runs.loc[1, "method"] == "org/ref-model" and list(runs["subset"]) == ["", "", "limit 300"]
    scores = scores_frame([(1, "stsb", 80), (2, "stsb", 85), (3, "stsb", 70)])
    board = main_board.build_leaderboard(scores, grouping.RunFilters().apply(runs))
    frame = board.numeric().set_index("method")
    assert list(frame.index) == ["org/ref-model", "simcse"]  # the subset run is hidden by default
    assert frame.loc["simcse", "params (M)"] == pytest.approx(22.7) and frame.loc["simcse", "dim"] == 384
    assert frame.loc["org/ref-model", "dim"] == 768 and np.isnan(frame.loc["org/ref-model", "max tokens"])
    assert frame.loc["org/ref-model", "type"] == "reference"
    shown = grouping.RunFilters(include_subsets=True).apply(runs)
    limits = pd.DataFrame({"run_id": [3], "dataset": ["stsb"], "limit": [300]})
    frame = main_board.build_leaderboard(scores, shown, limits=limits).numeric().set_index("method")
    assert frame.loc["vanilla", "subset"] == "stsb[300]" and frame.loc["simcse", "subset"] == ""
    assert list(grouping.RunFilters(sweeps=["grid"]).apply(runs)["id"]) == [1]
    assert list(grouping.RunFilters(include_references=False, include_subsets=True).apply(runs)["id"]) == [1, 3]
    marked = grouping.mark_subsets(runs.assign(config_limit=np.nan, subset=""), limits)
    assert list(marked["subset"]) == ["", "", "limit 300"]


def test_robustness_curve_mean_ci_over_seeds_and_attack_rates():
    runs = runs_frame([(1, "a", "b", "", "", 0), (2, "a", "b", "", "", 1), (3, "z", "b", "", "", 0)])
    scores = scores_frame([
        (1, "stsb", 80, "clean"), (1, "stsb", 70, "elong-2"), (1, "stsb", 60, "elong-rand"),
        (2, "stsb", 84, "clean"), (2, "stsb", 78, "elong-2"), (2, "stsb", 66, "elong-rand"),
        (3, "stsb", 50, "clean"), (3, "stsb", 49, "elong-2"),
    ])  # fmt: skip
    rates = pd.DataFrame({"run_id": [1, 2, 3], "dataset": ["stsb"] * 3, "variant": ["elong-2"] * 3, "changed_frac": [0.4, 0.6, 0.9]})
    curve = attack_curves.robustness_curve(scores, runs, rates=rates).set_index(["method", "variant"])
    row = curve.loc[("a", "elong-2")]
    assert (row["score"], row["seeds"]) == (74.0, 2) and np.isnan(row["low"])  # 2 seeds: no t(1) interval
    three = attack_curves.robustness_curve(
        pd.concat([scores, scores_frame([(4, "stsb", 85, "clean"), (4, "stsb", 75, "elong-2")])]),
        pd.concat([runs, runs_frame([(4, "a", "b", "", "", 2)])])).set_index(["method", "variant"])  # fmt: skip
    ci = stats.mean_ci([70.0, 78.0, 75.0])
    row3 = three.loc[("a", "elong-2")]
    assert (row3["score"], row3["low"], row3["high"], row3["seeds"]) == pytest.approx((ci.mean, ci.low, ci.high, 3))
    assert row["m"] == "2" and row["changed_frac"] == pytest.approx(0.5)
    assert curve.loc[("a", "clean"), "m"] == "1 (clean)" and curve.loc[("a", "clean"), "score"] == 82
    assert curve.loc[("a", "elong-rand"), "m"] == "rand" and np.isnan(curve.loc[("a", "elong-rand"), "changed_frac"])
    assert np.isnan(curve.loc[("z", "elong-2"), "low"])  # one seed: no interval
    table = attack_curves.build_robustness(scores, runs, rates=rates).set_index("method")
    assert table.loc["a", "changed elong-2"] == pytest.approx(0.5) and table.loc["z", "changed elong-2"] == pytest.approx(0.9)


def test_robustness_axis_does_not_magnify_sub_point_differences():
    from leaderboard.views.robustness import y_domain

    low, high = y_domain(85.0, 85.6)  # two methods 0.6 points apart on a 0-100 metric
    assert high - low >= 10.0 and low >= 0 and high >= 85.6
    assert y_domain(0.70, 0.72)[1] - y_domain(0.70, 0.72)[0] >= 0.1  # a 0-1 metric: a tenth of its scale
    assert y_domain(20.0, 90.0)[0] <= 20.0  # a wide range is shown whole


def test_runs_differing_in_hyper_parameters_are_rows_of_their_own_not_seeds_of_one():
    out = []
    for rid, seed, config in [
        (1, 0, {"temperature": 0.05, "m_mode": "random"}),
        (2, 1, {"temperature": 0.05, "m_mode": "random"}),
        (3, 0, {"temperature": 0.05, "m_mode": "twice"}),  # bench run --hp laser3-self.m_mode=twice
        (4, 0, {"temperature": 0.1, "dropout": 0.1}),  # the only simcse run: its name stays plain
    ]:
        method = "laser3-self" if rid < 4 else "simcse"
        out.append(dict(id=rid, kind="train", model="m", method=method, backbone="b", suite="sts", train_corpus="c",
                        budget_label="steps=1", seed=seed, status="finished", method_config=config))  # fmt: skip
    runs = grouping.group_runs(pd.DataFrame(out))
    assert list(runs["method"]) == ["laser3-self (m_mode=random)"] * 2 + ["laser3-self (m_mode=twice)", "simcse"]
    board = main_board.build_leaderboard(scores_frame([(1, "stsb", 80), (2, "stsb", 82), (3, "stsb", 70), (4, "stsb", 75)]), runs)
    frame = board.numeric().set_index("method")
    assert frame.loc["laser3-self (m_mode=random)", "stsb"] == 81 and frame.loc["laser3-self (m_mode=random)", "seeds"] == 2
    assert frame.loc["laser3-self (m_mode=twice)", "stsb"] == 70 and frame.loc["laser3-self (m_mode=twice)", "seeds"] == 1
