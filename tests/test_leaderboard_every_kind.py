"""Every view of the leaderboard over a database holding each kind of row a user makes, read as text (AppTest).

The database (fill_every_kind), as `bench eval`, `bench eval --limit 100`, `bench import` of the MTEB export of the
same model, and a `bench sweep` of 2 seeds scored on a `--limit 100` subset write it:
  run 1: `bench eval --model minilm` (stsb, clean and elong-2, per-item values)       kind eval, full set
  run 2: `bench eval --model minilm --limit 100`                                       kind eval, subset
  run 3: the MTEB result of all-MiniLM-L6-v2 imported (run 1's clean score at 4 decimals, and sts12; no items, n 0)
  runs 4, 5: sweep "tiny", simcse on random-bert-mini, seeds 0 and 1, `--limit 100`    kind train, subset
  run 6: `bench run` comparison on minilm: laser3-self trained, full set              kind train
A second database (fill_rounded_reference) holds one model's own scores on three datasets beside the same scores
as an MTEB file rounds them, two rounded up and one down.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("streamlit")

from streamlit.testing.v1 import AppTest  # noqa: E402

from results_db import ItemValues, ResultsDB, ScoreRecord  # noqa: E402
from tests.test_leaderboard_app import APP, TIMEOUT, board, display_values, go, highlighted_cells, texts, values  # noqa: E402
from tests.test_leaderboard_scoring_versions import two_versions  # noqa: E402, F401  (a fixture)

N_FULL = 300
MINILM_INFO = {"parameters": 22_713_728, "embedding_dim": 384, "max_tokens": 256, "max_position_embeddings": 512}
MTEB_INFO = {"source": "mteb", "split": "test", "main_score": "cosine_spearman"}


def _spearman(values: np.ndarray, gold: np.ndarray) -> float:
    from scipy.stats import spearmanr

    return float(100.0 * spearmanr(values, gold).statistic)


def _records(rng: np.random.Generator, gold: np.ndarray, noise: float, n: int, limit: int | None,
             dataset: str = "stsb") -> list[ScoreRecord]:  # fmt: skip
    ids = [str(i) for i in range(n)]
    out = []
    clean = gold[:n] / 5 + rng.normal(0, noise, n) * 0.3
    for variant, extra in (("clean", 0.0), ("elong-2", 0.4)):
        values = clean + rng.normal(0, extra, n) * 0.3 if extra else clean
        info = {"suite_version": 1, **({"limit": limit} if limit else {}), **({"changed_frac": 1.0} if extra else {})}
        items = ItemValues("spearman", ids, values.tolist(), gold[:n].tolist())
        out.append(ScoreRecord("sts", dataset, "spearman", _spearman(values, gold[:n]), n, variant, items, info))
    return out


def fill_every_kind(path: Path) -> Path:
    db = ResultsDB(path)
    rng = np.random.default_rng(7)
    gold = np.round(rng.uniform(0, 5, N_FULL), 2)
    common = dict(suite="sts:stsb@elong", status="running")
    minilm_eval = dict(kind="eval", method="vanilla", backbone="minilm", model="minilm", model_info=MINILM_INFO, **common)
    own = db.create_run(**minilm_eval, config={"model": "minilm", "limit": None})
    records = _records(rng, gold, 0.8, N_FULL, None)
    db.add_scores(own, records)
    db.finish_run(own)
    subset = db.create_run(**minilm_eval, config={"model": "minilm", "limit": 100})
    db.add_scores(subset, _records(rng, gold, 0.3, 100, 100))
    db.finish_run(subset)
    name = "sentence-transformers/all-MiniLM-L6-v2"
    ref = db.create_run(kind="reference", method=name, model=name, backbone="", suite="mteb", status="running",
                        config={"source": "mteb", "model": name}, model_info=MINILM_INFO)  # fmt: skip
    db.add_scores(ref, [ScoreRecord("sts", "stsb", "spearman", round(records[0].value, 4), 0, info=MTEB_INFO),
                        ScoreRecord("sts", "sts12", "spearman", 72.3456, 0, info=MTEB_INFO)])  # an MTEB task run 1 lacks
    db.finish_run(ref)
    for seed in (0, 1):
        run = db.create_run(kind="train", method="simcse", backbone="random-bert-mini", model=f"runs/simcse-{seed}",
                            budget_label="steps=5", train_corpus="wiki-offline", seed=seed, sweep="tiny",
                            sweep_point=f"method=simcse seed={seed}", model_info={"parameters": 4_782_464},
                            config={"eval": {"limit": 100}, "comparison": f"c{seed}"}, **common)  # fmt: skip
        db.add_scores(run, _records(rng, gold, 2.0, 100, 100))
        db.finish_run(run)
    trained = db.create_run(kind="train", method="laser3-self", backbone="minilm", model="runs/laser3-self",
                            budget_label="steps=60", train_corpus="wiki-offline", config={"comparison": "main"},
                            model_info=MINILM_INFO, **common)  # fmt: skip
    db.add_scores(trained, _records(rng, gold, 0.5, N_FULL, None))
    db.finish_run(trained)
    db.engine.dispose()
    return path


def fill_two_evals(path: Path) -> Path:
    """Only `bench eval --model minilm` on the full set and on `--limit 100`, as the issue's Compare case."""
    db = ResultsDB(path)
    rng = np.random.default_rng(3)
    gold = np.round(rng.uniform(0, 5, N_FULL), 2)
    for limit in (None, 100):
        run = db.create_run(kind="eval", method="vanilla", backbone="minilm", model="minilm", suite="sts:stsb",
                            status="running", config={"model": "minilm", "limit": limit})  # fmt: skip
        db.add_scores(run, _records(rng, gold, 0.8 if limit is None else 0.2, limit or N_FULL, limit))
        db.finish_run(run)
    db.engine.dispose()
    return path


