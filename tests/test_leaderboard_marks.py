"""The main board's "best" marks follow the significance test, not the largest number: on a database where the top
two rows cannot be told apart (the same items, scores a hair apart) both are best, and the clearly worse third row is
not; the expected marks are computed here from `bench.report.stats` (paired bootstrap, Holm over the table's pairs),
the test `bench results` stars its differences with."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("streamlit")

from streamlit.testing.v1 import AppTest  # noqa: E402

from bench.report import stats  # noqa: E402
from results_db import ItemValues, ResultsDB, ScoreRecord  # noqa: E402
from tests.test_leaderboard_fixtures import _spearman  # noqa: E402

APP = Path(__file__).resolve().parent.parent / "leaderboard" / "app.py"
ITEMS = 150
# (model, noise added to the shared predictions): alpha and beta differ by a hair, gamma is far worse
MODELS = [("alpha", 0.0), ("beta", 0.01), ("gamma", 1.2)]


def fill_tie(path: Path) -> Path:
    """Three models scored once each (`bench eval`: untrained, so one run may be called different) on one STS set."""
    db = ResultsDB(path)
    rng = np.random.default_rng(7)
    gold = np.round(rng.uniform(0, 5, ITEMS), 2)
    shared = gold / 5 + rng.normal(0, 0.25, ITEMS)
    ids = [str(i) for i in range(ITEMS)]
    for model, noise in MODELS:
        run = db.create_run(kind="eval", model=model, method=model, backbone="minilm", suite="sts:stsb", seed=0,
                            config={"comparison": "tie"}, status="running")  # fmt: skip
        values = shared + rng.normal(0, 1, ITEMS) * noise
        items = ItemValues("spearman", ids, values.tolist(), gold.tolist())
        db.add_scores(run, [ScoreRecord("sts", "stsb", "spearman", _spearman(items.values, items.gold), ITEMS, "clean", items)])
        db.finish_run(run)
    db.engine.dispose()
    return path


def expected_best(path: Path) -> set[str]:
    """The top model and every model the Holm-corrected paired bootstrap does not call worse than it."""
    db = ResultsDB(path, read_only=True)
    scores = db.scores()
    runs = db.runs().set_index("id")
    items = {}
    for _, row in scores.iterrows():
        stored = db.score_items(int(row["id"]))
        items[runs.loc[row["run_id"], "method"]] = {"aggregate": stored.aggregate, "item_ids": stored.item_ids,
                                                    "values": stored.values, "gold": stored.gold}  # fmt: skip
    value = dict(zip(runs.loc[scores["run_id"], "method"], scores["value"]))
    pairs = list(itertools.combinations(sorted(items), 2))
    tests = [stats.paired_bootstrap(items[a], items[b]) for a, b in pairs]
    real = stats.corrected_stars([t.p for t in tests], "holm")
    top = max(value, key=value.get)
    worse = {b if value[a] > value[b] else a for (a, b), star in zip(pairs, real) if star and top in (a, b)}
    return set(items) - worse


def highlighted_methods(at: AppTest) -> set[str]:
    frame = at.dataframe[0].value
    css = at.dataframe[0].proto.arrow_data.styler.styles
    column = list(frame.columns).index("clean")
    rows = {int(r) for r, c in re.findall(r"row(\d+)_col(\d+)", css) if int(c) == column}
    return {str(frame["method"].iloc[r]) for r in rows}


def test_rows_that_cannot_be_told_apart_are_all_best(tmp_path, monkeypatch):
    path = fill_tie(tmp_path / "tie.sqlite")
    expected = expected_best(path)
    assert expected == {"alpha", "beta"}  # the database is what this test is about: a tie at the top, one loser
    monkeypatch.setenv("LENBENCH_DB", str(path))
    at = AppTest.from_file(str(APP), default_timeout=120)
    at.run()
    assert not at.exception, at.exception
    assert highlighted_methods(at) == expected
    frame = at.dataframe[0].value.set_index("method")
    assert frame.loc["alpha", "rank"] == frame.loc["beta", "rank"] == 1 and frame.loc["gamma", "rank"] > 1
