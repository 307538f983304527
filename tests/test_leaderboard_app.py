"""The leaderboard app through Streamlit's AppTest, on a database the tests fill (tests/test_leaderboard_fixtures.py).

Runs (see RUNS there): 1, 2 = simcse/bert-tiny seeds 0 and 1; 3 = laser3-self/bert-tiny (clearly the best STS);
4 = simcse/minilm/steps=200/nli; 5 = vanilla/minilm eval-only (shown as "minilm", the model it scored); 6 = esimcse, failed after one dataset.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

pytest.importorskip("streamlit")

import streamlit.testing.v1.app_test as app_test_module  # noqa: E402
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from bench.report import stats  # noqa: E402
from leaderboard import attack_curves  # noqa: E402
from results_db import ResultsDB  # noqa: E402
from tests.test_leaderboard_fixtures import STS_DATASETS, fill_db  # noqa: E402

APP = Path(__file__).resolve().parent.parent / "leaderboard" / "app.py"
TIMEOUT = 90  # seconds per script run (a loaded 2-core CI machine imports altair/pandas slowly the first time)


@pytest.fixture(scope="module")
def results_path(tmp_path_factory) -> Path:
    return fill_db(tmp_path_factory.mktemp("leaderboard") / "results.sqlite")


@pytest.fixture
def app(results_path, monkeypatch):
    """An AppTest on the filled database, already run once (the main view)."""
    monkeypatch.setenv("LENBENCH_DB", str(results_path))
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.run()
    assert not at.exception, at.exception
    return at


def open_app(path: Path, monkeypatch) -> AppTest:
    monkeypatch.setenv("LENBENCH_DB", str(path))
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.run()
    assert not at.exception, at.exception
    return at


def go(at: AppTest, view: str) -> AppTest:
    at.radio(key="view").set_value(view).run()
    assert not at.exception, at.exception
    return at


def values(frame: pd.DataFrame) -> pd.DataFrame:
    """A table's values with its missing cells as NaN (a styled table holds a missing number as an infinity, which
    the grid shows as '–' instead of 'None')."""
    return frame.replace([math.inf, -math.inf], math.nan)


def table(at: AppTest, index: int = 0) -> pd.DataFrame:
    return values(at.dataframe[index].value)


def board(at: AppTest) -> pd.DataFrame:
    """Every table of the main view, in order: one per backbone (and subset), each ranked among its own rows."""
    return values(pd.concat([d.value for d in at.dataframe if str(d.key or "").startswith("main_table")], ignore_index=True))


def display_values(at: AppTest, index: int = 0) -> pd.DataFrame:
    """The text a styled table shows (pandas Styler display values)."""
    raw = at.dataframe[index].proto.arrow_data.styler.display_values
    return pa.ipc.open_stream(raw).read_all().to_pandas()


def highlighted_cells(at: AppTest, index: int = 0) -> set[tuple[int, int]]:
    css = at.dataframe[index].proto.arrow_data.styler.styles
    return {(int(r), int(c)) for r, c in re.findall(r"row(\d+)_col(\d+)", css)}


def texts(at: AppTest) -> str:
    parts = [e.value for kind in ("markdown", "caption", "info", "warning", "error", "success", "code") for e in at.get(kind)]
    return "\n".join(str(p) for p in parts)


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --------------------------------------------------------------------------------------------------- main view
def test_main_view_one_row_per_group_best_first(app):
    frame = board(app)
    groups = set(zip(frame["method"], frame["backbone"], frame["budget"], frame["corpus"]))
    assert groups == {
        ("laser3-self", "bert-tiny", "steps=100", "wiki1m"),
        ("simcse", "bert-tiny", "steps=100", "wiki1m"),
        ("simcse", "minilm", "steps=200", "nli"),
        ("minilm", "minilm", "—", "—"),  # an eval-only run, named by its model: no budget, no corpus
    }  # the failed esimcse run is left out by default
    # Name and rank, then the average on the clean texts beside each attacked variant, the difference from the
    # reference row, then each dataset: the scores in view without scrolling sideways.
    first = table(app)  # one table per backbone (bert-tiny first: its best row is the best overall)
    assert list(first.columns[:6]) == ["method", "backbone", "budget", "corpus", "rank", "rank 95% CI"]
    variants = ["clean", "elong-2", "elong-4", "elong-8", "elong-rand"]
    assert list(first.columns[6:15]) == [*variants, "Δ vs vanilla", *STS_DATASETS]
    tables = [d.value for d in app.dataframe if str(d.key or "").startswith("main_table")]
    assert [set(t["backbone"]) for t in tables] == [{"bert-tiny"}, {"minilm"}]
    assert all(t["clean"].is_monotonic_decreasing for t in tables)  # best average first, per table
    assert frame.iloc[0]["method"] == "laser3-self"
    averages = frame[list(STS_DATASETS)].mean(axis=1)
    assert frame["clean"].to_numpy() == pytest.approx(averages.to_numpy())
    assert (frame["elong-2"] < frame["clean"]).all()


def test_main_view_seeds_as_mean_std_and_count(app, results_path):
    frame, shown = table(app), display_values(app)
    row = frame.index[(frame["method"] == "simcse") & (frame["backbone"] == "bert-tiny")][0]
    assert frame.loc[row, "seeds"] == 2 and frame.loc[row, "run ids"] == "1, 2"
    scores = ResultsDB(results_path, read_only=True).scores([1, 2])
    stsb = scores[(scores["suite"] == "sts") & (scores["dataset"] == "stsb") & (scores["variant"] == "clean")]["value"]
    assert frame.loc[row, "stsb"] == pytest.approx(stsb.mean())
    # 2 seeds: their mean and count, no t(1) interval (the seed variance is not estimated), as the CLI
    assert shown.loc[row, "stsb"] == f"{stsb.mean():.2f} (2 seeds)"
    single = frame.index[frame["method"] == "laser3-self"][0]
    assert re.fullmatch(r"\d+\.\d\d", shown.loc[single, "stsb"])  # one seed: just the value


def test_main_view_highlights_best_per_column(app):
    """Best follows the rank's test: laser3-self scores highest, but it is one training seed (and simcse two), so no
    test separates them: both are best on the ranked variant's columns; the attacked variants are not tested."""
    frame = table(app)
    best = frame.index[frame["rank"] == 1]
    assert set(frame.loc[best, "method"]) == {"laser3-self", "simcse"}
    expected = {(row, list(frame.columns).index(c)) for row in best for c in (*STS_DATASETS, "clean")}
    assert highlighted_cells(app) == expected


