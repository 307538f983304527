"""What results.json says, readable away from the launch folder (issue 37): the scored model and the command's
--db are absolute, the elongation variants are recorded only where a suite attacked with elong, and the x100
scale is stated."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from bench.cli import main
from bench.report.portable import absolute_model, command_with_absolute_db, config_as_scored
from bench.report.results_file import load_schema, run_results
from results_db import ResultsDB
from tests.conftest import write_sts

ROWS = [(f"sentence {i} about a cat", f"a cat {i} sentence", float(i % 5)) for i in range(8)]


def test_an_eval_rows_results_name_its_model_and_database_by_absolute_paths(tiny_model_dir, tmp_path, monkeypatch):
    jsonschema = pytest.importorskip("jsonschema")
    launch = tmp_path / "launch"
    shutil.copytree(tiny_model_dir, launch / "model")
    write_sts(launch / "data" / "sts" / "stsb-test.tsv", ROWS)
    monkeypatch.chdir(launch)
    for suite in ("sts:stsb", "sts:stsb@elong"):
        argv = ["eval", "--model", "model", "--suite", suite, "--data-dir", "data", "--db", "r.sqlite", "--max-len",
                "32", "--no-progress"]  # fmt: skip
        monkeypatch.setattr(sys, "argv", ["bench", *argv])  # the command a row records is the process's own
        assert main(argv) == 0
    db = ResultsDB(launch / "r.sqlite")
    clean, attacked = (json.loads(json.dumps(run_results(db, run_id), default=str)) for run_id in (1, 2))
    monkeypatch.chdir(tmp_path)  # the database names itself absolutely from any folder
    assert f"--db {(launch / 'r.sqlite').resolve()}" in run_results(db, 1)["provenance"]["command"]
    for document in (clean, attacked):
        jsonschema.validate(document, load_schema())
        assert document["scale"] == 100
        assert document["run"]["model"] == str((launch / "model").resolve())
        assert f"--db {(launch / 'r.sqlite').resolve()}" in document["provenance"]["command"]
    assert "elong" not in clean["config"] and clean["config"]["suite"] == ["sts:stsb"]
    assert attacked["config"]["elong"] == ["2", "rand"]
    assert db.get_run(1)["config"]["elong"] == ["2", "rand"]  # the stored config (and its hash) are unchanged


def test_a_trained_runs_encoder_folder_and_both_parts_of_its_command_become_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert absolute_model("runs/2026-abc/simcse/encoder", "train") == str(tmp_path / "runs/2026-abc/simcse/encoder")
    assert absolute_model("minilm", "eval") == "minilm" and absolute_model("org/model", "eval") == "org/model"
    command = ("bench run --method simcse --suite sts:stsb --no-baseline   # from: bench run --method simcse "
               "--db=conc.sqlite --out 'my runs'")  # fmt: skip
    db = tmp_path / "conc.sqlite"
    assert command_with_absolute_db(command, db) == (
        "bench run --method simcse --suite sts:stsb --no-baseline   # from: bench run --method simcse "
        f"--db={db} --out 'my runs'")  # fmt: skip
    assert command_with_absolute_db("bench eval --db x.sqlite", None) == "bench eval --db x.sqlite"  # a server URL


def test_the_elongation_variants_of_a_trained_run_are_kept_only_for_elong_suites():
    config = {"suite": ["sts:stsb", "beir:scifact@pad"], "eval": {"elong": ["2", "rand"], "max_len": 256}}
    assert config_as_scored(config) == {"suite": ["sts:stsb", "beir:scifact@pad"], "eval": {"max_len": 256}}
    for suites in (["sts:stsb@elong"], ["diag"], ["sts:stsb+beir:scifact@pad,elong"]):
        assert config_as_scored({**config, "suite": suites})["eval"]["elong"] == ["2", "rand"]


def test_mteb_export_puts_scores_of_different_scoring_settings_in_different_revisions(tmp_path, capsys):
    """The same weights scored on STS-B at max_len 16 and at 256 went to one revision folder, the later file
    replacing the earlier: each now has its own revision, named by how it was scored."""
    from bench.report.mteb_results import scoring_settings
    from results_db.records import ScoreRecord

    db = ResultsDB(tmp_path / "r.sqlite")
    for max_len, value in ((256, 82.0), (16, 61.0)):
        config = {"model_fingerprint": "0123456789abcdef", "pooling": "mean", "max_len": max_len}
        run = db.create_run(kind="eval", model="minilm", method="vanilla", config=config, status="running")
        db.add_scores(run, [ScoreRecord("sts", "stsb", "spearman", value, n=1379)])
        db.finish_run(run)
    out = tmp_path / "results"
    assert main(["export", "--format", "mteb", str(out), "--db", str(tmp_path / "r.sqlite")]) == 0
    assert "written again" not in capsys.readouterr().out
    model = out / "sentence-transformers__all-MiniLM-L6-v2"
    scores = {p.parent.name: json.loads(p.read_text())["scores"]["test"][0]["main_score"]
              for p in model.glob("*/STSBenchmark.json")}  # fmt: skip
    assert scores == {"0123456789ab-mean-len256": pytest.approx(0.82), "0123456789ab-mean-len16": pytest.approx(0.61)}
    # bench run's untrained row keeps its scoring settings under "eval"; a non-default dtype is part of the revision
    assert scoring_settings({"eval": {"pooling": "cls", "max_len": 128, "precision": "bf16"}, "emb_dtype": "fp16"}) == [
        "cls", "len128", "fp16", "bf16"]