ROUNDED = {"sts12": 71.234567, "stsb": 82.032467, "sickr": 79.876543}  # own scores; MTEB's file: 4 decimals


def fill_rounded_reference(path: Path) -> Path:
    """`bench eval --model minilm` on sts12, stsb, sickr (no items) and the same scores imported as MTEB rounds them:
    71.2346 (up), 82.0325 (up), 79.8765 (down)."""
    db = ResultsDB(path)
    own = db.create_run(kind="eval", method="vanilla", backbone="minilm", model="minilm", suite="sts", status="running",
                        config={"model": "minilm"}, model_info=MINILM_INFO)  # fmt: skip
    db.add_scores(own, [ScoreRecord("sts", d, "spearman", v, 1000) for d, v in ROUNDED.items()])
    db.finish_run(own)
    name = "sentence-transformers/all-MiniLM-L6-v2"
    ref = db.create_run(kind="reference", method=name, model=name, backbone="", suite="mteb", status="running",
                        config={"source": "mteb"}, model_info=MINILM_INFO)  # fmt: skip
    db.add_scores(ref, [ScoreRecord("sts", d, "spearman", round(v, 4), 0, info=MTEB_INFO) for d, v in ROUNDED.items()])
    db.finish_run(ref)
    db.engine.dispose()
    return path


def open_on(path: Path, monkeypatch) -> AppTest:
    monkeypatch.setenv("LENBENCH_DB", str(path))
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.run()
    assert not at.exception, at.exception
    return at


@pytest.fixture(scope="module")
def every_kind(tmp_path_factory) -> Path:
    return fill_every_kind(tmp_path_factory.mktemp("every-kind") / "results.sqlite")


# ------------------------------------------------------------------------------------------------------- Compare
def test_compare_never_opens_on_a_subset_against_the_full_set(tmp_path, monkeypatch):
    at = go(open_on(fill_two_evals(tmp_path / "two.sqlite"), monkeypatch), "Compare")
    shown = texts(at)
    assert "cannot be compared" in shown and "100-item subset" in shown, shown
    table = values(at.dataframe[-1].value)
    assert table["B − A"].isna().all(), table  # no difference of scores on other items, so no CI [0.00, 0.00], p 1
    assert table["note"].str.contains("other items").all()


