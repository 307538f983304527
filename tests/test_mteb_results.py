"""MTEB results out (`bench export --format mteb`) and in (`bench import --format mteb`), checked with mteb's own
classes: exported files load through mteb.ResultCache and give back our scores; files mteb writes import as
reference rows under our dataset names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.cli import main
from results_db import ResultsDB, ScoreRecord

mteb = pytest.importorskip("mteb")

FORUMS = ("android", "english", "gaming", "gis", "mathematica", "physics", "programmers", "stats", "tex", "unix",
          "webmasters", "wordpress")  # fmt: skip


def _forum_ndcg(i: int) -> float:
    return 30.0 + i


def _forum_queries(forum: str) -> int:
    """MTEB's number of test queries of a CQADupStack forum (an export checks the scores rest on as many)."""
    task = mteb.get_task(f"CQADupstack{forum.capitalize()}Retrieval")
    return int(task.metadata.descriptive_stats["test"]["num_queries"])


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A database with an evaluated hub model and a trained run, exported to DIR/results."""
    root = tmp_path_factory.mktemp("mteb")
    db = ResultsDB(root / "r.sqlite")
    ev = db.create_run(kind="eval", model="minilm", method="vanilla", backbone="minilm", config_hash="e" * 64,
                       config={"model_fingerprint": "0123456789abcdef"}, status="running",
                       model_info={"parameters": 22713728, "embedding_dim": 384, "max_tokens": 256})
    db.add_scores(ev, [ScoreRecord("sts", "sts12", "spearman", 72.37, n=3108),
                       ScoreRecord("sts", "sts12", "spearman", 41.5, n=3108, variant="elong-2")])
    db.add_scores(ev, [ScoreRecord("sts", "sickr", "spearman", 77.58, n=9927)])
    db.add_scores(ev, [ScoreRecord("sts", "sickr-test", "spearman", 70.0, n=4906)])  # SentEval split: not MTEB's
    db.add_scores(ev, [ScoreRecord("beir", "scifact", m, v, n=300)
                       for m, v in (("ndcg_at_10", 64.51), ("recall_at_100", 92.5), ("mrr_at_10", 60.12))])
    db.add_scores(ev, [ScoreRecord("beir", f"cqadupstack-{f}", "ndcg_at_10", _forum_ndcg(i), n=_forum_queries(f))
                       for i, f in enumerate(FORUMS)])  # fmt: skip
    db.add_scores(ev, [ScoreRecord("knn", "agnews", "accuracy", 88.0, n=100)])  # no MTEB task
    db.add_scores(ev, [ScoreRecord("sts", "sts13", "spearman", 55.0, n=10, info={"limit": 10})])  # a subset
    db.finish_run(ev)
    tr = db.create_run(kind="train", model=str(root / "runs/x/simcse/encoder"), method="simcse", backbone="minilm",
                       config_hash="f" * 64, status="running", train_corpus="wiki-offline (10033 texts)",
                       command="bench run --method simcse", model_info={"parameters": 100, "embedding_dim": 32, "max_tokens": 64})
    db.add_scores(tr, [ScoreRecord("sts", "stsb", "spearman", 80.25, n=1379)])
    db.finish_run(tr)
    sub = db.create_run(kind="eval", model="org/limited", method="vanilla", config={"limit": 100}, status="running")
    db.add_scores(sub, [ScoreRecord("sts", "stsb", "spearman", 90.0, n=100)])
    db.finish_run(sub)
    out = root / "cache" / "results"
    assert main(["export", "--format", "mteb", str(out), "--db", str(root / "r.sqlite")]) == 0
    return root, out, db, ev, tr


def test_exported_files_load_with_mteb_and_give_back_the_scores(exported):
    root, out, _, _, _ = exported
    results = mteb.ResultCache(cache_path=root / "cache").load_results(
        include_remote=False, require_model_meta=True, validate_and_filter=True)
    by_model = {(m.model_name, m.model_revision): {t.task_name: t for t in m.task_results} for m in results.model_results}
    minilm = by_model[("sentence-transformers/all-MiniLM-L6-v2", "0123456789ab")]
    expected_tasks = {"STS12", "SICK-R", "SciFact", *(f"CQADupstack{f.capitalize()}Retrieval" for f in FORUMS)}
    assert set(minilm) == expected_tasks  # no elong variant, no SentEval SICK-R split, no kNN, no subset (STS13)
    assert not any(name == "org/limited" for name, _ in by_model)  # a --limit run is not an MTEB result
    assert minilm["STS12"].get_score() * 100 == pytest.approx(72.37)
    assert minilm["SICK-R"].get_score() * 100 == pytest.approx(77.58)
    scifact = minilm["SciFact"]
    assert scifact.get_score() * 100 == pytest.approx(64.51)
    assert scifact.get_score(getter=lambda s: s["recall_at_100"]) * 100 == pytest.approx(92.5)
    assert scifact.dataset_revision == mteb.get_task("SciFact").metadata.revision and scifact.mteb_version
    assert minilm["CQADupstackGisRetrieval"].get_score() * 100 == pytest.approx(_forum_ndcg(FORUMS.index("gis")))
    trained = by_model[("lenbench/simcse-minilm", "f" * 12)]
    assert set(trained) == {"STSBenchmark"} and trained["STSBenchmark"].get_score() * 100 == pytest.approx(80.25)

    raw = json.loads((out / "sentence-transformers__all-MiniLM-L6-v2" / "0123456789ab" / "STS12.json").read_text())
    assert {"dataset_revision", "task_name", "mteb_version", "scores", "evaluation_time", "date"} <= set(raw)
    entry = raw["scores"]["test"][0]
    assert entry["hf_subset"] == "default" and entry["languages"] == ["eng-Latn"] and entry["main_score"] == 0.7237
    meta = json.loads((out / "lenbench__simcse-minilm" / ("f" * 12) / "model_meta.json").read_text())
    assert meta["name"] == "lenbench/simcse-minilm" and meta["n_parameters"] == 100 and meta["embed_dim"] == 32
    assert meta["max_tokens"] == 64 and meta["adapted_from"] == "minilm"


def test_export_round_trips_through_import_as_reference_rows(exported, tmp_path, capsys):
    _, out, _, _, _ = exported
    db_path = tmp_path / "ref.sqlite"
    assert main(["import", "--format", "mteb", str(out), "--db", str(db_path)]) == 0
    db = ResultsDB(db_path)
    runs = db.runs().set_index("model")
    assert set(runs["kind"]) == {"reference"} and set(runs["status"]) == {"finished"}
    ref = db.get_run(int(runs.loc["sentence-transformers/all-MiniLM-L6-v2", "id"]))
    assert ref["method"] == "sentence-transformers/all-MiniLM-L6-v2" and ref["budget_asked"] == {}
    assert ref["model_info"] == {"parameters": 22713728, "embedding_dim": 384, "max_tokens": 256}
    scores = db.scores([ref["id"]]).set_index(["suite", "dataset", "metric"])["value"]
    assert scores[("sts", "sts12", "spearman")] == pytest.approx(72.37)
    assert scores[("beir", "scifact", "mrr_at_10")] == pytest.approx(60.12)
    assert scores[("beir", "cqadupstack", "ndcg_at_10")] == pytest.approx(sum(map(_forum_ndcg, range(12))) / 12)
    assert ("sts", "sickr-test", "spearman") not in scores.index
    from bench.report.mteb_results import reference_runs

    found = reference_runs(db.runs(), "Sentence-Transformers__all-MiniLM-L6-v2")
    assert found["id"].tolist() == [ref["id"]] and reference_runs(db.runs(), "nobody/none").empty
    capsys.readouterr()
    assert main(["import", "--format", "mteb", str(out), "--db", str(db_path)]) == 0  # idempotent
    assert "already imported as reference run" in capsys.readouterr().out and len(db.runs()) == len(runs)


def test_a_file_written_by_mteb_imports_under_our_dataset_names(tmp_path, capsys):
    from mteb.results import TaskResult

    folder = tmp_path / "results" / "someorg__some-model" / "rev1"
    folder.mkdir(parents=True)
    sts13 = TaskResult.from_task_results(
        mteb.get_task("STS13"), {"test": {"default": {"cosine_spearman": 0.806, "cosine_pearson": 0.81, "main_score": 0.806}}},
        evaluation_time=3.5)
    sts13.to_disk(folder / "STS13.json")
    banking = TaskResult.from_task_results(
        mteb.get_task("Banking77Classification"), {"test": {"default": {"accuracy": 0.8, "f1": 0.79, "main_score": 0.8}}},
        evaluation_time=1.0)
    banking.to_disk(folder / "Banking77Classification.json")
    (folder / "Broken.json").write_text("{not json")
    db_path = tmp_path / "r.sqlite"
    assert main(["import", "--format", "mteb", str(tmp_path / "results"), "--db", str(db_path)]) == 0
    out = capsys.readouterr().out
    assert "skipped " in out and "Broken.json" in out and "someorg/some-model @ rev1: 2 dataset(s)" in out
    db = ResultsDB(db_path)
    run = db.runs().iloc[0]
    assert run["kind"] == "reference" and run["model"] == "someorg/some-model" and run["model_info"] == {}
    scores = db.scores([int(run["id"])]).set_index(["suite", "dataset", "metric"])
    assert scores.loc[("sts", "sts13", "spearman"), "value"] == pytest.approx(80.6)
    assert scores.loc[("mteb", "Banking77Classification", "accuracy"), "value"] == pytest.approx(80.0)
    assert scores.loc[("sts", "sts13", "spearman"), "info"]["split"] == "test"


def test_bad_export_and_import_input_is_one_clear_line(exported, tmp_path, capsys):
    root, _, _, _, _ = exported
    db = str(root / "r.sqlite")
    assert main(["export", str(tmp_path / "o"), "--run", "999", "--db", db]) == 2
    assert "bench: error: --run 999: no such run" in capsys.readouterr().err
    assert main(["export", str(tmp_path / "o"), "--db", str(tmp_path / "nodb.sqlite")]) == 2  # a read never creates
    assert "bench: error:" in capsys.readouterr().err and not (tmp_path / "nodb.sqlite").exists()
    assert main(["import", str(tmp_path / "missing"), "--db", str(tmp_path / "x.sqlite")]) == 2
    err = capsys.readouterr().err
    assert "bench: error: bench import:" in err and "is not a folder" in err and not (tmp_path / "x.sqlite").exists()
    (tmp_path / "empty").mkdir()
    assert main(["import", str(tmp_path / "empty"), "--db", str(tmp_path / "x.sqlite")]) == 2
    assert "no readable MTEB result files" in capsys.readouterr().err and not (tmp_path / "x.sqlite").exists()


def test_scores_on_data_that_is_not_the_tasks_are_not_exported_as_mteb_results(tmp_path, capsys, tiny_model_dir):
    """A 200-pair local stsb-test.tsv and a 244-document SciFact would be written with the task's official dataset
    revision: refused with the reason. The untrained backbone gets its weights' fingerprint as revision."""
    from bench.encode.loading import folder_fingerprint as _folder_fingerprint

    corpus = tmp_path / "data" / "beir" / "scifact" / "corpus.jsonl"
    corpus.parent.mkdir(parents=True)
    corpus.write_text("".join(json.dumps({"_id": str(i), "title": "", "text": f"doc {i}"}) + "\n" for i in range(244)))
    db = ResultsDB(tmp_path / "r.sqlite")
    local = db.create_run(kind="eval", model=str(tiny_model_dir), method="vanilla", backbone=str(tiny_model_dir),
                          config_hash="a" * 64, config={}, status="running")  # fmt: skip
    db.add_scores(local, [ScoreRecord("sts", "stsb", "spearman", 50.0, n=200)])
    db.add_scores(local, [ScoreRecord("beir", "scifact", "ndcg_at_10", 40.0, n=300)])
    db.add_scores(local, [ScoreRecord("sts", "sts12", "spearman", 60.0, n=3108)])  # the task's size: exported
    db.finish_run(local, data_fingerprint={str(corpus): "x"})
    out = tmp_path / "results"
    assert main(["export", "--format", "mteb", str(out), "--db", str(tmp_path / "r.sqlite")]) == 0
    printed = capsys.readouterr().out
    assert f"run {local} stsb: 200 pairs, MTEB's STSBenchmark test has 1379" in printed
    assert f"run {local} scifact: a corpus of 244 documents, MTEB's SciFact test has 5183" in printed
    revision = _folder_fingerprint(str(tiny_model_dir))[:12]
    folder = out / f"lenbench__{tiny_model_dir.name}" / revision
    assert sorted(p.name for p in folder.iterdir()) == ["STS12.json", "model_meta.json"]
    assert json.loads((folder / "model_meta.json").read_text())["release_date"] is None


