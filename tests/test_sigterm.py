"""SIGTERM (what Slurm, Kubernetes and `timeout` send) ends `bench run` cleanly: a checkpoint at the step it was
on, the run row marked "interrupted", exit status 143; `--resume` finishes it with the same score as a run that
was never interrupted. A row whose process is gone without a word (SIGKILL) is shown as "stale"."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.cli import main
from results_db import ResultsDB
from tests.conftest import write_sts
from tests.test_resume import TEXTS

REPO = Path(__file__).resolve().parent.parent
STEPS = 20

pytestmark = pytest.mark.usefixtures("one_thread")


def _setup(tmp_path: Path, tiny_model_dir: Path, name: str) -> list[str]:
    data = tmp_path / "data"
    if not data.exists():
        write_sts(data / "sts" / "stsb-test.tsv", [
            ("A man is playing a guitar.", "A man plays the guitar.", 4.8),
            ("A woman is slicing onions.", "A man is riding a horse.", 0.4),
            ("The cat sleeps on the sofa.", "A cat is sleeping on a couch.", 4.5),
            ("Stocks fell sharply today.", "Children play football outside.", 0.0),
            ("A dog runs in the park.", "A dog is running on grass.", 4.0),
        ])  # fmt: skip
        (tmp_path / "corpus.txt").write_text("\n".join(TEXTS) + "\n")
    return ["run", "--method", "simcse", "--backbone", str(tiny_model_dir), "--corpus", str(tmp_path / "corpus.txt"),
            "--budget", f"steps={STEPS}", "--checkpoint-every", "2", "--batch-size", "4", "--max-len", "32", "--suite", "sts:stsb",
            "--eval-max-len", "64", "--data-dir", str(data), "--db", str(tmp_path / f"{name}.sqlite"),
            "--out", str(tmp_path / f"runs-{name}"), "--no-progress", "--no-baseline", "--no-cache"]  # fmt: skip


def _start(argv: list[str], cwd: Path) -> subprocess.Popen:
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))  # fmt: skip
    return subprocess.Popen([sys.executable, "-m", "bench", *argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=cwd)


def _wait_for_training(db: Path, proc: subprocess.Popen, min_step: int, timeout: float = 300) -> None:
    """Until the run has logged `min_step` training steps (the log is flushed with each checkpoint)."""
    import sqlite3

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
            try:
                if con.execute("SELECT count(*) FROM train_log").fetchone()[0] >= min_step:
                    return
            finally:
                con.close()
        except sqlite3.Error:  # not created yet
            pass
        time.sleep(0.1)
    raise AssertionError(f"training did not reach step {min_step}: {proc.communicate(timeout=60)[0].decode()[-2000:]}")


def test_sigterm_checkpoints_marks_interrupted_and_resume_matches_an_uninterrupted_run(tiny_model_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    argv = _setup(tmp_path, tiny_model_dir, "term")
    proc = _start(argv, tmp_path)
    try:
        _wait_for_training(tmp_path / "term.sqlite", proc, min_step=4)  # checkpoints (and log flushes) every 2 steps
        proc.send_signal(signal.SIGTERM)
        output = proc.communicate(timeout=120)[0].decode()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, output
    assert "bench: stopped by SIGTERM (checkpoint at step" in output and "--resume" in output and "Traceback" not in output

    db = ResultsDB(tmp_path / "term.sqlite")
    (run,) = db.runs().to_dict("records")
    assert run["status"] == "interrupted" and run["pid"] == proc.pid and run["host"]
    run_dir = Path(run["output_dir"])
    stopped_at = int((run_dir / "checkpoints" / "LATEST").read_text().split("-")[1])
    assert 4 <= stopped_at < STEPS  # saved at the step the signal found, not only at the last scheduled one
    assert db.train_log(run["id"])["step"].max() == stopped_at  # every finished step is logged
    assert db.scores().empty

    assert main([*argv, "--resume"]) == 0
    assert f"resuming run {run['id']} (interrupted)" in capsys.readouterr().out
    resumed = db.get_run(run["id"])
    assert resumed["status"] == "finished" and resumed["budget_consumed"]["resumed_from_step"] == stopped_at
    assert resumed["budget_consumed"]["steps"] == STEPS

    straight = _setup(tmp_path, tiny_model_dir, "straight")
    assert main(straight) == 0
    a, b = db.scores(), ResultsDB(tmp_path / "straight.sqlite").scores()
    assert len(a) == len(b) == 1
    assert a["value"].iloc[0] == pytest.approx(b["value"].iloc[0], abs=1e-6)


def test_a_row_whose_process_died_is_shown_as_stale(tmp_path, capsys):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    db = ResultsDB(tmp_path / "r.sqlite")
    alive = db.create_run(model="m", method="simcse", status="running")  # this process: alive
    gone = db.create_run(model="m", method="laser3-self", status="running", pid=dead.pid)
    done = db.create_run(model="m", method="mlm", status="finished", pid=dead.pid)
    assert main(["results", "--db", str(tmp_path / "r.sqlite"), "--runs-only", "--format", "csv"]) == 0
    import csv
    import io

    rows = {int(r["id"]): r["status"] for r in csv.DictReader(io.StringIO(capsys.readouterr().out))}
    assert rows == {alive: "running", gone: "stale", done: "finished"}


def test_an_old_heartbeat_is_stale_even_on_another_host():
    import datetime as dt

    from results_db.liveness import STALE_AFTER, is_stale

    now = dt.datetime(2026, 1, 1, 12, 0)
    row = {"status": "running", "host": "elsewhere", "pid": 1, "heartbeat_at": now - STALE_AFTER / 2}
    assert not is_stale(row, now, host="here")
    row["heartbeat_at"] = now - STALE_AFTER * 2
    assert is_stale(row, now, host="here")


def test_checkpoint_schedule_saves_every_ten_minutes_and_every_asked_step_count():
    from bench.train.checkpoint import CheckpointSchedule

    timed = CheckpointSchedule()  # default: by time only; a 40-step run of 1 s steps saves only at its stop
    assert [s for s in range(1, 41) if timed.due(s, float(s))] == []
    slow = CheckpointSchedule()  # 30 s per step: every 10 minutes of training
    assert [s for s in range(1, 61) if slow.due(s, s * 30.0)] == [20, 40, 60]
    explicit = CheckpointSchedule(every_steps=50)  # an explicit interval longer than the 10 minutes...
    assert [s for s in range(1, 41) if explicit.due(s, s * 30.0)] == [20, 40]  # ...the time rule still saves
    stepped = CheckpointSchedule(every_steps=4, every_seconds=0)
    assert [s for s in range(1, 17) if stepped.due(s, 0.0)] == [4, 8, 12, 16]
    resumed = CheckpointSchedule(start_step=6, every_steps=3)
    assert [s for s in range(7, 13) if resumed.due(s, 0.0)] == [9, 12]


def test_a_signal_waits_for_the_training_step_inside_the_loop_and_stops_at_once_outside():
    from bench.runtime import signals

    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    with signals.graceful_stop():
        signals.defer_stops(True)
        try:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C in the middle of a training step
            time.sleep(0.05)
            assert signals.stop_requested() == signal.SIGINT  # recorded, nothing raised yet
            with pytest.raises(signals.StopRequested) as second:
                os.kill(os.getpid(), signal.SIGTERM)  # a second signal stops at once
                time.sleep(0.05)
            assert second.value.exit_code == 143
        finally:
            signals.defer_stops(False)
        with pytest.raises(signals.StopRequested, match="stopped by SIGTERM"):
            os.kill(os.getpid(), signal.SIGTERM)  # outside a training loop (evaluation): at once
            time.sleep(0.05)
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before  # handlers given back
    assert signals.stop_requested() == 0
    assert signals.run_status(signals.StopRequested(signal.SIGTERM)) == "interrupted"
    assert signals.run_status(ValueError("x")) == "failed"


def test_the_heartbeat_thread_stamps_a_running_row(tmp_path):
    from bench.runtime.heartbeat import Heartbeat

    db = ResultsDB(tmp_path / "r.sqlite")
    run = db.create_run(model="m", status="running")
    first = db.get_run(run)["heartbeat_at"]
    with Heartbeat(db, run, every=0.05):
        deadline = time.monotonic() + 30
        while db.get_run(run)["heartbeat_at"] == first and time.monotonic() < deadline:
            time.sleep(0.05)
    assert db.get_run(run)["heartbeat_at"] > first


def test_a_database_gone_while_recording_a_failure_is_one_line_not_a_traceback(tmp_path, capsys):
    """The run's own error is what propagates; recording it may fail (file deleted under a running job)."""
    import sqlite3

    from bench.experiment.record import record_failure

    class GoneDB:
        def finish_run(self, *args, **kwargs):
            raise sqlite3.OperationalError("attempt to write a readonly database")

    record_failure(GoneDB(), 7, KeyboardInterrupt(), files=[])
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err
    assert err.startswith("bench: run 7 could not be marked interrupted (OperationalError: attempt to write")


