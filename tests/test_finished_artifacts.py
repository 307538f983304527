"""A row is finished only once everything it promises is on disk (scores, results.json, model card, encoder), and a
finished row is reused only while those files are there: a stop while results.json is moved into place leaves the
row interrupted (and --resume writes the file); a reused run whose encoder was deleted is refused in one line; a
missing results.json is written again; a rerun beside an interrupted row says so."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from bench.cli import main
from results_db import ResultsDB
from tests.conftest import write_sts

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.usefixtures("one_thread")


def _argv(tmp_path: Path, tiny_model_dir: Path) -> list[str]:
    write_sts(tmp_path / "data" / "sts" / "stsb-test.tsv", [("a b c", "a b d", 3.0), ("x y", "z w", 1.0), ("cat dog", "dog cat", 4.0)])
    (tmp_path / "corpus.txt").write_text("\n".join(f"sentence {i} about topic {i % 5} here" for i in range(40)) + "\n")
    return ["run", "--method", "simcse", "--backbone", str(tiny_model_dir), "--corpus", "corpus.txt", "--budget", "steps=4",
            "--batch-size", "4", "--max-len", "32", "--suite", "sts:stsb", "--eval-max-len", "32", "--data-dir", "data",
            "--db", "r.sqlite", "--out", "runs", "--no-progress", "--no-baseline", "--checkpoint-every", "2"]  # fmt: skip


# os.replace onto results.json announces itself, then takes 10 s: the window a SIGTERM falls into.
SLOW_REPLACE = """
import os, pathlib, sys, time
original = os.replace
def slow(src, dst, *a, **k):
    if str(dst).endswith("results.json"):
        pathlib.Path("replacing").touch()
        time.sleep(10)
    return original(src, dst, *a, **k)
os.replace = slow
from bench.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_stop_while_results_json_is_moved_in_leaves_the_row_interrupted_and_resume_writes_it(tmp_path, tiny_model_dir, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    argv = _argv(tmp_path, tiny_model_dir)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
               OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(SLOW_REPLACE), *argv], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while not (tmp_path / "replacing").exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (tmp_path / "replacing").exists(), proc.communicate(timeout=60)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, out + err
    assert "marked interrupted" in err and "--resume" in err and "Traceback" not in err
    (row,) = ResultsDB(tmp_path / "r.sqlite").runs().to_dict("records")
    assert row["status"] == "interrupted"  # what the message says: not finished without its file
    folder = tmp_path / row["output_dir"]
    assert not (folder / "results.json").exists()
    assert not [p for p in folder.iterdir() if p.name.endswith(".part")]  # no partial file either

    assert main(argv + ["--resume"]) == 0
    (row,) = ResultsDB(tmp_path / "r.sqlite").runs().to_dict("records")
    assert row["status"] == "finished"
    document = json.loads((folder / "results.json").read_text())
    assert document["run"]["id"] == row["id"] and document["run"]["status"] == "finished" and document["scores"]

    # the same command without --resume beside an interrupted row: it says so (and which row --resume would take)
    ResultsDB(tmp_path / "r.sqlite").update_run(int(row["id"]), status="interrupted")
    capsys.readouterr()
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert f"run {row['id']} with these settings ended interrupted before it finished; starting a new row beside it" in out
    assert f"--resume continues run {row['id']} instead" in out


def test_a_reused_run_is_checked_for_its_files(tmp_path, tiny_model_dir, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    argv = _argv(tmp_path, tiny_model_dir)
    assert main(argv) == 0
    (row,) = ResultsDB(tmp_path / "r.sqlite").runs().to_dict("records")
    folder, encoder = tmp_path / row["output_dir"], Path(row["model"])
    assert (encoder / "README.md").is_file() and (folder / "results.json").is_file()

    # results.json gone: written again from the database; --report-to on a reused run says it logs nothing
    (folder / "results.json").unlink()
    capsys.readouterr()
    assert main(argv + ["--report-to", "tensorboard"]) == 0
    out = capsys.readouterr().out
    assert "its results.json was missing; written again" in out
    assert "--report-to tensorboard: nothing is logged for a reused run" in out
    assert json.loads((folder / "results.json").read_text())["run"]["id"] == row["id"]

    # the encoder's weights damaged, then the folder deleted: refused in one line naming what is missing
    weights = encoder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"run {row['id']} finished with these settings, but its encoder weights {weights} are damaged" in err
    shutil.rmtree(encoder)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"its encoder folder {encoder} is missing" in err and "--rerun" in err
    assert len(ResultsDB(tmp_path / "r.sqlite").runs()) == 1  # nothing trained or recorded meanwhile


def test_a_run_records_its_absolute_folder_and_is_found_from_another_working_folder(tmp_path, tiny_model_dir, monkeypatch, capsys):
    launch, elsewhere = tmp_path / "launch", tmp_path / "elsewhere"
    launch.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(launch)
    argv = _argv(launch, tiny_model_dir)
    for option in ("--corpus", "--data-dir", "--db"):  # everything but --out named absolutely: only the run folder moves
        argv[argv.index(option) + 1] = str(launch / argv[argv.index(option) + 1])
    assert main(argv) == 0  # --out runs, relative to `launch`
    (row,) = ResultsDB(launch / "r.sqlite").runs().to_dict("records")
    folder = Path(row["output_dir"])
    assert folder.is_absolute() and folder.is_dir() and folder == folder.resolve()
    assert folder.parent.parent == (launch / "runs").resolve()
    assert Path(row["model"]).is_absolute() and (folder / "results.json").is_file()

    # the same command from another folder reuses the run: its encoder is found, and its missing results.json is
    # written again where the run is, not under the other folder's ./runs
    (folder / "results.json").unlink()
    monkeypatch.chdir(elsewhere)
    capsys.readouterr()
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert f"run {row['id']} already finished with these settings; reusing it" in out
    assert json.loads((folder / "results.json").read_text())["run"]["id"] == row["id"]
    assert not (elsewhere / "runs").exists()
    assert len(ResultsDB(launch / "r.sqlite").runs()) == 1

    # a row written before folders were absolute keeps its relative folder, read from the current folder as before
    relative = folder.relative_to(launch.resolve())
    ResultsDB(launch / "r.sqlite").update_run(int(row["id"]), output_dir=str(relative), model=str(relative / "encoder"))
    (folder / "results.json").unlink()
    monkeypatch.chdir(launch)
    assert main(argv) == 0
    assert json.loads((folder / "results.json").read_text())["run"]["id"] == row["id"]
    assert ResultsDB(launch / "r.sqlite").get_run(int(row["id"]))["output_dir"] == str(relative)  # not migrated
