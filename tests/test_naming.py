"""One naming of datasets, variants and methods (docs/reference/naming.md): the API's `to_pandas()` and
`differences()`, `bench results --format csv` and each run's results.json name a score's dataset (the catalog name;
a `--limit` subset in its own `subset` column), variant and method alike, so their frames join."""

from __future__ import annotations

import io

import pandas as pd
import pytest

import lenbench
from bench.cli import main
from bench.report.results_file import run_results
from results_db import ResultsDB
from tests.test_report import _sts_run

KEYS = ["suite", "dataset", "variant", "method", "subset"]


@pytest.fixture
def stored(tmp_path):
    """One comparison scored on a 20-pair subset of STS-B, clean and elong-2: vanilla (run 1), simcse (run 2)."""
    db = ResultsDB(tmp_path / "r.sqlite")
    _sts_run(db, "vanilla", 0.5, limit=20)
    _sts_run(db, "simcse", 3.0, limit=20)
    db.engine.dispose()
    return tmp_path / "r.sqlite"


def test_to_pandas_and_differences_join_on_dataset_variant_and_method(stored):
    results = lenbench.load(stored).comparison()
    scores, diffs = results.to_pandas(), results.differences()
    assert set(diffs["dataset"]) == {"stsb"} and set(diffs["subset"]) == {20}  # the name, and the subset apart
    joined = diffs.merge(scores, on=KEYS, how="left", suffixes=("", "_score"), indicator=True)
    assert len(joined) == len(diffs) == 2 and (joined["_merge"] == "both").all(), joined[KEYS + ["_merge"]]
    treated = scores[scores["method"] != "vanilla"]
    assert len(treated.merge(diffs, on=KEYS)) == len(treated)  # every score of the method has its difference
    for _, row in joined.iterrows():  # and it is that score's: the difference to the reference's score of the cell
        ref = scores[(scores["method"] == "vanilla") & (scores["variant"] == row["variant"])]["value"].item()
        assert row["diff"] == pytest.approx(row["value"] - ref)


def test_the_csv_and_results_json_name_scores_as_the_api_does(stored, capsys):
    db = ResultsDB(stored, read_only=True)
    frame = lenbench.load(stored).comparison().to_pandas()
    evaluated = ResultsDB(stored).create_run(kind="eval", model="minilm", method="vanilla", config={}, status="finished")
    assert main(["results", "--db", str(stored), "--format", "csv"]) == 0
    csv = pd.read_csv(io.StringIO(capsys.readouterr().out))
    names = ["run_id", "dataset", "variant", "method"]
    assert sorted(map(tuple, csv[names].values.tolist())) == sorted(map(tuple, frame[names].values.tolist()))
    for run_id in (1, 2):
        document = run_results(db, run_id)
        label = csv[csv["run_id"] == run_id]["method"].unique().tolist()
        assert [document["run"]["label"]] == label
        assert sorted((s["dataset"], s["variant"]) for s in document["scores"]) == sorted(
            map(tuple, csv[csv["run_id"] == run_id][["dataset", "variant"]].values.tolist()))  # fmt: skip
    assert run_results(db, evaluated)["run"]["label"] == "minilm"  # an evaluated model by its name, as every table
