"""No job hangs (issue 44): a process whose tokenizer threads have run never forks a worker that tokenises, and a
job that would hang fails inside a bound instead of holding CI.

Each sequence runs in a child process with a hard timeout: a deadlock fails the test, it never hangs the suite."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import STS_ROWS, write_sts

REPO = Path(__file__).resolve().parent.parent
BOUND_S = 240  # a healthy run takes well under a minute on 2 loaded cores; the deadlock never ends
# Enough distinct texts that the corpus preparation reaches the process pool on today's thresholds (64).
CORPUS = [f"Document {i} is about subject {i % 7}. It has a second sentence, number {i}, with more words." for i in range(160)]
STS = STS_ROWS[:5]


def child_env(**extra: str) -> dict[str, str]:
    """This checkout importable, offline, one torch thread; the tokenizer's threads ON (what a user gets who sets
    TOKENIZERS_PARALLELISM=true to silence the tokenizers warning: a forked child then tokenises on a thread pool
    whose threads it does not have); every process pool forced on, even on one or two cores."""
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               TOKENIZERS_PARALLELISM="true", LENBENCH_POOLS="on",
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))  # fmt: skip
    env.update(extra)
    return env


def run_bounded(argv: list[str], cwd: Path, env: dict[str, str], bound: float = BOUND_S) -> subprocess.CompletedProcess:
    """`python -m bench ARGV` that must end within `bound` seconds; its whole process group is killed otherwise."""
    proc = subprocess.Popen([sys.executable, "-m", "bench", *argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=env, cwd=cwd, start_new_session=True)  # fmt: skip
    try:
        out, _ = proc.communicate(timeout=bound)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        out, _ = proc.communicate()
        pytest.fail(f"`bench {' '.join(argv[:3])} ...` hung (no end in {bound} s); its output:\n{out.decode()[-3000:]}")
    return subprocess.CompletedProcess(argv, proc.returncode, out.decode(), "")


def small_job(tmp_path: Path, tiny_model_dir: Path, *extra: str) -> list[str]:
    data = tmp_path / "data"
    write_sts(data / "sts" / "stsb-test.tsv", STS)
    (tmp_path / "corpus.txt").write_text("\n".join(CORPUS) + "\n")
    return ["run", "--method", "simcse", "--backbone", str(tiny_model_dir), "--corpus", str(tmp_path / "corpus.txt"),
            "--budget", "steps=2", "--batch-size", "4", "--max-len", "32", "--suite", "sts:stsb", "--eval-max-len", "64",
            "--data-dir", str(data), "--db", str(tmp_path / "r.sqlite"), "--out", str(tmp_path / "runs"),
            "--no-progress", *extra]  # fmt: skip


def test_baseline_evaluation_then_training_that_prepares_its_corpus_in_a_pool_finishes(tiny_model_dir, tmp_path):
    """The sequence that hung every time (issue 44): the untrained baseline's evaluation runs the tokenizer's
    threads, then the training run tokenises its corpus in a process pool and builds batches in loader workers,
    all in one process."""
    from results_db import ResultsDB

    done = run_bounded(small_job(tmp_path, tiny_model_dir, "--loader-workers", "1"), tmp_path, child_env())
    assert done.returncode == 0, done.stdout[-3000:]
    assert "[vanilla] evaluated" in done.stdout
    runs = ResultsDB(tmp_path / "r.sqlite").runs()
    assert sorted(runs["status"]) == ["finished", "finished"]
    assert "finishing" not in done.stdout  # the pools did the work: no stalled pool was taken over


# ------------------------------------------------------------------------------------------ bounded waits
def _double(chunk: tuple[int, str]) -> int:
    return 2 * chunk[0]


def _stuck_on_odd(chunk: tuple[int, str]) -> int:
    """Leaves its pid in the folder chunk[1]; never comes back from an odd chunk (a deadlock, as far as the parent
    can tell)."""
    import time

    Path(chunk[1], str(os.getpid())).touch()
    if chunk[0] % 2:
        time.sleep(3600)
    return _double(chunk)


def gone(pids: list[int], within: float = 10.0) -> bool:
    import time

    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        alive = []
        for pid in pids:
            try:
                os.kill(pid, 0)
                alive.append(pid)
            except ProcessLookupError:
                pass
        if not alive:
            return True
        time.sleep(0.1)
    return False


def test_a_pool_that_finishes_nothing_for_the_set_time_is_ended_and_the_parent_finishes_the_work(monkeypatch, caplog, tmp_path):
    import logging
    import time

    from bench.runtime import pools

    monkeypatch.setenv("LENBENCH_POOL_STALL_SECONDS", "3")
    pool = pools.WorkerPool(2, "test")
    start = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="bench.runtime.pools"):
        out = pool.map(_stuck_on_odd, [(0, str(tmp_path)), (1, str(tmp_path)), (4, str(tmp_path))], local=_double)
    took = time.monotonic() - start
    assert out == [0, 2, 8]  # in order, the stuck chunk computed here
    assert took < 60 and not pool.alive
    pids = [int(p.name) for p in tmp_path.iterdir()]
    assert pids and gone(pids)  # the stuck worker was killed, not left behind
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "test pool: no chunk finished in 3 s" in lines[0] and "finishing 1 of 3 chunks" in lines[0]


def test_an_adapter_that_cannot_be_copied_to_loader_workers_builds_its_batches_in_process(caplog):
    """Loader workers get a pickled copy of the adapter; a plug-in whose adapter cannot be pickled (a local class)
    trains all the same, on the training thread, with the same batches, and one line says why."""
    import logging

    from bench.train.loader import BatchLoader

    class Local:
        name = "local"

        def make_batch(self, texts, rng):
            return {"texts": list(texts), "r": rng.random()}

    inline = [next(iter(BatchLoader(Local(), ["a", "b", "c"], batch_size=2, seed=0, workers=0)))]
    with caplog.at_level(logging.WARNING, logger="bench.train.loader"):
        loader = BatchLoader(Local(), ["a", "b", "c"], batch_size=2, seed=0, workers=1)
        got = [next(loader.batches())]
        loader.close()
    assert [(d.number, b) for d, b in got] == [(d.number, b) for d, b in inline] and loader.workers == 0
    assert any("loader workers off: the adapter of 'local' cannot be copied" in r.getMessage() for r in caplog.records)


class StuckInWorkers:
    """An adapter whose make_batch never returns in a worker process from draw `from_draw` on (a deadlocked
    tokenizer, as far as the trainer can tell); in the process that built it, it works."""

    name = "stuck-in-workers"

    def __init__(self, from_draw: int):
        self.home, self.from_draw, self.draws = os.getpid(), from_draw, 0

    def make_batch(self, texts, rng):
        import time

        self.draws += 1
        if os.getpid() != self.home and self.draws > self.from_draw:
            time.sleep(3600)
        return {"texts": list(texts), "r": rng.random()}


def test_loader_workers_that_deliver_nothing_are_ended_and_the_same_batches_come_from_the_training_thread(monkeypatch, caplog):
    import logging

    from bench.train.loader import BatchLoader

    texts = [f"text {i}" for i in range(10)]
    inline = BatchLoader(StuckInWorkers(0), texts, batch_size=3, seed=2, workers=0).batches()
    expected = [(d.number, b) for d, b in (next(inline) for _ in range(6))]
    monkeypatch.setenv("LENBENCH_POOL_STALL_SECONDS", "3")
    loader = BatchLoader(StuckInWorkers(2), texts, batch_size=3, seed=2, workers=1, prefetch=1)
    with caplog.at_level(logging.WARNING, logger="bench.train.loader"):
        got = [(d.number, b) for d, b in (next(loader.batches()) for _ in range(6))]
    loader.close()
    assert got == expected and loader.workers == 0
    assert any("loader workers delivered no batch in 3 s" in r.getMessage() for r in caplog.records)


def test_a_stop_requested_while_the_loader_waits_for_a_stuck_worker_ends_its_stream_at_once():
    import signal
    import time

    from bench.runtime import signals
    from bench.train.loader import BatchLoader

    loader = BatchLoader(StuckInWorkers(0), [f"text {i}" for i in range(10)], batch_size=3, seed=2, workers=1)
    with signals.graceful_stop():
        signals.defer_stops(True)  # as in the training loop: the signal is recorded, not raised
        try:
            batches = loader.batches()
            os.kill(os.getpid(), signal.SIGTERM)
            start = time.monotonic()
            assert next(batches, None) is None  # no batch: the trainer checkpoints its last step and stops
            assert time.monotonic() - start < 10
        finally:
            signals.defer_stops(False)
            loader.close()


def test_a_run_alive_without_progress_for_ten_minutes_shows_as_stalled_apart_from_running(tmp_path, capsys):
    """The heartbeat records the last progress (runtime progress_at); `bench results` shows a live run that has
    made none for STALLED_AFTER as "stalled", a live run with recent progress as "running"."""
    import csv
    import datetime as dt
    import io

    from bench.cli import main
    from bench.runtime import heartbeat
    from results_db import ResultsDB
    from results_db.liveness import STALLED_AFTER
    from results_db.models import utcnow

    db = ResultsDB(tmp_path / "r.sqlite")
    moving = db.create_run(model="m", method="simcse", status="running")  # this process: alive
    stuck = db.create_run(model="m", method="crop", status="running")
    with heartbeat.Heartbeat(db, moving, every=0.05):
        import time

        deadline = time.monotonic() + 30
        while "progress_at" not in (db.get_run(moving)["runtime"] or {}) and time.monotonic() < deadline:
            time.sleep(0.05)
    assert dt.datetime.fromisoformat(db.get_run(moving)["runtime"]["progress_at"]) > utcnow() - dt.timedelta(minutes=1)
    db.merge_runtime(stuck, {"progress_at": (utcnow() - STALLED_AFTER - dt.timedelta(minutes=1)).isoformat()})
    assert main(["results", "--db", str(tmp_path / "r.sqlite"), "--runs-only", "--format", "csv"]) == 0
    rows = {int(r["id"]): r["status"] for r in csv.DictReader(io.StringIO(capsys.readouterr().out))}
    assert rows == {moving: "running", stuck: "stalled"}
    from results_db.liveness import live_status  # what the leaderboard's run page shows

    assert [live_status(db.get_run(r)) for r in (moving, stuck)] == ["running", "stalled"]


def test_the_encoders_token_id_pool_after_the_tokenizers_threads_finishes(tiny_model_dir, tmp_path):
    """`bench eval`'s sequence: the tokenizer's threads run (a first batch), then the encoder's token-id pool
    tokenises the rest (forced on: on 2 cores it would not start), in one process, within a bound; the pool's ids
    equal the in-process ones."""
    code = (
        "from transformers import AutoTokenizer\n"
        "from bench.encode.inputs import model_inputs\n"
        "from bench.encode.token_ids import tokenize_parallel\n"
        f"tok = AutoTokenizer.from_pretrained({str(tiny_model_dir)!r})\n"
        "texts = [f'text {i} ' + 'word ' * (i % 11) for i in range(600)]\n"
        "expected = model_inputs(texts, tok, 16)\n"  # the threads run here
        "got = tokenize_parallel(texts, tok, 16, workers=2)\n"
        "assert got.ids.flat.tolist() == expected.ids.flat.tolist()\n"
        "print('pool ok')\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=child_env(), cwd=tmp_path, start_new_session=True)  # fmt: skip
    try:
        out = proc.communicate(timeout=120)[0].decode()
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        pytest.fail(f"the encoder's token-id pool hung: {proc.communicate()[0].decode()[-2000:]}")
    assert proc.returncode == 0 and "pool ok" in out and "finishing" not in out, out[-2000:]