@pytest.mark.parametrize(
    ("widget", "choice", "expected"),
    [
        ("main_method", ["simcse"], {("simcse", "bert-tiny"), ("simcse", "minilm")}),
        ("main_backbone", ["minilm"], {("simcse", "minilm"), ("minilm", "minilm")}),
        ("main_budget", ["steps=100"], {("simcse", "bert-tiny"), ("laser3-self", "bert-tiny")}),
        ("main_corpus", ["nli"], {("simcse", "minilm")}),
        ("main_seed", [1], {("simcse", "bert-tiny")}),
    ],
)
def test_main_view_filters_change_rows(app, widget, choice, expected):
    assert len(board(app)) == 4
    app.multiselect(key=widget).set_value(choice).run()
    assert not app.exception
    frame = board(app)
    assert set(zip(frame["method"], frame["backbone"])) == expected
    if widget == "main_seed":
        assert frame.iloc[0]["seeds"] == 1 and frame.iloc[0]["run ids"] == "2"


def test_main_view_unfinished_runs_and_incomplete_average(app):
    app.checkbox(key="main_unfinished").check().run()
    frame = board(app)
    assert len(frame) == 5
    failed = frame[frame["method"] == "esimcse"].iloc[0]
    assert failed["sts12"] > 0 and pd.isna(failed["stsb"]) and pd.isna(failed["clean"])
    tiny = table(app)  # the bert-tiny table
    assert tiny.iloc[-1]["method"] == "esimcse"  # no complete average: last
    assert "left empty for rows missing a dataset" in texts(app)


INFINITY = re.compile(r"[+-]?(inf|infinity)", re.IGNORECASE)  # how Python and JavaScript write an infinity


