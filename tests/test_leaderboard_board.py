"""The main view's newer columns and toggles through AppTest: significance ranks, model size, subset runs hidden
by default, sweeps as one comparison group, reference rows (tests/test_leaderboard_fixtures.py: fill_extras)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("streamlit")

from streamlit.testing.v1 import AppTest  # noqa: E402

from tests.test_leaderboard_fixtures import fill_extras  # noqa: E402

APP = Path(__file__).resolve().parent.parent / "leaderboard" / "app.py"
REFERENCE = "org/published-model"


@pytest.fixture(scope="module")
def results_path(tmp_path_factory) -> Path:
    return fill_extras(tmp_path_factory.mktemp("board") / "results.sqlite")


@pytest.fixture
def app(results_path, monkeypatch):
    monkeypatch.setenv("LENBENCH_DB", str(results_path))
    at = AppTest.from_file(str(APP), default_timeout=90)
    at.run()
    assert not at.exception, at.exception
    return at


def rows(at: AppTest):  # noqa: ANN201
    return at.dataframe[0].value.set_index("method")


def test_ranks_sizes_references_and_hidden_subset(app):
    frame = rows(app)
    assert "quick" not in frame.index  # a --limit run never ranks by default
    assert REFERENCE in frame.index and frame.loc[REFERENCE, "type"] == "reference"
    assert frame.loc[REFERENCE, "params (M)"] == pytest.approx(109.0) and frame.loc[REFERENCE, "dim"] == 768
    laser = frame.loc["laser3-self"]
    assert laser["run ids"] == "3, 7" and laser["seeds"] == 2  # run 7 (a sweep point) is its second seed
    assert (laser["params (M)"], laser["dim"], laser["max tokens"]) == (pytest.approx(4.4), 128, 512)
    # the best on every dataset, but on 2 seeds, against rows of 1 or 2: no pair of trained rows under 3 seeds is
    # called different (stats.seed_variance_estimated, the rule of every star), so its rank interval spans the
    # table. (tests/test_leaderboard_correction.py checks the separations and the Holm correction on rows the rule
    # judges.)
    assert laser["rank"] == 1.0 and laser["rank 95% CI"] == "1.0–3.0"
    assert set(frame["rank"]) == {1.0}  # none is shown to be worse than another: every row ties at the top
    assert "vanilla" not in frame.index and list(app.dataframe[1].value["backbone"].unique()) == ["minilm"]  # apart
    for rank, interval in zip(frame["rank"], frame["rank 95% CI"]):
        low, high = (float(x) for x in interval.split("–"))
        assert low - 0.05 <= rank <= high + 0.05  # (the interval is shown to one decimal)
    simcse = app.dataframe[0].value.query("method == 'simcse' and backbone == 'bert-tiny'").iloc[0]
    assert simcse["run ids"] == "2, 8"  # run 8 re-ran seed 0: it replaces run 1
    captions = "\n".join(c.value for c in app.caption)
    assert set(frame["n"]) == {"80"}  # the items behind each row's scores, per row
    assert "rows not significantly worse than the best are tied with it" in captions
    assert "significant after the Holm correction over every pair of rows" in captions


def test_aggregate_over_datasets_and_performance_profile_are_shown(app):
    """Below the charts: each full-set row's mean and IQM over the datasets with 95% CIs and its probability of
    improvement over the reference, and the performance profile (issue 27)."""
    assert any(m.value.startswith("**Aggregate over ") for m in app.markdown)
    table = next(d.value for d in app.dataframe if "IQM" in d.value.columns)
    assert {"row", "seeds", "mean", "IQM", "P(> vanilla)"} <= set(table.columns)
    assert all("[" in cell for cell in table["mean"]) and "" in set(table["P(> vanilla)"])  # vanilla itself
    assert any(m.value == "**Performance profile**" for m in app.markdown)


def test_subset_toggle_shows_and_flags_subset_runs(app):
    app.checkbox(key="main_subsets").check().run()
    frame = rows(app)
    assert "quick" not in frame.index and "subset" not in frame.columns  # the full-set table is unchanged
    subset = [d for d in app.dataframe if str(d.key or "").startswith("main_table_first")][0].value.set_index("method")
    assert list(subset.index) == ["quick"] and subset.loc["quick", "subset"] == "sickr (first 40), sts12 (first 40), stsb (first 40)"
    assert subset.loc["quick", "n"] == "40" and subset.loc["quick", "rank"] == 1.0
    assert any("subset" in s.value and "n = 40" in s.value for s in app.subheader)


def test_sweep_is_one_comparison_group(app):
    app.multiselect(key="main_sweep").set_value(["grid"]).run()
    frame = app.dataframe[0].value
    assert sorted(frame["method"]) == ["laser3-self", "simcse"]
    assert sorted(frame["run ids"]) == ["7", "8"]


def test_reference_rows_can_be_hidden(app):
    app.checkbox(key="main_references").uncheck().run()
    assert REFERENCE not in set(app.dataframe[0].value["method"])


def test_long_tables_show_the_first_rows_and_the_choice_shows_more(results_path, monkeypatch):
    from leaderboard.views import main

    monkeypatch.setattr(main, "ROWS_SHOWN", (2, 3))  # as if the database had thousands of rows
    monkeypatch.setenv("LENBENCH_DB", str(results_path))
    at = AppTest.from_file(str(APP), default_timeout=90)
    at.run()
    assert not at.exception, at.exception
    assert len(at.dataframe[0].value) == 2 and at.dataframe[0].value.iloc[0]["method"] == "laser3-self"
    assert any("The first 2 of 3 rows" in c.value for c in at.caption)  # the bert-tiny table (minilm's is another)
    at.selectbox(key="main_rows").set_value(5).run()
    assert len(at.dataframe[0].value) == 3


def test_robustness_view_hides_then_flags_subset_runs(results_path, monkeypatch):
    from results_db import ResultsDB, ScoreRecord

    path = results_path.parent / "with-attacked-subset.sqlite"
    path.write_bytes(results_path.read_bytes())
    db = ResultsDB(path)
    db.add_scores(9, [ScoreRecord("sts", "stsb", "spearman", 50.0, 40, "elong-2", info={"limit": 40, "changed_frac": 0.5})])
    db.engine.dispose()
    monkeypatch.setenv("LENBENCH_DB", str(path))
    at = AppTest.from_file(str(APP), default_timeout=90)
    at.run()
    at.radio(key="view").set_value("Robustness").run()
    assert "quick" not in set(at.dataframe[0].value["method"])  # the --limit run (9) is hidden by default
    at.checkbox(key="rob_subsets").check().run()
    frame = at.dataframe[0].value.set_index("method")
    assert frame.loc["quick", "subset"] == "first 40" and frame.loc["quick", "changed elong-2"] == 0.5
    assert any("subset" in w.value for w in at.warning)


def test_a_database_from_an_older_lenbench_is_shown_read_only(tmp_path, monkeypatch):
    """Schema 1 (no sweep, model_info or score info columns): the app reads what is there and adds nothing."""
    import sqlite3

    from tests.test_leaderboard_fixtures import fill_db

    path = fill_db(tmp_path / "old.sqlite")
    with sqlite3.connect(path) as conn:
        for table, column in (("runs", "sweep"), ("runs", "sweep_point"), ("runs", "model_info"), ("scores", "info")):
            conn.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    before = path.read_bytes()
    monkeypatch.setenv("LENBENCH_DB", str(path))
    at = AppTest.from_file(str(APP), default_timeout=90)
    at.run()
    assert not at.exception, at.exception
    frame = pd.concat([d.value for d in at.dataframe if str(d.key or "").startswith("main_table")], ignore_index=True)
    assert len(frame) == 4 and "params (M)" not in frame.columns  # no sizes recorded: no size column
    at.radio(key="view").set_value("Robustness").run()
    assert not at.exception and "changed elong-2" not in at.dataframe[0].value.columns
    assert path.read_bytes() == before


def test_run_view_shows_n_and_the_subset(app):
    app.radio(key="view").set_value("Run").run()
    app.number_input(key="run_id").set_value(9).run()  # the --limit 40 run
    assert not app.exception
    scores = next(f.value for f in app.dataframe if "dataset" in f.value.columns and "clean" in f.value.columns)
    assert set(scores["dataset"]) == {"sts12 (first 40)", "stsb (first 40)", "sickr (first 40)"} and set(scores["n"]) == {40}
