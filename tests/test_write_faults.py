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


# ------------------------------------------------------------------ every write, not only checkpoints and encoders
def test_bench_run_writing_an_embedding_bag_backbone_past_the_limit_is_one_line(tmp_path):
    """The generated backbone folder is written through the same path: one line, no traceback, nothing partial."""
    write_sts(tmp_path / "data" / "sts" / "stsb-test.tsv", [("a b c", "a b d", 3.0), ("x y", "z w", 1.0), ("cat dog", "dog cat", 4.0)])
    (tmp_path / "corpus.txt").write_text("\n".join(f"sentence {i} about topic {i % 5} here" for i in range(40)) + "\n")
    argv = ["run", "--method", "simcse", "--backbone", "embedding-bag", "--corpus", "corpus.txt", "--budget", "steps=2",
            "--batch-size", "4", "--max-len", "32", "--suite", "sts:stsb", "--data-dir", "data", "--db", "r.sqlite",
            "--out", "runs", "--no-progress", "--no-baseline"]  # fmt: skip
    proc = _child(LIMIT + f"""
import sys
from bench.cli import main
limit(2_000_000)  # the backbone's embedding table is ~30 MB; the database and corpus files are far smaller
sys.exit(main({argv!r}))
""", tmp_path)
    err = proc.stderr
    assert proc.returncode == 2, proc.stdout + err
    assert "Traceback" not in err and "SafetensorError" not in err.split("(")[0]
    (line,) = [ln for ln in err.splitlines() if ln.startswith("bench: error:")]
    assert "the backbone embedding-bag-256 could not be written to runs/backbones/embedding-bag-256 (" in line
    assert "nothing partial was left" in line
    backbones = tmp_path / "runs" / "backbones"
    assert not backbones.exists() or not list(backbones.iterdir())  # no partial folder, no hidden temporary one


def test_a_cache_write_past_the_limit_is_skipped_and_leaves_no_partial_file(tmp_path):
    proc = _child(LIMIT + """
import pathlib
import numpy as np
from bench.data.token_cache import TokenTable, _write
limit(100_000)
table = TokenTable(["x"] * 10, np.arange(1_000_000, dtype=np.int64), np.arange(11, dtype=np.int64))
_write(pathlib.Path("cache/tokens/key.npz"), table)
print("FILES", sorted(p.name for p in pathlib.Path("cache").rglob("*") if p.is_file()))
""", tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "FILES []" in proc.stdout  # neither the entry nor a partial temporary file


def test_results_json_that_is_a_folder_is_named_as_itself(tmp_path):
    from bench.report.results_file import write_results
    from bench.runtime.writes import WriteFault
    from results_db import ResultsDB

    db = ResultsDB(tmp_path / "r.sqlite")
    run_id = db.create_run(kind="eval", model="m", method="vanilla", config={}, config_hash="h", status="finished")
    (tmp_path / "run" / "results.json").mkdir(parents=True)
    with pytest.raises(WriteFault) as caught:
        write_results(db, run_id, tmp_path / "run")
    message = str(caught.value)
    assert f"{tmp_path / 'run' / 'results.json'} is a folder" in message and ".part" not in message
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["results.json"]


def test_a_closed_stdout_ends_a_command_quietly(tmp_path):
    """`bench results --db lb.sqlite | head -1`: the reader is gone; no BrokenPipeError, no traceback."""
    from results_db import ResultsDB
    from results_db.records import ScoreRecord

    db = ResultsDB(tmp_path / "lb.sqlite")
    for i in range(30):
        run_id = db.create_run(kind="eval", model=f"model-{i}", method="vanilla", config={}, config_hash=f"h{i}",
                               status="finished", suite="sts:stsb")  # fmt: skip
        db.add_scores(run_id, [ScoreRecord("sts", "stsb", "spearman", 50.0 + i, 10)])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    proc = subprocess.Popen([sys.executable, "-m", "bench", "results", "--db", "lb.sqlite"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    proc.stdout.close()  # the reader is gone before anything is written
    err = proc.stderr.read().decode()
    proc.wait(timeout=120)
    assert "BrokenPipe" not in err and "Traceback" not in err and "Exception ignored" not in err, err
    assert proc.returncode == 128 + 13


def test_kept_files_and_folders_get_the_usual_permissions(tmp_path):
    """Written under a temporary name and moved in, but readable as a plain write would be (the umask's mode): a
    results.json or a backbone folder shared with colleagues is not private to its writer."""
    import stat

    from bench.report.results_file import write_results
    from bench.runtime.writes import atomic_folder
    from results_db import ResultsDB

    old = os.umask(0o022)
    try:
        db = ResultsDB(tmp_path / "r.sqlite")
        run_id = db.create_run(kind="eval", model="m", method="vanilla", config={}, config_hash="h", status="finished")
        path = write_results(db, run_id, tmp_path / "run")
        with atomic_folder(tmp_path / "backbone", "the backbone") as tmp:
            (tmp / "config.json").write_text("{}")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "backbone").stat().st_mode) == 0o755


def test_a_token_table_in_a_folder_this_user_may_not_write_is_one_line_naming_it(tmp_path, monkeypatch, caplog):
    """A read-only tokens folder (simulated: the tests may run as root, whom a chmod does not stop) while training
    tokenises its corpus: the ids are not kept, training goes on, and the one line names the folder and the
    permission (it was `RuntimeError: generator didn't yield` after a line that blamed disk space)."""
    import errno
    import logging

    from bench.data import token_cache
    from bench.runtime import writes

    monkeypatch.setenv("LENBENCH_CACHE", str(tmp_path / "cache"))
    real_open = os.open

    def refusing_open(path, flags, *args):  # noqa: ANN001, ANN202
        if "tokens" in str(path) and flags & os.O_CREAT:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(writes.os, "open", refusing_open)

    class Tokenizer:
        name_or_path = "toy"

        def __call__(self, texts, **kwargs):  # noqa: ANN001, ANN003, ANN204
            return {"input_ids": [[len(w) for w in t.split()] for t in texts]}

    monkeypatch.setattr(token_cache, "tokenizer_id", lambda tok: "toy-tokenizer")
    with caplog.at_level(logging.INFO, logger="bench.runtime.writes"):
        table, from_disk = token_cache.bodies(["a bb ccc", "dddd"], Tokenizer(), 8, workers=1)
    assert not from_disk and table["a bb ccc"] == [1, 2, 3]
    (line,) = [r.getMessage() for r in caplog.records]
    folder = tmp_path / "cache" / token_cache.FOLDER
    assert f"may not write in {folder}" in line and "permission" in line and "free space" not in line
    assert not any(folder.glob("*")) if folder.exists() else True