def test_compare_opens_on_a_pair_scored_on_the_same_items(every_kind, monkeypatch):
    at = go(open_on(every_kind, monkeypatch), "Compare")
    a, b = (int(at.sidebar.number_input(key=k).value) for k in ("cmp_a", "cmp_b"))
    table = at.dataframe[-1].value
    assert not table.empty and not table["note"].str.contains("other items").any(), (a, b, table)


def test_compare_an_imported_score_within_its_rounding_is_a_tie(every_kind, monkeypatch):
    at = open_on(every_kind, monkeypatch)
    go(at, "Compare")
    at.sidebar.number_input(key="cmp_a").set_value(1)
    at.sidebar.number_input(key="cmp_b").set_value(3).run()
    table = at.dataframe[-1].value
    row = table[(table["dataset"] == "stsb") & (table["variant"] == "clean")].iloc[0]
    assert row["note"].startswith("tie"), row


# ---------------------------------------------------------------------------------------------------- main board
def _main_tables(at: AppTest) -> list[int]:
    return [i for i, d in enumerate(at.dataframe) if str(d.key or "").startswith("main_table")]


def test_main_board_imported_score_within_its_rounding_ties_for_best_and_probability(tmp_path, monkeypatch):
    at = open_on(fill_rounded_reference(tmp_path / "rounded.sqlite"), monkeypatch)
    assert len(board(at)) == 2
    index = _main_tables(at)[0]
    shown = at.dataframe[index].value
    columns = list(shown.columns)
    # both rows are the best of every dataset column: 2 rows x 3 datasets (and the average) highlighted
    for column in (*ROUNDED, "clean"):  # each dataset, and their average (of rounded scores: as coarse as they)
        assert {(0, columns.index(column)), (1, columns.index(column))} <= highlighted_cells(at, index), column
    aggregate = next(d.value for d in at.dataframe if any(str(c).startswith("P(>") for c in d.value.columns))
    probability = aggregate.set_index("row")[[c for c in aggregate.columns if str(c).startswith("P(>")][0]]
    imported = next(r for r in probability.index if r.startswith("sentence-transformers/"))
    assert probability.loc[imported] == "0.50"  # ties, not 2 wins of 3 (0.67)


def test_main_board_labels_on_one_row(tmp_path, monkeypatch):
    at = open_on(fill_two_evals(tmp_path / "two.sqlite"), monkeypatch)
    shown = texts(at)
    assert "1 row, 1 seed run" in shown and "1 rows" not in shown and "(group, seed) pairs" not in shown, shown


def test_main_board_imported_row_rank_and_n_read_as_missing(every_kind, monkeypatch):
    at = open_on(every_kind, monkeypatch)
    index = _main_tables(at)[0]
    frame, cells = at.dataframe[index].value, display_values(at, index)
    row = int(frame.index[frame["type"] == "reference"][0])
    assert cells.loc[row, "rank"] == "–"  # the grid draws a null as 'None': the cell holds text to show
    assert frame.loc[row, "n"] in ("", "–")  # the file stated no item count: not n = 0


def test_main_board_difference_on_the_only_shared_dataset_says_which(every_kind, monkeypatch):
    at = open_on(every_kind, monkeypatch)
    frame = board(at)
    delta = frame.set_index("method")["Δ vs vanilla"]
    assert "datasets*" not in delta.loc["laser3-self"], delta  # was '+1.23 (0/1 datasets*)'
    assert delta.loc["laser3-self"].endswith("(stsb only)"), delta


def test_main_board_size_axis_spans_a_readable_range(tmp_path, monkeypatch):
    at = open_on(fill_rounded_reference(tmp_path / "rounded.sqlite"), monkeypatch)
    specs = [json.loads(c.proto.spec) for c in at.get("vega_lite_chart")]
    size = next(s for s in specs if "parameters" in json.dumps(s.get("encoding", {})))
    low, high = size["encoding"]["y"]["scale"]["domain"]
    assert high - low >= 0.5, (low, high)  # not 82.03245-82.03250


def test_subset_only_board_draws_its_charts(every_kind, monkeypatch):
    at = open_on(every_kind, monkeypatch)
    at.checkbox(key="main_subsets").check().run()
    at.sidebar.multiselect(key="main_backbone").set_value(["random-bert-mini"]).run()
    assert len(board(at)) == 1
    shown = texts(at)
    assert "No scores to draw" not in shown and "No run recorded its model size" not in shown, shown
    assert len(at.get("vega_lite_chart")) == 2


