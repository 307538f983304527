"""A `bench eval` row (and `lenbench.evaluate`'s) gets results.json as a `bench run` row does: beside the database in
`evals/<database>-<id>/<run id>-<model>/`, recorded as the row's folder, written before the row is finished, valid against the
schema, its scores the database's (two databases in one folder each keep their own files); a reused evaluation whose file is missing gets it written again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.cli import main
from bench.report.results_file import load_schema
from results_db import ResultsDB
from tests.conftest import write_sts

pytestmark = pytest.mark.usefixtures("one_thread")

ROWS = [(f"sentence {i} about a cat", f"a cat {i} sentence", float(i % 5)) for i in range(12)]


def _eval(tmp_path: Path, model: Path, *extra: str, db: str = "r.sqlite", limit: int = 10) -> int:
    write_sts(tmp_path / "data" / "sts" / "stsb-test.tsv", ROWS)
    (tmp_path / "db").mkdir(exist_ok=True)
    return main(["eval", "--model", str(model), "--suite", "sts:stsb", "--data-dir", str(tmp_path / "data"),
                 "--db", str(tmp_path / "db" / db), "--max-len", "32", "--limit", str(limit), "--no-progress",
                 *extra])  # fmt: skip


def test_two_databases_in_one_folder_keep_distinct_result_files(tmp_path, tiny_model_dir):
    """Run 1 of a.sqlite and run 1 of b.sqlite, beside each other: each results.json stays its own database's."""
    assert _eval(tmp_path, tiny_model_dir, db="a.sqlite", limit=10) == 0
    assert _eval(tmp_path, tiny_model_dir, db="b.sqlite", limit=12) == 0
    files = {}
    for name, n in (("a.sqlite", 10), ("b.sqlite", 12)):
        db = ResultsDB(tmp_path / "db" / name)
        files[name] = Path(db.get_run(1)["output_dir"]) / "results.json"
        document = json.loads(files[name].read_text())
        assert {s["n"] for s in document["scores"]} == {n}  # its own run 1, not the other database's
    assert files["a.sqlite"] != files["b.sqlite"]


def _results_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("results ")]


def test_an_eval_row_writes_a_valid_results_json_beside_the_database(tmp_path, tiny_model_dir, capsys):
    jsonschema = pytest.importorskip("jsonschema")
    assert _eval(tmp_path, tiny_model_dir) == 0
    printed = _results_lines(capsys.readouterr().out)
    db = ResultsDB(tmp_path / "db" / "r.sqlite")
    run = db.get_run(1)
    folder = Path(run["output_dir"])
    assert folder.parent.parent == (tmp_path / "db" / "evals").resolve() and folder.name.startswith("1-")
    assert folder.parent.name == f"r-{db.database_id()[:12]}"  # keyed by the database: no other database lands there
    path = folder / "results.json"
    assert printed == [f"results {path}"]  # its path, printed once
    document = json.loads(path.read_text())
    jsonschema.validate(document, load_schema())
    assert document["training"] is None and document["run"]["kind"] == "eval"
    assert document["run"]["status"] == run["status"] == "finished"
    assert document["run"]["id"] == 1
    stored = {(s["dataset"], s["metric"], s["variant"]): s["value"] for _, s in db.scores([1]).iterrows()}
    written = {(s["dataset"], s["metric"], s["variant"]): s["value"] for s in document["scores"]}
    assert stored and written == pytest.approx(stored)
    assert {s["n"] for s in document["scores"]} == {10} and document["scores"][0]["subset"] == {
        "limit": 10, "of": 12, "mode": "sample", "seed": 0, "label": "sample of 10 of 12"}


def test_a_reused_eval_row_gets_its_missing_results_json_written_again(tmp_path, tiny_model_dir, capsys):
    assert _eval(tmp_path, tiny_model_dir) == 0
    db = ResultsDB(tmp_path / "db" / "r.sqlite")
    path = Path(db.get_run(1)["output_dir"]) / "results.json"
    first = json.loads(path.read_text())
    path.unlink()
    capsys.readouterr()
    assert _eval(tmp_path, tiny_model_dir) == 0
    out = capsys.readouterr().out
    assert "reusing it" in out and "results.json was missing; written again" in out
    assert len(db.runs()) == 1  # reused, not scored again
    assert json.loads(path.read_text())["scores"] == first["scores"]
    # a row finished before evaluation rows had files: given its folder and file when it is reused
    db.update_run(1, output_dir="")
    assert _eval(tmp_path, tiny_model_dir) == 0
    assert Path(db.get_run(1)["output_dir"]) / "results.json" == path and path.is_file()


def test_lenbench_evaluate_writes_the_rows_results_json(tmp_path, tiny_model_dir):
    import lenbench

    write_sts(tmp_path / "data" / "sts" / "stsb-test.tsv", ROWS)
    lenbench.evaluate(str(tiny_model_dir), "sts:stsb", db=tmp_path / "api.sqlite", data_dir=str(tmp_path / "data"),
                      max_len=32, limit=10, quiet=True)  # fmt: skip
    run = ResultsDB(tmp_path / "api.sqlite").get_run(1)
    document = json.loads((Path(run["output_dir"]) / "results.json").read_text())
    assert document["run"]["status"] == "finished" and document["training"] is None and document["scores"]
