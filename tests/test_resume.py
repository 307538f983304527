"""--resume: a run killed mid-training continues from its last checkpoint to the same step count and a finished
status, with no duplicated score rows; at trainer level the continuation is exactly the uninterrupted run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from bench.train import Budget, TrainConfig, TrainJob, train
from methods import get_method
from results_db import ResultsDB
from tests.conftest import write_sts
from tests.test_trainer import AtStep

REPO = Path(__file__).resolve().parent.parent
BENCH = Path(sys.executable).with_name("bench")
TEXTS = [f"Sentence {i} talks about subject {i % 6}. A second sentence adds detail number {i}." for i in range(30)]


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: threads only add contention


class Killed(Exception):
    pass


class CrashAt(AtStep):
    """Raises at the given (1-based) loss call: a process dying mid-training."""

    def at(self, model, batch):
        raise Killed("simulated kill")


@pytest.mark.parametrize("method", ["simcse", "mlm"])
def test_resumed_training_equals_the_uninterrupted_run(method, tiny_model_dir, tmp_path):
    """Data order, python/torch RNG (dropout, m, masking), optimizer moments and extra modules all come back."""
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    cfg = TrainConfig(max_len=32, batch_size=4, lr=1e-3, progress=False, checkpoint_every=3, seed=1)
    budget = Budget(steps=8)

    def run(out, adapter, resume=False):
        return train(adapter, AutoModel.from_pretrained(tiny_model_dir), tok, TrainJob(TEXTS, budget, cfg, out, resume=resume))

    full = run(tmp_path / "full", get_method(method).build(tokenizer=tok, max_len=32, seed=1))
    with pytest.raises(Killed):
        run(tmp_path / "part", CrashAt(get_method(method).build(tokenizer=tok, max_len=32, seed=1), step=8))
    assert (tmp_path / "part" / "checkpoints" / "LATEST").read_text() == "step-00000006"
    resumed = run(tmp_path / "part", get_method(method).build(tokenizer=tok, max_len=32, seed=1), resume=True)
    assert resumed.resumed_from == 6 and resumed.consumed.steps == 8 and resumed.stopped_by == "steps"
    assert resumed.losses == pytest.approx(full.losses[6:], rel=1e-5, abs=1e-6)
    assert resumed.consumed.examples == full.consumed.examples and resumed.consumed.tokens == full.consumed.tokens
    from safetensors.torch import load_file

    a = load_file(str(full.encoder_dir / "model.safetensors"))
    b = load_file(str(resumed.encoder_dir / "model.safetensors"))
    trained = [k for k in a if not k.startswith("pooler.")]  # the unused pooler is initialised at load, never trained
    assert len(trained) > 10
    for key in trained:
        torch.testing.assert_close(a[key], b[key], rtol=1e-5, atol=1e-6, msg=key)


def test_resume_with_other_settings_is_refused(tiny_model_dir, tmp_path):
    from transformers import AutoModel, AutoTokenizer

    from bench.runtime.errors import ConfigError

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    adapter = get_method("crop").build(tokenizer=tok, max_len=32)
    cfg = TrainConfig(max_len=32, batch_size=4, progress=False)
    train(get_method("simcse").build(tokenizer=tok, max_len=32), AutoModel.from_pretrained(tiny_model_dir), tok,
          TrainJob(TEXTS, Budget(steps=1), cfg, tmp_path, save_encoder_dir=None))
    with pytest.raises(ConfigError, match="made with other settings"):
        train(adapter, AutoModel.from_pretrained(tiny_model_dir), tok,
              TrainJob(TEXTS, Budget(steps=1), cfg, tmp_path, resume=True))


def test_bench_run_killed_mid_training_resumes_to_the_same_step_count(tiny_model_dir, tmp_path, capsys, monkeypatch):
    data = tmp_path / "data"
    write_sts(data / "sts" / "stsb-test.tsv", [
        ("A man is playing a guitar.", "A man plays the guitar.", 4.8),
        ("A woman is slicing onions.", "A man is riding a horse.", 0.4),
        ("The cat sleeps on the sofa.", "A cat is sleeping on a couch.", 4.5),
        ("Stocks fell sharply today.", "Children play football outside.", 0.0),
    ])
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(TEXTS) + "\n")
    db, out = tmp_path / "r.sqlite", tmp_path / "runs"
    steps = 60
    argv = [str(BENCH), "run", "--method", "laser3-self", "--backbone", str(tiny_model_dir), "--corpus", str(corpus),
            "--budget", f"steps={steps}", "--checkpoint-every", "5", "--batch-size", "4", "--max-len", "32",
            "--suite", "sts:stsb@elong", "--elong", "2", "--eval-max-len", "64", "--data-dir", str(data),
            "--db", str(db), "--out", str(out), "--no-progress"]
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))

    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=tmp_path)
    deadline = time.monotonic() + 300
    latest = None
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            found = list(out.glob("*/laser3-self/checkpoints/LATEST"))
            if found and found[0].read_text().strip() >= "step-00000010":
                latest = found[0]
                break
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)  # no handler, no cleanup: the process is gone mid-training
        killed_output = proc.communicate(timeout=60)[0].decode()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert latest is not None, killed_output
    assert proc.returncode == -signal.SIGKILL

    rdb = ResultsDB(db)
    before = rdb.runs().set_index("method")
    assert before.loc["vanilla", "status"] == "finished" and before.loc["laser3-self", "status"] == "running"
    run_dir = Path(before.loc["laser3-self", "output_dir"])
    assert not (run_dir / "TRAINED").exists()  # killed before training finished
    ckpt_step = int(latest.read_text().strip().split("-")[1])
    assert 10 <= ckpt_step < steps
    vanilla_scores = rdb.scores([int(before.loc["vanilla", "id"])])

    # the same command with --resume (in this process: one interpreter start fewer)
    from bench.cli import main

    monkeypatch.chdir(tmp_path)
    assert main([*argv[1:], "--resume"]) == 0
    stdout = capsys.readouterr().out
    assert "[vanilla] run" in stdout and "already finished" in stdout
    assert f"[laser3-self] resuming run {int(before.loc['laser3-self', 'id'])}" in stdout

    after = rdb.runs().set_index("method")
    assert len(after) == 2 and list(after["id"]) == list(before["id"])  # no new run rows
    assert set(after["status"]) == {"finished"}
    run = rdb.get_run(int(after.loc["laser3-self", "id"]))
    consumed = run["budget_consumed"]
    assert consumed["steps"] == steps and consumed["stopped_by"] == "steps"
    assert ckpt_step <= consumed["resumed_from_step"] < steps
    assert consumed["examples"] == 4 * steps  # counting went on from the checkpoint, not from zero
    log = rdb.train_log(run["id"])
    assert log["step"].tolist() == list(range(1, steps + 1))  # replayed steps replace their rows

    scores = rdb.scores()
    assert not scores.duplicated(["run_id", "suite", "dataset", "variant", "metric"]).any()
    assert len(scores) == 2 * 2  # 2 runs x (clean, elong-2)
    vanilla_after = rdb.scores([int(after.loc["vanilla", "id"])])
    assert vanilla_after["id"].tolist() == vanilla_scores["id"].tolist()  # the finished baseline was not re-scored