def test_export_counts_the_files_it_writes_and_times_exclude_training(tmp_path, capsys):
    """Two runs of the same model revision write one file per task (counted once, the later scores kept); a trained
    run's evaluation_time is its scoring time (recorded per dataset), not the training before it."""
    import datetime as dt

    from bench.evaluate.runner import record_seconds

    db = ResultsDB(tmp_path / "r.sqlite")
    for value in (72.0, 73.0):  # the same model twice: same name, same revision
        run = db.create_run(kind="eval", model="minilm", method="vanilla", config={"model_fingerprint": "0123456789abcdef"},
                            status="running")
        db.add_scores(run, [ScoreRecord("sts", "sts12", "spearman", value, n=3108)])
        db.finish_run(run)
    long_ago = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None) - dt.timedelta(hours=2)
    tr = db.create_run(kind="train", model=str(tmp_path / "enc"), method="simcse", backbone="minilm", status="running",
                       started_at=long_ago, budget_consumed={"seconds": 7000.0})
    db.add_scores(tr, [ScoreRecord("sts", "stsb", "spearman", 80.0, n=1379)])
    record_seconds(db, tr, "sts/stsb", 12.5)
    db.finish_run(tr)
    old = db.create_run(kind="train", model=str(tmp_path / "enc2"), method="crop", backbone="minilm", status="running",
                        started_at=long_ago, budget_consumed={"seconds": 7200.0})  # stored before per-dataset times
    db.add_scores(old, [ScoreRecord("sts", "stsb", "spearman", 81.0, n=1379)])
    db.finish_run(old)
    out = tmp_path / "results"
    assert main(["export", "--format", "mteb", str(out), "--db", str(tmp_path / "r.sqlite")]) == 0
    printed = capsys.readouterr().out
    files = sorted(p for p in out.rglob("*.json") if p.name != "model_meta.json")
    assert f"wrote {len(files)} MTEB task result(s)" in printed and len(files) == 3
    sts12 = next(json.loads(p.read_text()) for p in files if p.name == "STS12.json")
    assert sts12["scores"]["test"][0]["main_score"] == pytest.approx(0.73)  # the later run's
    assert "written again by a later run" in printed
    times = {p.parent.parent.name: json.loads(p.read_text())["evaluation_time"] for p in files if p.name == "STSBenchmark.json"}
    assert len(times) == 2 and any(t == pytest.approx(12.5) for t in times.values())
    assert all(t < 600 for t in times.values()), times  # not the 2 hours of training