def test_ctrl_c_during_bench_eval_advises_what_bench_eval_accepts(tmp_path, monkeypatch, capsys):
    """bench eval takes no --resume: its stop message says to run the same command again, and doing so finishes
    the same row, keeping the dataset scored before the signal."""
    from results_db import ResultsDB
    from tests.test_credentials import _beir

    data = _beir(tmp_path / "data")
    _beir(tmp_path / "other")
    (tmp_path / "other" / "beir" / "scifact").rename(data / "beir" / "nfcorpus")
    db_path = tmp_path / "r.sqlite"
    argv = ["eval", "--model", "bm25", "--suite", "beir:scifact,nfcorpus", "--data-dir", str(data), "--db", str(db_path), "--no-progress"]
    original = ResultsDB.add_scores

    def add_then_ctrl_c(self, run_id, records):
        original(self, run_id, records)
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C right after the first dataset is committed
        time.sleep(0.05)

    monkeypatch.setattr(ResultsDB, "add_scores", add_then_ctrl_c)
    assert main(argv) == 130
    err = capsys.readouterr().err
    assert "bench: stopped by SIGINT; the run is marked interrupted: run the same command again" in err
    assert "--resume" not in err
    with pytest.raises(SystemExit) as refused:  # the advice must not name an option bench eval refuses
        main([*argv, "--resume"])
    assert refused.value.code == 2
    capsys.readouterr()
    monkeypatch.setattr(ResultsDB, "add_scores", original)
    assert main(argv) == 0
    assert "resuming run 1 (interrupted)" in capsys.readouterr().out
    runs = ResultsDB(db_path).runs()
    assert runs["status"].tolist() == ["finished"] and set(ResultsDB(db_path).scores()["dataset"]) == {"scifact", "nfcorpus"}
