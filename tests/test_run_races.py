"""Two processes asking for the same run at once (`bench run`, `lenbench.run`, `bench eval`) agree through the
database: one trains (or scores), the other waits for it and reuses the result. One trained row, two readable
results, no failed row, and no folder shared by two rows.

Each test starts two real processes that meet at a barrier just before they look for their run, so they always
overlap (without the lease both would find no row and make one each)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from results_db import ResultsDB
from tests.conftest import write_sts

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.usefixtures("one_thread")

# Both processes wait here (in the job, before the run's row is looked for) until the other has arrived too.
BARRIER = """
import os, sys, time, pathlib
def barrier(where):
    gate = pathlib.Path(os.environ["RACE_GATE"])
    gate.mkdir(exist_ok=True)
    (gate / str(os.getpid())).touch()
    deadline = time.monotonic() + 120
    while len(list(gate.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
def at_barrier(module, name):
    original = getattr(module, name)
    def wrapped(*a, **k):
        barrier(name)
        return original(*a, **k)
    setattr(module, name, wrapped)
"""


def _setup(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    write_sts(data / "sts" / "stsb-test.tsv", [("a man plays a guitar", "a man is playing guitar", 4.8),
                                                 ("a woman slices onions", "a man rides a horse", 0.4),
                                                 ("the cat sleeps", "a cat is sleeping", 4.5),
                                                 ("stocks fell today", "children play outside", 0.0)])  # fmt: skip
    (tmp_path / "corpus.txt").write_text("\n".join(f"sentence {i} about topic {i % 7} and more words" for i in range(60)) + "\n")
    return data


def _two(code: str, cwd: Path) -> list[subprocess.CompletedProcess]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
               OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", RACE_GATE=str(cwd / "gate"))  # fmt: skip
    script = BARRIER + textwrap.dedent(code)
    procs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              cwd=cwd, env=env) for _ in range(2)]  # fmt: skip
    done = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return done


def _run_argv(tiny_model_dir: Path, data: Path) -> list[str]:
    return ["run", "--method", "simcse", "--backbone", str(tiny_model_dir), "--corpus", "corpus.txt", "--budget", "steps=4",
            "--batch-size", "8", "--max-len", "32", "--suite", "sts:stsb", "--eval-max-len", "32", "--data-dir", str(data),
            "--db", "conc.sqlite", "--out", "runs_conc", "--no-progress", "--checkpoint-every", "3"]  # fmt: skip


def _one_trained_row_two_results(tmp_path: Path, procs: list[subprocess.CompletedProcess]) -> list[dict]:
    for proc in procs:
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert "Traceback" not in proc.stderr
    rows = ResultsDB(tmp_path / "conc.sqlite").runs().sort_values("id").to_dict("records")
    assert [r["status"] for r in rows] == ["finished"] * len(rows), [(r["method"], r["status"], r["error"]) for r in rows]
    assert sorted(r["method"] for r in rows) == ["simcse", "vanilla"]  # one trained row, one baseline, no twins
    folders = [r["output_dir"] for r in rows]
    assert len(set(folders)) == len(folders)  # no folder shared by two rows
    for row in rows:  # each row's own results.json, naming that row
        document = json.loads((Path(tmp_path / row["output_dir"]) / "results.json").read_text())
        assert document["run"]["id"] == row["id"] and document["run"]["status"] == "finished"
    out = [p.stdout for p in procs]
    assert any("by another process (pid" in o for o in out), out  # one waited for the other's lease
    assert sum(o.count("reusing it (nothing trained)") for o in out) == 2, out  # each row made once, reused once
    return rows


def test_two_identical_bench_runs_train_one_row_and_both_report_it(tmp_path, tiny_model_dir):
    data = _setup(tmp_path)
    procs = _two(f"""
import bench.experiment.comparison as comparison
at_barrier(comparison.ComparisonJob, "_find_or_create_run")
from bench.cli import main
sys.exit(main({_run_argv(tiny_model_dir, data)!r}))
""", tmp_path)
    _one_trained_row_two_results(tmp_path, procs)
    for proc in procs:  # both print the comparison's table (the reused one too)
        assert "stsb" in proc.stdout and "spearman" in proc.stdout


def test_two_identical_lenbench_run_calls_train_one_row(tmp_path, tiny_model_dir):
    data = _setup(tmp_path)
    procs = _two(f"""
import bench.experiment.comparison as comparison
at_barrier(comparison.ComparisonJob, "_find_or_create_run")
import lenbench
result = lenbench.run("simcse", "sts:stsb", "steps=4", db="conc.sqlite", backbone={str(tiny_model_dir)!r},
                      corpus="corpus.txt", batch_size=8, max_len=32, eval_max_len=32, data_dir={str(data)!r},
                      out="runs_conc", checkpoint_every=3)
print("SCORES", len(result.to_pandas()))
""", tmp_path)
    _one_trained_row_two_results(tmp_path, procs)
    counts = {int(p.stdout.split("SCORES")[1].split()[0]) for p in procs}
    assert len(counts) == 1 and counts.pop() > 0  # two readable results, the same ones


def test_two_identical_bench_evals_score_one_row(tmp_path, tiny_model_dir):
    data = _setup(tmp_path)
    argv = ["eval", "--model", str(tiny_model_dir), "--suite", "sts:stsb", "--max-len", "32", "--data-dir", str(data),
            "--db", "conc.sqlite", "--no-progress"]  # fmt: skip
    procs = _two(f"""
import bench.evaluate.runner as runner
at_barrier(runner, "check_model")  # just before the evaluation's row is looked for
from bench.cli import main
sys.exit(main({argv!r}))
""", tmp_path)
    for proc in procs:
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert "spearman" in proc.stdout  # both print the scores
    rows = ResultsDB(tmp_path / "conc.sqlite").runs().to_dict("records")
    assert [r["status"] for r in rows] == ["finished"]
    assert sum("being scored by another process" in p.stdout for p in procs) == 1
    assert sum("reusing it (nothing scored" in p.stdout for p in procs) == 1


# ------------------------------------------------------------------------ the lease itself, SQLite and PostgreSQL
def _hold_in_turn(url: str, out: "object") -> None:
    import time

    from bench.experiment.run_lease import lease_run, release_run

    db = ResultsDB(url)
    said: list[str] = []
    held = lease_run(db, "train", "h" * 16, "simcse", said.append, "[simcse]", poll=0.02)
    start = time.monotonic()
    time.sleep(0.3)  # the work: nobody else may hold the lease meanwhile
    end = time.monotonic()
    release_run(db, held)
    out.put((start, end, said))


def _mutual_exclusion(url: str) -> None:
    from tests.processes import CONTEXT, finish

    ResultsDB(url).engine.dispose()  # created before the processes start
    out = CONTEXT.Queue()
    procs = [CONTEXT.Process(target=_hold_in_turn, args=(url, out)) for _ in range(4)]
    for p in procs:
        p.start()
    try:
        spans = sorted(out.get(timeout=120) for _ in procs)
    finally:
        assert finish(procs, timeout=60) == [0] * len(procs)
    for (_, end, _), (start, _, _) in zip(spans, spans[1:]):
        assert start >= end, spans  # one holder at a time
    waited = [said for _, _, said in spans if said]
    assert waited and all("being trained by another process (pid" in said[0] for said in waited)


def test_a_run_lease_has_one_holder_at_a_time_on_sqlite(tmp_path):
    _mutual_exclusion(str(tmp_path / "leases.sqlite"))


def test_a_run_lease_has_one_holder_at_a_time_on_postgresql():
    from tests.postgres_cluster import throwaway_postgres

    with throwaway_postgres() as url:
        _mutual_exclusion(url)


def test_an_evaluation_is_reused_while_its_data_are_unchanged(tmp_path, tiny_model_dir, capsys):
    """`bench eval` keys its row by what it computes (model weights, settings) and by its data: the same command
    reuses the finished row; changed data, or --rerun, scores a new row."""
    from bench.cli import main

    data = _setup(tmp_path)
    argv = ["eval", "--model", str(tiny_model_dir), "--suite", "sts:stsb", "--max-len", "32", "--data-dir", str(data),
            "--db", str(tmp_path / "r.sqlite"), "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    capsys.readouterr()
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "run 1 already scored this model with these settings on the same data; reusing it" in out and "spearman" in out
    assert len(ResultsDB(tmp_path / "r.sqlite").runs()) == 1

    sts = data / "sts" / "stsb-test.tsv"
    sts.write_text(sts.read_text().replace("4.8", "3.9"))
    assert main(argv) == 0
    assert f"its data file {sts} changed since; scoring a new row" in capsys.readouterr().out
    assert main(argv + ["--rerun"]) == 0
    rows = ResultsDB(tmp_path / "r.sqlite").runs()
    assert rows["status"].tolist() == ["finished"] * 3 and rows["config_hash"].nunique() == 1