def test_main_board_captions_are_one_line_each_with_statistics_in_an_expander(every_kind, monkeypatch):
    at = open_on(every_kind, monkeypatch)
    outside = [c.value for c in at.main.get("caption") if not _in_expander(at, c)]
    assert all(len(text) <= 300 for text in outside), [t for t in outside if len(t) > 300]
    assert any("Holm" in c.value for c in at.expander[0].get("caption"))  # the statistics stay one click away


def _in_expander(at: AppTest, element) -> bool:  # noqa: ANN001
    return any(element in e.get("caption") for e in at.expander)


# ---------------------------------------------------------------------------------------------------- robustness
def test_robustness_suite_average_of_one_dataset_has_interval_bars(every_kind, monkeypatch):
    """The imported row scored sts12 too (clean only): minilm's suite average is still its one dataset, stsb."""
    from leaderboard import grouping, queries
    from leaderboard.views.robustness import AVERAGE_CHOICE, robustness_for

    at = go(open_on(every_kind, monkeypatch), "Robustness")
    assert at.sidebar.selectbox(key="rob_dataset_sts").value == AVERAGE_CHOICE
    state = queries.db_state(str(every_kind))
    _, curve = robustness_for(state.location, state.version, "sts", "spearman", None, grouping.RunFilters(), "elong")
    minilm = curve[curve["method"] == "minilm"]
    assert len(minilm) == 2 and minilm[["low", "high"]].notna().all().all(), minilm


def test_robustness_axis_holds_negative_scores():
    from leaderboard.views.robustness import y_domain

    low, high = y_domain(-3.2, 5.0)  # an untrained model's clean correlation below 0
    assert low <= -3.2 and high >= 5.0
    low, high = y_domain(0.3, 1.2)  # x100 scores of a near-random model: not cut at 1
    assert low <= 0.3 and high >= 1.2


# ------------------------------------------------------------------------------------------------- column spec
def test_a_main_board_column_from_a_stored_field_is_one_entry_of_the_column_spec(tmp_path, monkeypatch):
    from leaderboard import columns

    entry = columns.BoardColumn("positions", ("model_info.max_position_embeddings",), "%d", help="position embeddings")
    width = columns.BoardColumn("width", ("model_info.embedding_dim",), "%d", section="settings")  # beside the settings
    monkeypatch.setattr(columns, "COLUMNS", (*columns.COLUMNS, entry, width))
    at = open_on(fill_rounded_reference(tmp_path / "rounded.sqlite"), monkeypatch)
    frame = board(at)
    assert frame["positions"].tolist() == [512, 512]
    index = _main_tables(at)[0]
    assert set(display_values(at, index)["positions"]) == {"512"}
    order = list(frame.columns)
    assert order.index("corpus") < order.index("width") < order.index("clean") < order.index("positions")


def test_every_column_of_the_main_table_is_in_the_column_spec_or_a_score(every_kind, monkeypatch):
    """The main table's columns are the spec's (leaderboard.columns.COLUMNS, in its order within the settings, rank
    and size sections) and the suite's scores: a variant, a dataset, the difference from the reference."""
    from leaderboard import columns

    scores = ResultsDB(every_kind, create=False).scores()
    scored = set(scores["variant"]) | set(scores["dataset"])
    at = open_on(every_kind, monkeypatch)
    shown = list(at.dataframe[_main_tables(at)[0]].value.columns)
    declared = [c for c in shown if c in columns.names()]
    assert declared == [c for c in columns.names() if c in shown]  # the spec's order
    assert {"method", "backbone", "rank", "seeds", "run ids"} <= set(declared)
    assert [c for c in shown if c not in declared and c not in scored and not c.startswith("Δ vs ")] == []


