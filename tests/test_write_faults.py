"""Write faults during training: a checkpoint or an encoder that cannot be written (here: a file-size limit,
RLIMIT_FSIZE, set in a child process) is one line, leaves no partial folder, and what was there before (the previous
checkpoint, an encoder saved earlier) stays usable."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bench.cli import main
from tests.conftest import write_sts

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.usefixtures("one_thread")


def _child(code: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
               OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")  # fmt: skip
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


LIMIT = """
import resource
def limit(nbytes):
    resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
"""


def test_a_checkpoint_write_past_the_file_size_limit_is_one_line_and_keeps_the_previous_one(tmp_path):
    proc = _child(LIMIT + """
import torch
from bench.runtime.errors import TrainingError
from bench.train.checkpoint import CheckpointWriter, latest_checkpoint, load_checkpoint
writer = CheckpointWriter("run", keep=1)
writer.save(1, {"w": torch.ones(10)}, {"step": 1})
writer.wait()
limit(200_000)
writer.save(2, {"w": torch.ones(1_000_000)}, {"step": 2})  # 4 MB of weights
try:
    writer.wait()
except TrainingError as exc:
    print("ERROR", exc)
model, state = load_checkpoint(latest_checkpoint("run"))
print("LATEST", latest_checkpoint("run").name, state["step"], float(model["w"].sum()))
""", tmp_path)
    assert proc.returncode == 0, proc.stderr
    (error,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("ERROR")]
    assert "checkpoint step-00000002 could not be written to run/checkpoints (" in error
    assert "the previous checkpoint run/checkpoints/step-00000001 is intact" in error and "Traceback" not in proc.stderr
    assert "LATEST step-00000001 1 10.0" in proc.stdout
    assert sorted(p.name for p in (tmp_path / "run" / "checkpoints").iterdir()) == ["LATEST", "step-00000001"]


def test_an_encoder_save_past_the_limit_leaves_no_partial_folder_and_keeps_the_earlier_one(tmp_path, tiny_model_dir):
    proc = _child(LIMIT + f"""
import hashlib, pathlib
from transformers import AutoModel, AutoTokenizer
from bench.encode.loading import save_encoder
from bench.runtime.errors import TrainingError
model, tok = AutoModel.from_pretrained({str(tiny_model_dir)!r}), AutoTokenizer.from_pretrained({str(tiny_model_dir)!r})
save_encoder(model, tok, "kept")
before = {{p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in pathlib.Path("kept").rglob("*") if p.is_file()}}
limit(1_000_000)
for target in ("new", "kept"):
    try:
        save_encoder(model, tok, target)
    except TrainingError as exc:
        print("ERROR", exc)
after = {{p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in pathlib.Path("kept").rglob("*") if p.is_file()}}
print("SAME", before == after)
""", tmp_path)
    assert proc.returncode == 0, proc.stderr
    errors = [ln for ln in proc.stdout.splitlines() if ln.startswith("ERROR")]
    assert len(errors) == 2 and all("the encoder could not be written to " in e and "nothing partial was left" in e for e in errors)
    assert "SAME True" in proc.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept"]  # no "new", no hidden temporary folder


def test_bench_run_under_a_file_size_limit_fails_its_row_with_one_line(tmp_path, tiny_model_dir):
    """A whole `bench run` whose first checkpoint does not fit: one line, the row failed, no .tmp folder left."""
    write_sts(tmp_path / "data" / "sts" / "stsb-test.tsv", [("a b c", "a b d", 3.0), ("x y", "z w", 1.0), ("cat dog", "dog cat", 4.0)])
    (tmp_path / "corpus.txt").write_text("\n".join(f"sentence {i} about topic {i % 5} here" for i in range(40)) + "\n")
    argv = ["run", "--method", "simcse", "--backbone", str(tiny_model_dir), "--corpus", "corpus.txt", "--budget", "steps=4",
            "--batch-size", "4", "--max-len", "32", "--suite", "sts:stsb", "--eval-max-len", "32", "--data-dir", "data",
            "--db", "r.sqlite", "--out", "runs", "--no-progress", "--no-baseline", "--checkpoint-every", "2"]  # fmt: skip
    proc = _child(LIMIT + f"""
import sys
from bench.cli import main
limit(2_000_000)  # the tiny model's weights are ~4 MB; the database and corpus files are far smaller
sys.exit(main({argv!r}))
""", tmp_path)
    err = proc.stderr
    assert proc.returncode == 2, proc.stdout + err
    assert "Traceback" not in err and "could not be written to " in err and "nothing partial was left" in err
    from results_db import ResultsDB

    (row,) = ResultsDB(tmp_path / "r.sqlite").runs().to_dict("records")
    assert row["status"] == "failed" and "could not be written" in row["error"]
    assert not [p for p in (tmp_path / "runs").rglob("*") if p.name.startswith(".") and p.name.endswith((".tmp",)) or ".tmp-" in p.name]
