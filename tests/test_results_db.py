import pytest

from results_db import ItemValues, ResultsDB, ScoreRecord


def test_scores_round_trip_and_replace(tmp_path):
    db = ResultsDB(tmp_path / "r.sqlite")
    run = db.create_run(model="m", method="vanilla", config={"a": 1}, config_hash="h", seed=3)
    db.add_scores(run, [ScoreRecord("sts", "stsb", "spearman", 80.0, 10, items=ItemValues("spearman", ["0"], [0.5], [1.0]))])
    db.add_scores(run, [ScoreRecord("sts", "stsb", "spearman", 81.0, 10)])  # same key: replaced, not duplicated
    scores = db.scores([run])
    assert len(scores) == 1 and scores.iloc[0]["value"] == 81.0
    assert db.scored_datasets(run) == {("sts", "stsb", "clean")}
    db.finish_run(run, budget_consumed={"steps": 5})
    row = db.get_run(run)
    assert row["status"] == "finished" and row["budget_consumed"] == {"steps": 5} and row["config"] == {"a": 1}


def test_failed_write_leaves_earlier_scores(tmp_path):
    db = ResultsDB(tmp_path / "r.sqlite")
    run = db.create_run(model="m")
    db.add_scores(run, [ScoreRecord("sts", "a", "spearman", 1.0)])
    with pytest.raises(Exception):
        # A record whose value is not a number fails inside the transaction...
        db.add_scores(run, [ScoreRecord("sts", "b", "spearman", 2.0), ScoreRecord("sts", "c", "spearman", "x")])
    # ...and nothing of that dataset's transaction is kept, while the earlier one is.
    assert db.scores([run])["dataset"].tolist() == ["a"]


def test_read_only_cannot_write(tmp_path):
    path = tmp_path / "r.sqlite"
    ResultsDB(path).create_run(model="m")
    ro = ResultsDB(path, read_only=True)
    assert len(ro.runs()) == 1
    with pytest.raises(Exception):
        ro.create_run(model="n")


def test_train_log(tmp_path):
    db = ResultsDB(tmp_path / "r.sqlite")
    run = db.create_run(model="m")
    db.log_train(run, [{"step": 1, "loss": 2.0, "lr": 1e-5}, {"step": 2, "loss": 1.5, "lr": 1e-5, "tokens": 9}])
    db.log_train(run, [{"step": 2, "loss": 1.4, "lr": 1e-5}])
    log = db.train_log(run)
    assert log["step"].tolist() == [1, 2] and log["loss"].tolist() == [2.0, 1.4]


def test_read_only_results_db_refuses_every_write(tmp_path):
    from sqlalchemy import text
    from sqlalchemy.exc import OperationalError

    path = tmp_path / "r.sqlite"
    ResultsDB(path).create_run(kind="eval", model="m", suite="sts", config={}, config_hash="h", seed=0)
    ro = ResultsDB(path, read_only=True)
    assert len(ro.runs()) == 1
    with ro.engine.connect() as conn:
        for sql in ("DELETE FROM runs", "CREATE TEMP TABLE t (x INTEGER)"):
            with pytest.raises(OperationalError):
                conn.execute(text(sql))
    assert len(ResultsDB(path).runs()) == 1


def test_merge_runtime_keeps_other_keys_and_merges_a_section(tmp_path):
    """Run.runtime is edited in one place (ResultsDB.merge_runtime): new keys join the old ones, a section (the
    per-dataset evaluation seconds) gains keys without losing the ones before, and a missing row is left alone."""
    db = ResultsDB(tmp_path / "r.sqlite")
    run = db.create_run(kind="eval", model="m", method="vanilla", runtime={"device": "cpu", "world_size": 1})
    db.merge_runtime(run, {"world_size": 2, "method_source": "methods/simcse.py"})
    db.merge_runtime(run, {"sts/stsb": 1.5}, section="evaluation_seconds")
    db.merge_runtime(run, {"beir/scifact": 9.25}, section="evaluation_seconds")
    assert db.get_run(run)["runtime"] == {"device": "cpu", "world_size": 2, "method_source": "methods/simcse.py",
                                          "evaluation_seconds": {"sts/stsb": 1.5, "beir/scifact": 9.25}}  # fmt: skip
    db.merge_runtime(run + 1, {"device": "cuda"})  # no such row: nothing written, nothing raised
    assert len(db.runs()) == 1