def _mteb_file(folder: Path, task: str, scores: dict) -> Path:
    from mteb.results import TaskResult

    folder.mkdir(parents=True, exist_ok=True)
    result = TaskResult.from_task_results(mteb.get_task(task), {"test": {"default": scores}}, evaluation_time=1.0)
    path = folder / f"{task}.json"
    result.to_disk(path)
    return path


def _sts13(value: float) -> dict:
    return {"cosine_spearman": value, "cosine_pearson": 0.5, "main_score": value}


def test_a_percentage_or_nan_score_is_refused_naming_its_file_and_the_other_models_import(tmp_path, capsys):
    """Three models; the second's STS13 main score is 80.6 (a percentage) and the third's NaN: both files are refused
    naming the file before anything is written, the first model imports, and nothing is stored x100."""
    root = tmp_path / "results"
    _mteb_file(root / "org__a" / "r1", "STS13", _sts13(0.806))
    bad = _mteb_file(root / "org__b" / "r1", "STS13", _sts13(0.5))
    data = json.loads(bad.read_text())
    data["scores"]["test"][0]["main_score"] = 80.6
    data["scores"]["test"][0]["cosine_spearman"] = 80.6
    bad.write_text(json.dumps(data))
    nan = _mteb_file(root / "org__c" / "r1", "STS13", _sts13(0.5))
    nan.write_text(nan.read_text().replace('"main_score": 0.5', '"main_score": NaN').replace('"cosine_spearman": 0.5', '"cosine_spearman": NaN'))
    db_path = tmp_path / "r.sqlite"
    assert main(["import", "--format", "mteb", str(root), "--db", str(db_path)]) == 0
    out = capsys.readouterr().out
    assert f"skipped {bad}: ScoreRangeError: " in out and "80.6 is outside [-1, 1]" in out
    assert f"skipped {nan}: ScoreRangeError: " in out and "nan" in out
    assert "org/a @ r1: 1 dataset(s), imported as reference run 1" in out
    db = ResultsDB(db_path)
    assert db.runs()["model"].tolist() == ["org/a"] and db.scores()["value"].max() < 100.0