def _grid_texts(at: AppTest, index: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(what the grid draws, what its accessible table and a copied cell read) for every cell of one table. The grid
    draws a styled cell's display text, or its placeholder for a null cell; the accessible <table role="grid"> and
    the clipboard get a cell's raw value as text (an empty string for a null), whatever its display text."""
    proto = at.dataframe[index].proto
    raw = pa.ipc.open_stream(proto.arrow_data.data).read_all().to_pandas()
    raw.index = range(len(raw))
    shown = display_values(at, index) if proto.arrow_data.styler.display_values else raw.astype(str)
    shown.index = raw.index
    drawn = shown.where(raw.notna(), proto.placeholder if proto.HasField("placeholder") else "None")
    accessible = raw.apply(lambda column: column.map(lambda v: "" if pd.isna(v) else str(v)))
    return drawn, accessible


def test_a_missing_score_reads_as_the_missing_mark_never_as_infinity(app):
    """A row without a score on a dataset (a failed run): its cell shows the page's missing mark, and what the grid's
    accessible table and a copied cell read has no 'inf' / 'Infinity' in it (the raw value is null, not an infinity
    held for sorting); the row still comes last."""
    from leaderboard.views.common import MISSING

    app.checkbox(key="main_unfinished").check().run()
    assert not app.exception, app.exception
    index = next(i for i, d in enumerate(app.dataframe) if str(d.key or "").startswith("main_table"))
    frame = table(app, index)
    row = int(frame.index[frame["method"] == "esimcse"][0])
    assert row == len(frame) - 1  # no complete average: still last
    drawn, accessible = _grid_texts(app, index)
    for column in ("stsb", "clean"):
        assert pd.isna(frame.loc[row, column])
        assert drawn.loc[row, column] == MISSING and accessible.loc[row, column] == ""
    assert frame.loc[row, "sts12"] > 0 and accessible.loc[row, "sts12"] not in ("", MISSING)
    bad = {(column, text) for column in accessible for text in [*accessible[column], *drawn[column]]
           if INFINITY.fullmatch(text.strip()) or text == "None"}
    assert not bad, bad


def test_main_view_attacked_variant_and_suite(app):
    app.selectbox(key="main_variant_sts").set_value("elong-2").run()
    frame = table(app)  # the dataset columns follow the ranked variant; the variant columns stay
    assert frame[list(STS_DATASETS)].mean(axis=1).to_numpy() == pytest.approx(frame["elong-2"].to_numpy())
    assert (frame["elong-2"] < frame["clean"]).all()  # every method loses under elongation here
    assert frame["elong-2"].is_monotonic_decreasing  # ordered by the ranked variant
    assert r"Δ on **elong\-2**" in texts(app)  # stored text is escaped: shown literally

    app.selectbox(key="main_suite").set_value("diag").run()
    assert not app.exception
    # the suite's declared main metric (pair_cos_shift is 0 on clean texts by definition)
    assert app.selectbox(key="main_metric_diag").value == "intra_sim_adj"
    assert {"clean", "elong-2"} <= set(table(app).columns)
    assert highlighted_cells(app) == set()  # diag measures have no "best"
    assert "none is highlighted" in texts(app)


def test_main_view_no_match_says_so(app):
    app.multiselect(key="main_method").set_value(["minilm"]).run()
    app.multiselect(key="main_corpus").set_value(["nli"]).run()
    assert not app.dataframe
    assert "No run matches these filters" in texts(app)


@pytest.fixture
def media_files(monkeypatch):
    """Every in-memory media store the AppTest creates (download buttons put their files there)."""
    stores: list[MemoryMediaFileStorage] = []

    class Recording(MemoryMediaFileStorage):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            stores.append(self)

    monkeypatch.setattr(app_test_module, "MemoryMediaFileStorage", Recording)
    return stores


def downloaded(at: AppTest, stores, key: str) -> str:
    button = next(b for b in at.get("download_button") if b.proto.id.endswith(key))
    name = button.proto.url.rsplit("/", 1)[1].split(".", 1)[0]
    return stores[-1].get_file(name).content.decode("utf-8")


def test_csv_download_of_the_main_table(results_path, monkeypatch, media_files):
    at = open_app(results_path, monkeypatch)
    import io

    csv = pd.read_csv(io.StringIO(downloaded(at, media_files, "main_csv")))
    shown = board(at)
    assert len(csv) == len(shown)
    order = ["method", "backbone"]  # (the page shows one table per backbone; the file has every row)
    csv_sorted, shown_sorted = csv.sort_values(order), shown.sort_values(order)
    assert list(csv_sorted["method"]) == list(shown_sorted["method"])
    assert csv_sorted["stsb"].to_numpy() == pytest.approx(shown_sorted["stsb"].to_numpy())
    row = csv[(csv["method"] == "simcse") & (csv["backbone"] == "bert-tiny")].iloc[0]
    assert row["stsb seeds"] == 2 and row["stsb std"] > 0

    at.multiselect(key="main_method").set_value(["simcse"]).run()  # the CSV follows the filters
    csv = pd.read_csv(io.StringIO(downloaded(at, media_files, "main_csv")))
    assert set(csv["method"]) == {"simcse"}


def test_every_view_offers_csv(results_path, monkeypatch, media_files):
    at = open_app(results_path, monkeypatch)
    keys = {"Robustness": ["rob_csv", "diag_csv"], "Run": ["run_scores_csv", "run_budget_csv", "run_log_csv"], "Compare": ["cmp_csv"]}
    for view, wanted in keys.items():
        go(at, view)
        if view == "Run":
            at.number_input(key="run_id").set_value(3).run()
        if view == "Compare":
            at.number_input(key="cmp_a").set_value(1).run()
            at.number_input(key="cmp_b").set_value(3).run()
        for key in wanted:
            text = downloaded(at, media_files, key)
            assert len(text.splitlines()) >= 2, (view, key)


# ------------------------------------------------------------------------------------------------- robustness
def test_robustness_view_clean_vs_attacked(app):
    go(app, "Robustness")
    assert app.selectbox(key="rob_suite").value == "sts"
    frame = table(app, 0)
    assert {"clean", "elong-2", "change elong-2"} <= set(frame.columns)
    assert len(frame) == 4  # the four finished groups
    assert frame["change elong-2"].to_numpy() == pytest.approx((frame["elong-2"] - frame["clean"]).to_numpy())
    assert (frame["change elong-2"] < 0).all()
    assert frame["changed elong-2"].tolist() == pytest.approx([0.9] * 4)  # Score.info["changed_frac"], as recorded
    assert frame["changed elong-8"].tolist() == pytest.approx([1.0] * 4)
    assert len(app.get("vega_lite_chart")) >= 2  # clean-vs-attacked plot and the diag plots
    spec = json.loads(app.get("vega_lite_chart")[0].proto.spec)
    text = json.dumps(spec)
    # score vs m: x = 1 (clean), 2, 4, 8, then random m, each with the share of texts the attack changed
    assert all(x in text for x in ("1 (clean)", "2 (90% changed)", "4 (95% changed)", "8 (100% changed)", "rand (97% changed)"))
    line = next(layer for layer in spec["layer"] if layer["mark"]["type"] == "line")
    # random m is a point of its own, not joined to the line: the line keeps the variants on the family's ordered
    # axis (AttackFamily.ordered, with an x; elong-rand has none)
    assert "on_axis" in json.dumps(line["transform"])
    assert not attack_curves.on_axis("elong-rand") and attack_curves.on_axis("elong-8")
    assert '"y2"' in text  # CI bars
    assert '"orient": "bottom"' in text  # the legend sits under the plot, inside the chart


def test_robustness_view_filters_and_dataset(app):
    go(app, "Robustness")
    average = table(app, 0).set_index("method")["clean"]
    app.selectbox(key="rob_dataset_sts").set_value("stsb").run()
    stsb = table(app, 0).set_index("method")["clean"]
    assert set(stsb.index) == set(average.index) and not (stsb == average.reindex(stsb.index)).all()
    app.multiselect(key="rob_method").set_value(["laser3-self"]).run()
    assert list(table(app, 0)["method"]) == ["laser3-self"]


def test_robustness_view_diag_measures(app):
    go(app, "Robustness")
    diag = table(app, 1)
    assert {"pair_cos_shift", "intra_sim_adj", "anisotropy", "positional_jsd"} <= set(diag["metric"])
    assert {"clean", "elong-2"} <= set(diag.columns)
    shift = diag[diag["metric"] == "pair_cos_shift"]
    assert (shift["clean"] == 0).all() and (shift["elong-2"] != 0).all()
    specs = [c.proto.spec for c in app.get("vega_lite_chart")]
    facet = next(s for s in specs if '"facet"' in s)  # one small plot per diag measure
    assert all(m in facet for m in ("pair_cos_shift", "intra_sim_adj", "anisotropy", "positional_jsd"))
    diag_spec = json.loads(facet)
    assert diag_spec["spec"]["mark"]["type"] == "point" and "xOffset" in diag_spec["spec"]["encoding"]  # categories, no line
    assert diag_spec["spec"]["encoding"]["color"]["legend"]["orient"] == "bottom"
    assert any('"density"' in s for s in specs)
    assert app.selectbox(key="diag_run").value is not None  # the pair-cosine distribution of one run


# -------------------------------------------------------------------------------------------------------- run
def test_run_view_shows_everything_about_a_run(app):
    go(app, "Run")
    app.number_input(key="run_id").set_value(3).run()
    assert not app.exception
    shown = texts(app)
    assert "bench run --method laser3-self" in shown  # the command that reproduces it
    assert "abc1232" in shown  # code version
    summary = table(app, 0).set_index("field")
    assert summary.loc["method", "value"] == "laser3-self" and summary.loc["budget", "value"] == "steps=100"
    budget, packages, scores = (table(app, i) for i in range(1, 4))
    assert budget.set_index("kind").loc["steps"].tolist() == ["100", "100"]  # asked, consumed
    assert "seconds" in set(budget["kind"])
    assert dict(zip(packages["package"], packages["version"]))["torch"] == "2.3.0"
    assert set(scores[scores["suite"] == "sts"]["dataset"]) == set(STS_DATASETS)
    assert {"clean", "elong-2", "change elong-2"} <= set(scores.columns)
    assert len(app.get("json")) == 2  # config and data fingerprint
    specs = [c.proto.spec for c in app.get("vega_lite_chart")]
    assert any('"loss"' in s for s in specs)  # the training loss curve


def test_run_view_eval_only_failed_and_missing_runs(app):
    go(app, "Run")
    app.number_input(key="run_id").set_value(5).run()
    assert "No budget: this run did not train" in texts(app) and "No training log" in texts(app)
    app.number_input(key="run_id").set_value(6).run()
    assert any("failed" in e.value for e in app.error)
    assert any("out of memory" in c.value for c in app.code)
    app.number_input(key="run_id").set_value(999).run()
    assert not app.exception
    assert any("no run 999" in w.value for w in app.warning)


# ---------------------------------------------------------------------------------------------------- compare
def compare(app: AppTest, a: int, b: int) -> pd.DataFrame:
    go(app, "Compare")
    app.number_input(key="cmp_a").set_value(a).run()
    app.number_input(key="cmp_b").set_value(b).run()
    app.multiselect(key="cmp_variants_sts_spearman").set_value(["clean"]).run()
    assert not app.exception
    return table(app, 1).set_index("dataset")


def test_compare_opens_on_the_reference_against_the_best_run_of_its_backbone_on_every_variant(app):
    """Without a choice, A = the reference row (here the untrained minilm, scored by `bench eval`), B = the best
    finished full-set run of the same backbone, on clean and every attacked variant of the headline suite."""
    go(app, "Compare")
    assert not app.exception
    side = table(app, 0).set_index("field")
    assert list(side.columns) == ["A: run 5", "B: run 4"]  # vanilla/minilm and simcse/minilm, not the newest run 6
    frame = table(app, 1)
    assert set(frame["variant"]) == {"clean", "elong-2", "elong-4", "elong-8", "elong-rand"}
    assert set(frame.loc[frame["variant"] == "clean", "dataset"]) == set(STS_DATASETS)


def test_compare_default_pair_is_the_best_row_of_the_reference_backbone_and_subset():
    from leaderboard.views.compare import _default_pair

    runs = pd.DataFrame({
        "id": [1, 2, 3, 4, 5, 6],
        "method": ["vanilla", "simcse", "laser3-self", "mlm", "simcse", "laser3-self"],
        "kind": ["eval", "train", "train", "train", "train", "train"],
        "backbone": ["minilm", "minilm", "minilm", "bert", "minilm", "minilm"],
        "subset": ["", "", "", "", "", "limit 40"],
        "status": ["finished", "finished", "finished", "finished", "failed", "finished"],
    })  # fmt: skip
    headline = pd.Series({1: 70.0, 2: 75.0, 3: 80.0, 4: 90.0, 5: 95.0, 6: 99.0})
    assert _default_pair(runs, headline) == (1, 3)  # not run 4 (another backbone), 5 (failed) or 6 (a subset)
    assert _default_pair(runs, None) == (1, 3)  # nothing scored: the newest of that backbone
    assert _default_pair(runs, headline.drop(3)) == (1, 2)
    stand_in = runs.assign(method=["minilm", *runs["method"][1:]])  # `bench eval --model minilm`, named by its model
    assert _default_pair(stand_in, headline) == (1, 3)


def test_compare_bootstrap_ci_for_a_clearly_better_run(app):
    frame = compare(app, 1, 3)  # B = laser3-self, clearly better than A = simcse seed 0
    assert set(frame.index) == set(STS_DATASETS)
    for dataset in STS_DATASETS:
        row = frame.loc[dataset]
        assert row["B − A"] > 0
        assert 0 < row["CI low"] <= row["B − A"] <= row["CI high"], dataset
        # the items separate them, yet each is one training seed: no verdict (the rule of every star)
        assert row["items"] == 80 and row["p"] < 0.05 and "one seed of a trained run: no verdict" in row["note"]
    side = table(app, 0).set_index("field")
    assert list(side.columns) == ["A: run 1", "B: run 3"] and side.loc["method"].tolist() == ["simcse", "laser3-self"]

    frame = compare(app, 3, 1)  # swapped: the whole CI is below 0
    assert (frame["CI high"] < 0).all()


def test_compare_same_run_ci_covers_zero_and_no_shared_scores(app):
    frame = compare(app, 1, 2)  # two seeds of the same method, same noise level
    assert (frame["CI low"] <= frame["B − A"]).all() and (frame["B − A"] <= frame["CI high"]).all()
    frame = compare(app, 3, 3)
    assert (frame["B − A"] == 0).all() and (frame["CI low"] == 0).all() and (frame["CI high"] == 0).all()
    assert set(frame["note"]) == {"one seed of a trained run: no verdict (3+ seeds per method, `bench results`)"}


def test_compare_variant_choice(app):
    compare(app, 1, 3)
    app.multiselect(key="cmp_variants_sts_spearman").set_value(["clean", "elong-2"]).run()
    frame = table(app, 1)
    assert set(frame["variant"]) == {"clean", "elong-2"} and len(frame) == 2 * len(STS_DATASETS)
    app.multiselect(key="cmp_variants_sts_spearman").set_value([]).run()
    assert "Pick at least one variant" in texts(app)


# ---------------------------------------------------------------------------------------------- empty database
def _assert_first_run_help(at: AppTest, reason: str) -> None:
    assert not at.exception
    shown = texts(at)
    assert reason in shown
    assert "bench eval --model minilm --suite sts:stsb --db" in shown  # how to add the first run
    assert not at.dataframe


def test_missing_database_file(tmp_path, monkeypatch):
    path = tmp_path / "nothing-here.sqlite"
    at = open_app(path, monkeypatch)
    _assert_first_run_help(at, "There is no results database")
    assert not path.exists()  # looking did not create it


def test_empty_file_and_empty_database(tmp_path, monkeypatch):
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    _assert_first_run_help(open_app(empty, monkeypatch), "is not a lenbench results database yet")
    assert empty.stat().st_size == 0

    fresh = tmp_path / "fresh.sqlite"
    ResultsDB(fresh).engine.dispose()  # tables, no runs
    _assert_first_run_help(open_app(fresh, monkeypatch), "has no runs yet")


def test_not_a_database_is_an_error_message_not_a_traceback(tmp_path, monkeypatch):
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not sqlite" * 100)
    at = open_app(junk, monkeypatch)
    assert any("Cannot read the results database" in e.value for e in at.error)


def test_db_argument_after_double_dash(results_path, monkeypatch):
    """`streamlit run app.py -- --db PATH` (what `bench leaderboard` runs) wins over $LENBENCH_DB."""
    monkeypatch.setenv("LENBENCH_DB", "/nonexistent/other.sqlite")
    monkeypatch.setattr("sys.argv", ["app.py", "--db", str(results_path)])
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.run()
    assert len(board(at)) == 4


def test_new_runs_show_up_and_a_replaced_file_is_reread(tmp_path, monkeypatch):
    import os
    import time

    from results_db import ScoreRecord

    path = fill_db(tmp_path / "results.sqlite")
    at = open_app(path, monkeypatch)
    assert len(board(at)) == 4
    time.sleep(0.01)  # a distinct mtime for the write below
    writer = ResultsDB(path)
    run = writer.create_run(model="x", method="newcomer", backbone="bert-tiny", status="running")
    writer.add_scores(run, [ScoreRecord("sts", d, "spearman", 99.0) for d in STS_DATASETS])
    writer.finish_run(run)
    writer.engine.dispose()
    at.run()
    frame = board(at)
    assert len(frame) == 5 and frame.iloc[0]["method"] == "newcomer"  # the cache followed the write

    other = ResultsDB(tmp_path / "other.sqlite")  # a different database moved over the file
    run = other.create_run(model="y", method="only-one", backbone="b", status="finished")
    other.add_scores(run, [ScoreRecord("sts", "stsb", "spearman", 50.0)])
    other.engine.dispose()
    os.replace(tmp_path / "other.sqlite", path)
    at.run()
    assert list(table(at)["method"]) == ["only-one"]


# ------------------------------------------------------------------------------------- no None in any cell
def _shown_cells(at: AppTest) -> list[tuple[str, str, str]]:
    """(table key, column, the text a cell shows) for every table of the page: a styled table's display values, a
    plain table's values (Streamlit draws a missing value as the text 'None')."""
    out = []
    for element in at.dataframe:
        proto = element.proto.arrow_data
        if proto.styler.display_values:
            frame = pa.ipc.open_stream(proto.styler.display_values).read_all().to_pandas()
        else:
            frame = element.value
        for column in frame.columns:
            for value in frame[column]:
                text = "None" if value is None or (not isinstance(value, str) and pd.isna(value)) else str(value)
                out.append((str(element.key), str(column), text))
    return out


def _read_out_cells(at: AppTest) -> list[tuple[str, str, str]]:
    """(table key, column, the text the grid's accessible table and a copied cell get: the raw value) per cell."""
    out = []
    for index, element in enumerate(at.dataframe):
        accessible = _grid_texts(at, index)[1]
        out += [(str(element.key), str(column), text) for column in accessible for text in accessible[column]]
    return out


def _bad_cells(at: AppTest, where: str) -> list[tuple[str, str, str, str]]:
    assert not at.exception, (where, at.exception)
    bad = [(where, *cell) for cell in _shown_cells(at) if cell[2].strip() in ("None", "nan", "NaN", "<NA>", "NaT")]
    return bad + [(where, *cell) for cell in _read_out_cells(at) if INFINITY.fullmatch(cell[2].strip())]


def test_no_cell_of_any_view_shows_none_or_nan_on_a_mixed_database(tmp_path, monkeypatch):
    """A database filled every way (bench run comparisons, bench eval rows, a --limit subset, a failed run, a sweep,
    an imported reference row, diag scores): every table of every view, subsets and unfinished runs included,
    shows text or an empty cell, never 'None' or 'nan', and no cell reads out as an infinity."""
    from results_db import ResultsDB
    from results_db.records import ScoreRecord
    from tests.test_leaderboard_fixtures import fill_extras, fill_main_job

    path = fill_main_job(fill_extras(tmp_path / "mixed.sqlite"))
    db = ResultsDB(path)  # a folder scored by `bench eval`, outside any comparison
    run_id = db.create_run(kind="eval", model="runs/x/simcse/encoder", method="vanilla", backbone="minilm",
                           suite="sts", config={"model": "runs/x/simcse/encoder", "pooling": "mean", "limit": None},
                           status="running")  # fmt: skip
    db.add_scores(run_id, [ScoreRecord("sts", "stsb", "spearman", 80.0, 10, "clean")])
    db.finish_run(run_id)
    at = open_app(path, monkeypatch)
    for view in ("Leaderboard", "Robustness"):
        go(at, view)
        prefix = "main" if view == "Leaderboard" else "rob"
        for box in (f"{prefix}_subsets", f"{prefix}_unfinished"):
            at.checkbox(key=box).check().run()
    bad = []
    for view in ("Leaderboard", "Robustness", "Compare"):
        go(at, view)
        bad += _bad_cells(at, view)
    runs = ResultsDB(path, read_only=True).runs()
    for a in runs["id"]:
        at.number_input(key="cmp_a").set_value(int(a)).run()
        bad += _bad_cells(at, f"Compare A={a}")
    go(at, "Run")
    for rid in runs["id"]:
        at.number_input(key="run_id").set_value(int(rid)).run()
        bad += _bad_cells(at, f"Run {rid}")
    assert not bad, "\n".join(map(str, sorted({b[:3] for b in bad})))


def _colour_maps(spec) -> list[dict[str, str]]:  # noqa: ANN001
    """Every row-colouring channel's label -> colour map in a Vega-Lite spec (layers and facets included)."""
    found = []
    if isinstance(spec, dict):
        colour = spec.get("encoding", {}).get("color") if isinstance(spec.get("encoding"), dict) else None
        if isinstance(colour, dict) and colour.get("field") in ("row", "label", "method"):  # a chart's rows, by method
            scale = colour.get("scale") or {}
            assert "range" in scale and "domain" in scale, f"a colour scale without its method colours: {colour}"
            found.append(dict(zip(scale["domain"], scale["range"])))
        for value in spec.values():
            found += _colour_maps(value)
    elif isinstance(spec, list):
        for value in spec:
            found += _colour_maps(value)
    return found


def test_a_method_has_one_colour_in_every_chart_of_every_view(app, monkeypatch):
    """The board's charts and the robustness and diagnostics charts colour each method the same; two methods never
    share a colour (tableau10's order per chart had made simcse blue in one chart and orange in the next)."""
    from leaderboard import colours

    seen: dict[str, set[str]] = {}
    for view in ("Leaderboard", "Robustness"):
        at = go(app, view)
        for chart in at.get("vega_lite_chart"):
            for mapping in _colour_maps(json.loads(chart.proto.spec)):
                for label, colour in mapping.items():
                    seen.setdefault(label.split(" · ")[0], set()).add(colour)
    assert len(seen) >= 3, seen
    assert all(len(c) == 1 for c in seen.values()), seen  # one colour per method
    assert len({next(iter(c)) for c in seen.values()}) == len(seen)  # and no two methods alike
    assert colours.method_colours(["b", "a", "a"]) == {"a": colours.PALETTE[0], "b": colours.PALETTE[1]}


def test_run_view_opens_a_scores_per_item_values(app, results_path):
    """The Run view's 'Per-item values': the items stored behind the chosen score, as the database holds them, with a
    CSV; the values rebuild the score (its mean for a retrieval or kNN score, 100 x Spearman against gold for STS)."""
    from scipy.stats import spearmanr

    from results_db import ResultsDB

    go(app, "Run")
    app.number_input(key="run_id").set_value(3).run()
    assert not app.exception
    choice = app.selectbox(key="run_items_score")
    label = choice.options[int(choice.value or 0)] if isinstance(choice.value, int) else choice.value
    db = ResultsDB(results_path, read_only=True)
    scores = db.scores([3])
    suite, dataset, metric, variant = label.split(" · ")
    (score,) = scores[(scores["suite"] == suite) & (scores["dataset"] == dataset) & (scores["metric"] == metric)
                      & (scores["variant"] == variant)].itertuples()  # fmt: skip
    stored = db.score_items(int(score.id))
    shown = next(t.value for t in app.dataframe if list(t.value.columns[:2]) == ["item", "value"])
    assert shown["item"].tolist() == [str(i) for i in stored.item_ids]
    assert shown["value"].tolist() == pytest.approx(list(stored.values))
    rebuilt = (100 * spearmanr(shown["value"], shown["gold"]).statistic if stored.aggregate == "spearman"
               else float(np.mean(shown["value"])))  # fmt: skip
    assert rebuilt == pytest.approx(score.value, abs=0.01)


def test_per_item_values_download_as_shown(results_path, monkeypatch, media_files):
    import io

    at = open_app(results_path, monkeypatch)
    go(at, "Run")
    at.number_input(key="run_id").set_value(3).run()
    shown = next(t.value for t in at.dataframe if list(t.value.columns[:2]) == ["item", "value"])
    csv = pd.read_csv(io.StringIO(downloaded(at, media_files, "run_items_csv")), dtype={"item": str})
    assert csv["item"].tolist() == shown["item"].tolist()
    assert csv["value"].to_numpy() == pytest.approx(shown["value"].to_numpy())
