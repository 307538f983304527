"""Scores of two versions of a suite's scoring (Score.info suite_version, SuiteMeta.version) are never pooled or
compared on the leaderboard (issue 27): not on the main board, not in Robustness, not in Compare."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

pytest.importorskip("streamlit")

from leaderboard import grouping, queries  # noqa: E402
from results_db import ResultsDB  # noqa: E402
from tests.test_leaderboard_fixtures import fill_main_job  # noqa: E402

ROW = ["run_id", "suite", "dataset", "variant", "metric", "value", "n"]


@pytest.fixture(scope="module")
def two_versions(tmp_path_factory) -> Path:
    """The main job (runs 1-3, scoring v1) and run 4: laser3-self again, same settings and seed, its scores made by
    version 2 of the sts scoring."""
    from results_db.store import ScoreRecord

    path = fill_main_job(tmp_path_factory.mktemp("versions") / "results.sqlite", subset_runs=False)
    db = ResultsDB(path)
    old = db.runs().set_index("id").loc[2]
    run_id = db.create_run(kind="train", model="runs/laser3-self-v2", method="laser3-self", backbone=old["backbone"],
                           suite=old["suite"], train_corpus=old["train_corpus"], budget_label=old["budget_label"],
                           seed=0, config={"comparison": "main"}, status="running")  # fmt: skip
    records = []
    for score in db.scores([2]).itertuples():
        items = db.score_items(int(score.id))
        records.append(ScoreRecord(score.suite, score.dataset, score.metric, float(score.value) + 1.0, int(score.n),
                                   score.variant, items, {"suite_version": 2}))  # fmt: skip
    db.add_scores(run_id, records)
    db.finish_run(run_id)
    db.engine.dispose()
    return path


def test_robustness_keeps_scoring_versions_in_rows_of_their_own(two_versions):
    from leaderboard.views import robustness

    state = queries.db_state(str(two_versions))
    table, curve = robustness.robustness_for(state.location, state.version, "sts", "spearman", "stsb", grouping.RunFilters())
    laser = table[table["method"].str.startswith("laser3-self")].set_index("method")
    assert sorted(laser.index) == ["laser3-self [scoring v1]", "laser3-self [scoring v2]"]
    assert (laser["seeds"] == 1).all()  # one run each: never pooled as two seeds of one row
    assert laser.loc["laser3-self [scoring v2]", "clean"] == pytest.approx(laser.loc["laser3-self [scoring v1]", "clean"] + 1.0)


def test_compare_never_compares_two_scoring_versions(two_versions):
    from leaderboard.views import compare

    state = queries.db_state(str(two_versions))
    db = queries.open_readonly(state.location)
    a, b, v2 = (queries.run_scores(db, r) for r in (1, 2, 4))
    assert set(v2["suite_version"]) == {2} and set(a["suite_version"]) == {1}
    apart = compare.comparison_table(state.location, state.version, a, v2)
    assert len(apart) == 3 and apart["B − A"].isna().all() and apart["CI low"].isna().all()
    assert set(apart["note"]) == {"scoring versions differ (v1 vs v2): not compared"}
    same = compare.comparison_table(state.location, state.version, a, b)  # both v1: compared as before
    assert not same["B − A"].isna().any() and not same["CI low"].isna().any()
    assert not any(math.isnan(p) for p in same["p"])