def test_importing_again_finishes_a_killed_import_and_a_failed_model_does_not_stop_the_others(tmp_path, capsys, monkeypatch):
    root = tmp_path / "results"
    for name in ("a", "b", "c"):
        _mteb_file(root / f"org__{name}" / "r1", "STS13", _sts13(0.7))
    db_path = tmp_path / "r.sqlite"
    original = ResultsDB.add_scores

    def killed_at_b(self, run_id, records):
        if self.get_run(run_id)["model"] == "org/b":
            raise OSError("disk I/O error")
        return original(self, run_id, records)

    monkeypatch.setattr(ResultsDB, "add_scores", killed_at_b)
    assert main(["import", "--format", "mteb", str(root), "--db", str(db_path)]) == 2
    captured = capsys.readouterr()
    assert "org/b @ r1: 1 dataset(s), NOT imported, reference run 2 marked failed: disk I/O error" in captured.out
    assert "org/c @ r1: 1 dataset(s), imported as reference run 3" in captured.out  # read and imported after b
    assert "1 of 3 model(s) not imported (org/b @ r1)" in captured.err
    monkeypatch.setattr(ResultsDB, "add_scores", original)
    db = ResultsDB(db_path)
    db.update_run(2, status="running", pid=2**22 + 12345)  # as a killed import leaves it: running, its process gone
    assert main(["import", "--format", "mteb", str(root), "--db", str(db_path)]) == 0
    out = capsys.readouterr().out
    assert "org/b @ r1: 1 dataset(s), finished an unfinished import as reference run 2" in out
    assert "org/a @ r1: 1 dataset(s), already imported as reference run 1" in out
    runs = db.runs()
    assert runs["status"].tolist() == ["finished"] * 3 and len(db.scores([2])) == 1
