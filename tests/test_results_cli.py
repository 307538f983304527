import json

import pytest

from bench.cli import main
from results_db import ResultsDB, ScoreRecord


def fill(db_path):
    db = ResultsDB(db_path)
    run = db.create_run(model="m", method="simcse", config={}, seed=1)
    db.add_scores(run, [ScoreRecord("sts", "stsb", "spearman", 80.5, 10), ScoreRecord("sts", "stsb", "spearman", 70.25, 10, variant="elong-2")])
    db.finish_run(run)
    return run


def test_results_formats(tmp_path, capsys):
    db_path = tmp_path / "r.sqlite"
    run = fill(db_path)
    assert main(["results", "--db", str(db_path), "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {(r["run_id"], r["variant"], r["value"]) for r in rows} == {(run, "clean", 80.5), (run, "elong-2", 70.25)}
    assert main(["results", "--db", str(db_path), "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("run_id,kind,method,model,backbone,budget,corpus,seed,status,suite,dataset,variant")
    assert main(["results", "--db", str(db_path)]) == 0
    table = capsys.readouterr().out
    assert "change(elong-2)" in table and "-10.25" in table and " n " in table.splitlines()[2]  # n per dataset


def test_results_on_a_missing_db_says_how_to_start_and_creates_nothing(tmp_path, capsys):
    assert main(["results", "--db", str(tmp_path / "misspelled.sqlite")]) == 2
    err = capsys.readouterr().err
    assert "does not exist" in err and "bench eval" in err and "Traceback" not in err
    assert not (tmp_path / "misspelled.sqlite").exists()


def test_results_on_a_database_without_runs_says_how_to_start(tmp_path, capsys):
    ResultsDB(tmp_path / "fresh.sqlite").engine.dispose()
    assert main(["results", "--db", str(tmp_path / "fresh.sqlite")]) == 0
    assert "bench eval" in capsys.readouterr().err


def test_data_list_shows_present_and_missing(tmp_path, capsys):
    (tmp_path / "sts").mkdir()
    (tmp_path / "sts" / "sts12.tsv").write_text("sentence1\tsentence2\tscore\n")
    assert main(["data", "list", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert str(tmp_path / "sts" / "sts12.tsv") in out
    assert "scifact" in out and "missing" in out


def test_results_csv_and_json_carry_what_each_score_rests_on(tmp_path, capsys):
    """backbone, budget, corpus, seed, n, the subset and the score's 95% interval (bootstrap over its items)."""
    import io

    import numpy as np
    import pandas as pd

    from bench.report.stats import score_interval
    from results_db import ItemValues

    db = ResultsDB(tmp_path / "r.sqlite")
    run = db.create_run(kind="train", model="runs/x/encoder", method="simcse", backbone="minilm", budget_label="steps=60",
                        train_corpus="wiki-offline (10033 texts)", seed=2, config={})
    values = np.linspace(0.0, 100.0, 40).tolist()  # per-query nDCG@10 x100, as stored
    items = ItemValues("mean", [f"q{i}" for i in range(40)], values)
    db.add_scores(run, [ScoreRecord("beir", "scifact", "ndcg_at_10", float(np.mean(values)), 40, items=items,
                                    info={"limit": 40})])  # fmt: skip
    db.finish_run(run)
    assert main(["results", "--db", str(tmp_path / "r.sqlite"), "--format", "csv"]) == 0
    row = pd.read_csv(io.StringIO(capsys.readouterr().out)).iloc[0]
    assert (row["backbone"], row["budget"], row["corpus"], row["seed"], row["n"], row["subset"]) == (
        "minilm", "steps=60", "wiki-offline (10033 texts)", 2, 40, 40)
    low, high = score_interval({"aggregate": "mean", "item_ids": items.item_ids, "values": values, "gold": None})
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((low, high)) and low < row["value"] < high
    assert main(["results", "--db", str(tmp_path / "r.sqlite"), "--format", "json"]) == 0
    (record,) = json.loads(capsys.readouterr().out)
    assert record["ci_low"] == pytest.approx(low) and record["subset"] == 40 and record["info"] == {"limit": 40}
