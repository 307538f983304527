"""`bench eval` / `bench run` on two processes (torchrun via `--nproc 2`, gloo on CPU): the same scores as one
process with every text encoded once across ranks and one database row; a rank killed mid-training ends the job
with a clear error and a failed run row, which `--resume` on one process then finishes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.cli import main
from results_db import ResultsDB
from tests.test_eval_cli import PAIRS, write_beir
from tests.conftest import write_sts

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.usefixtures("one_thread")

# Imported by every Python process started with this folder first on PYTHONPATH: the rank given by
# $LENBENCH_TEST_KILL_RANK sends itself $LENBENCH_TEST_KILL_SIGNAL (default SIGKILL: no clean-up) at its Nth
# gradient all_reduce, i.e. mid-step N.
KILL_HOOK = '''
import os
if os.environ.get("RANK") == os.environ.get("LENBENCH_TEST_KILL_RANK", "-") and os.environ.get("LENBENCH_TEST_KILL_AT"):
    import signal
    import bench.runtime.distributed as d
    original, calls = d.average_gradients, [0]
    def average_gradients(params):
        calls[0] += 1
        if calls[0] == int(os.environ["LENBENCH_TEST_KILL_AT"]):
            os.kill(os.getpid(), getattr(signal, os.environ.get("LENBENCH_TEST_KILL_SIGNAL", "SIGKILL")))
        return original(params)
    d.average_gradients = average_gradients
'''


def bench(args: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": f"{tmp_path / 'hook'}{os.pathsep}{REPO}", **env}
    return subprocess.run(
        [sys.executable, "-m", "bench", *args], cwd=tmp_path, env=full_env, capture_output=True, text=True, timeout=300
    )


@pytest.fixture()
def data_dir(tmp_path):
    root = tmp_path / "data"
    write_beir(root / "beir" / "scifact")
    write_sts(root / "sts" / "stsb-test.tsv", PAIRS)
    (tmp_path / "hook").mkdir()
    (tmp_path / "hook" / "sitecustomize.py").write_text(KILL_HOOK)
    return root


def scores(db_path: Path) -> tuple[ResultsDB, dict]:
    db = ResultsDB(str(db_path))
    frame = db.scores()
    return db, {(r.run_id, r.suite, r.dataset, r.variant, r.metric): r.value for r in frame.itertuples()}


def test_two_process_eval_writes_the_single_process_scores(tiny_model_dir, data_dir, tmp_path, monkeypatch):
    args = ["eval", "--model", str(tiny_model_dir), "--suite", "sts:stsb@elong+beir:scifact@elong", "--elong", "2",
            "--max-len", "32", "--batch-size", "8", "--data-dir", str(data_dir)]
    monkeypatch.setenv("LENBENCH_CACHE", str(tmp_path / "cache-one"))
    assert main([*args, "--db", str(tmp_path / "one.sqlite")]) == 0
    proc = bench([*args, "--db", str(tmp_path / "two.sqlite"), "--nproc", "2"], tmp_path,
                 LENBENCH_CACHE=str(tmp_path / "cache-two"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("run 1  model=") == 1  # rank 0 alone prints

    db_one, one = scores(tmp_path / "one.sqlite")
    db_two, two = scores(tmp_path / "two.sqlite")
    assert len(db_two.runs()) == 1 and len(one) == 8
    assert one.keys() == two.keys()
    for key, value in one.items():
        assert two[key] == pytest.approx(value, abs=1e-6), key
    runtime_one = db_one.runs().iloc[0]["runtime"]
    runtime_two = db_two.runs().iloc[0]["runtime"]
    assert runtime_two["world_size"] == 2 and runtime_two["backend"] == "gloo"
    per_rank = runtime_two["texts_encoded_per_rank"]
    assert len(per_rank) == 2 and min(per_rank) > 0
    assert sum(per_rank) == runtime_one["texts_encoded_per_rank"][0]  # no text encoded twice across ranks


def test_killed_rank_fails_the_run_and_one_process_resumes_it(tiny_model_dir, data_dir, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(f"Sentence {i} is about topic {i % 5}. More words {i}." for i in range(40)) + "\n")
    args = ["run", "--method", "simcse", "--backbone", str(tiny_model_dir), "--corpus", str(corpus), "--budget", "steps=8",
            "--batch-size", "4", "--max-len", "32", "--suite", "sts:stsb", "--eval-max-len", "32", "--data-dir",
            str(data_dir), "--db", str(tmp_path / "r.sqlite"), "--out", str(tmp_path / "runs"), "--checkpoint-every", "2",
            "--no-baseline", "--no-progress"]
    killed = bench([*args, "--nproc", "2"], tmp_path, LENBENCH_TEST_KILL_RANK="1", LENBENCH_TEST_KILL_AT="5")
    assert killed.returncode != 0
    assert "bench: error: 2-process run failed" in killed.stderr and "SIGKILL" in killed.stderr, killed.stderr[-3000:]
    run = ResultsDB(str(tmp_path / "r.sqlite")).runs().iloc[0]
    # "failed" (rank 0's collective broke) or "interrupted" (torchrun's SIGTERM to the survivor came first)
    assert run["status"] in ("failed", "interrupted"), (run["status"], run["error"])
    assert run["runtime"]["world_size"] == 2 and run["runtime"]["per_rank_batch"] == 2

    resumed = bench([*args, "--resume"], tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    runs = ResultsDB(str(tmp_path / "r.sqlite")).runs()
    assert len(runs) == 1
    run = runs.iloc[0]
    assert run["status"] == "finished"
    assert run["budget_consumed"]["steps"] == 8 and run["budget_consumed"]["resumed_from_step"] == 4
    assert run["runtime"]["world_size"] == 1 and run["runtime"]["per_rank_batch"] == 4


def test_sigterm_on_rank_0_stops_every_rank_after_the_same_step(tiny_model_dir, data_dir, tmp_path):
    """A scheduler's SIGTERM (here to rank 0 alone, mid-step 3): every rank finishes step 3, rank 0 checkpoints it,
    the row is 'interrupted', and --resume on one process continues from step 3."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(f"Sentence {i} is about topic {i % 5}. More words {i}." for i in range(40)) + "\n")
    args = ["run", "--method", "laser3-self", "--backbone", str(tiny_model_dir), "--corpus", str(corpus), "--budget",
            "steps=6", "--batch-size", "4", "--max-len", "32", "--suite", "sts:stsb", "--eval-max-len", "32",
            "--data-dir", str(data_dir), "--db", str(tmp_path / "r.sqlite"), "--out", str(tmp_path / "runs"),
            "--checkpoint-every", "100", "--no-baseline", "--no-progress"]
    stopped = bench([*args, "--nproc", "2"], tmp_path, LENBENCH_TEST_KILL_RANK="0", LENBENCH_TEST_KILL_AT="3",
                    LENBENCH_TEST_KILL_SIGNAL="SIGTERM")
    assert stopped.returncode != 0
    assert "stopped by SIGTERM (checkpoint at step 3" in stopped.stderr, stopped.stderr[-3000:]
    run = ResultsDB(str(tmp_path / "r.sqlite")).runs().iloc[0]
    assert run["status"] == "interrupted", run["error"]
    resumed = bench([*args, "--resume"], tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    run = ResultsDB(str(tmp_path / "r.sqlite")).runs().iloc[0]
    assert run["status"] == "finished" and run["budget_consumed"]["resumed_from_step"] == 3


def test_batch_size_that_does_not_divide_is_refused_before_anything_starts(tmp_path, capsys):
    code = main(["run", "--method", "simcse", "--nproc", "3", "--batch-size", "16", "--db", str(tmp_path / "r.sqlite")])
    assert code == 2
    assert "bench: error: batch size 16 does not divide over 3 processes" in capsys.readouterr().err
    assert not (tmp_path / "r.sqlite").exists()


def test_two_process_run_trains_and_scores_as_one_process(tiny_model_dir, data_dir, tmp_path, monkeypatch):
    """`bench run --nproc 2` end to end (baseline + laser3-self, training then sharded evaluation): the rows of the
    one-process run, the same losses and encoder weights, the baseline's scores. (The trained row's scores are only
    checked to exist: a random tiny BERT gives near-identical cosines for every pair, so weights equal within 1e-5
    still reorder its Spearman ranks.) The backbone's dropout is off in its config (laser3-self keeps the model's)."""
    import json
    import shutil

    backbone = tmp_path / "no-dropout-bert"
    shutil.copytree(tiny_model_dir, backbone)
    config = json.loads((backbone / "config.json").read_text())
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    (backbone / "config.json").write_text(json.dumps(config))
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(f"Sentence {i} is about topic {i % 5}. More words {i}." for i in range(40)) + "\n")
    args = ["run", "--method", "laser3-self", "--backbone", str(backbone), "--corpus", str(corpus), "--budget", "steps=3",
            "--batch-size", "4", "--lr", "1e-3", "--max-len", "32", "--suite", "sts:stsb@elong+beir:scifact",
            "--elong", "2", "--eval-max-len", "32", "--data-dir", str(data_dir), "--no-progress"]
    monkeypatch.setenv("LENBENCH_CACHE", str(tmp_path / "cache-one"))
    assert main([*args, "--db", str(tmp_path / "one.sqlite"), "--out", str(tmp_path / "runs-one")]) == 0
    two = bench([*args, "--db", str(tmp_path / "two.sqlite"), "--out", str(tmp_path / "runs-two"), "--nproc", "2"],
                tmp_path, LENBENCH_CACHE=str(tmp_path / "cache-two"))
    assert two.returncode == 0, two.stderr[-3000:]
    assert two.stdout.count("[laser3-self] trained 3 steps") == 1  # rank 0 alone prints

    db_one, one = scores(tmp_path / "one.sqlite")
    db_two, both = scores(tmp_path / "two.sqlite")
    runs = db_two.runs().sort_values("id")
    assert list(runs["method"]) == ["vanilla", "laser3-self"] and set(runs["status"]) == {"finished"}
    assert one.keys() == both.keys() and len(one) == 2 * 5  # two rows x (3 clean + elong-2 + beir metrics)
    for key, value in one.items():
        if key[0] == 1:  # the baseline
            assert both[key] == pytest.approx(value, abs=1e-6), key
    losses = [list(db.train_log(2)["loss"]) for db in (db_one, db_two)]
    assert len(losses[0]) == 3 and losses[1] == pytest.approx(losses[0], abs=1e-5)
    from safetensors.torch import load_file

    weights = [load_file(next((tmp_path / out).glob("*/laser3-self/encoder/model.safetensors"))) for out in ("runs-one", "runs-two")]
    for name, w in weights[0].items():
        if not name.startswith("pooler."):  # BERT's pooler is unused by training and randomly initialised at load
            # Adam divides by sqrt(v): a parameter whose gradient is near zero turns the all-reduce's float rounding
            # (another summation order than one process's) into updates that differ by ~1e-5 at lr 1e-3 (seen on a
            # loaded machine); 1e-4 is still 30x below one step's largest update (lr)
            assert (weights[1][name] - w).abs().max() < 1e-4, name
    trained = runs.iloc[1]
    assert trained["runtime"]["world_size"] == 2 and trained["runtime"]["per_rank_batch"] == 2
    assert trained["budget_consumed"]["examples"] == db_one.runs().iloc[1]["budget_consumed"]["examples"] == 12