# ------------------------------------------------------------------------------- one name for a `bench eval` row
def test_a_bench_eval_row_has_one_name_everywhere(every_kind, monkeypatch, capsys):
    """Run 1 (`bench eval --model minilm`) is 'minilm' in every listing, as on the main board, never 'vanilla'."""
    import csv
    import io

    import lenbench
    from bench.cli import main

    assert main(["results", "--db", str(every_kind), "--runs-only"]) == 0
    listing = capsys.readouterr().out.splitlines()
    run_1 = next(line.split() for line in listing[1:] if line.split()[0] == "1")
    assert run_1[2] == "minilm", listing
    assert main(["results", "--db", str(every_kind), "--run", "1", "--format", "csv"]) == 0
    assert {r["method"] for r in csv.DictReader(io.StringIO(capsys.readouterr().out))} == {"minilm"}
    assert main(["results", "--db", str(every_kind), "--run", "1", "--format", "json"]) == 0
    assert {r["method"] for r in json.loads(capsys.readouterr().out)} == {"minilm"}
    assert main(["results", "--db", str(every_kind), "--run", "1"]) == 0
    report = capsys.readouterr().out
    assert report.splitlines()[0].split()[:3] == ["run", "1", "minilm"] and "vanilla" not in report, report
    methods = {m for ms in lenbench.load(every_kind).comparisons()["methods"] for m in ms}
    assert "minilm" in methods and "vanilla" not in methods, methods

    at = open_on(every_kind, monkeypatch)
    assert "minilm" in set(board(at)["method"]) and "vanilla" not in set(board(at)["method"])
    go(at, "Run")
    at.sidebar.number_input(key="run_id").set_value(1).run()
    title = at.subheader[0].value
    assert "minilm" in title and "vanilla" not in title, title
    go(at, "Compare")
    at.sidebar.number_input(key="cmp_a").set_value(1).run()
    side = at.dataframe[0].value.set_index("field")
    assert side.loc["method", "A: run 1"] == "minilm"


def test_bench_results_shows_no_item_count_for_an_imported_score(every_kind, capsys):
    from bench.cli import main

    assert main(["results", "--db", str(every_kind), "--run", "3"]) == 0
    table = capsys.readouterr().out.splitlines()
    header = next(i for i, line in enumerate(table) if line.split()[:4] == ["suite", "dataset", "metric", "n"])
    rows = [line.split() for line in table[header + 1:] if line.strip()][:2]
    assert [r[3] for r in rows] == ["-", "-"], table  # not n = 0


# ----------------------------------------------------------------------------------------- every view, every row
BROKEN_LABELS = ("1 rows", "(group, seed) pairs", "/1 datasets*", "No scores to draw", "No run recorded its model size")


def test_every_view_over_every_kind_of_row_reads_right(every_kind, monkeypatch):
    """Each view (whatever the sidebar offers) over runs, evals, a subset, an import and a sweep, subsets shown: no
    traceback, no 'None' or 'nan' in a cell, none of the broken labels, and a bench eval row never called vanilla."""
    from tests.test_leaderboard_app import _bad_cells

    at = open_on(every_kind, monkeypatch)
    at.checkbox(key="main_subsets").check().run()
    views = list(at.radio(key="view").options)
    assert {"Leaderboard", "Robustness", "Run", "Compare"} <= set(views)
    bad, labels = [], []
    for view in views:
        go(at, view)
        bad += _bad_cells(at, view)
        shown = texts(at)
        labels += [(view, phrase) for phrase in BROKEN_LABELS if phrase in shown]
    for run_id in range(1, 7):
        go(at, "Run")
        at.sidebar.number_input(key="run_id").set_value(run_id).run()
        bad += _bad_cells(at, f"Run {run_id}")
        if run_id in (1, 2):
            assert "vanilla" not in at.subheader[0].value
    assert not bad, bad
    assert not labels, labels


def test_rows_of_two_scoring_versions_are_never_ranked_or_highlighted_together(two_versions, monkeypatch):
    at = open_on(two_versions, monkeypatch)
    tables = [at.dataframe[i].value for i in _main_tables(at)]
    versions = [{m.rsplit("[", 1)[-1] for m in t["method"] if "[scoring" in m} for t in tables]
    assert len(tables) >= 2 and all(len(v) <= 1 for v in versions), [list(t["method"]) for t in tables]
    assert any("scoring v2" in h.value for h in at.subheader)
