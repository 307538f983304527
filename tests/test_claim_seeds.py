"""A claim's verdict is judged and stored on all of its seeds, never on the ones finished so far: a second
`bench claim` of a file waits for the runs another process is running (at most --wait minutes), or says the claim is
incomplete and stores nothing; two `bench claim` of one file at once store one verdict, on 3 seeds; `--status`
shows each run's state and why."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading

import pytest

from bench.claim.check import load_checked
from bench.cli import main
from results_db import ResultsDB
from tests.conftest import REPO, child_process_workdir
from tests.test_claim_cli import STS, TEXTS, write_claim

pytestmark = pytest.mark.usefixtures("one_thread")

NO_ELONGATION = '[[comparator]]\nname = "no-elongation"\nmethod = "laser3-self"\nhp = ["m_mode=none"]\n'


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    return child_process_workdir(tmp_path, monkeypatch, STS, TEXTS)


def two_arm_claim(workdir, model):
    """The tiny claim with the treatment (3 seeds) and the untrained reference (1 run): 4 runs."""
    path = write_claim(workdir / "tiny.toml", model)
    text = path.read_text()
    assert NO_ELONGATION in text
    path.write_text(text.replace(NO_ELONGATION, ""))
    return path


def hold_point(db, point, pid: int) -> None:
    """The point's claim held by process `pid` on this host: as a `bench claim` (or sweep) running it holds it."""
    from bench.sweep.leases import lease_key
    from results_db.models import Meta

    with ResultsDB(db).engine.begin() as conn:
        conn.execute(Meta.__table__.insert().values(key=lease_key(point.argv), value=json.dumps(
            {"host": socket.gethostname(), "pid": pid, "at": "2026-01-01T00:00:00+00:00"})))  # fmt: skip


def stored_seeds(db) -> list[tuple[str, list[int]]]:
    return [(v["verdict"], sorted(v["run_ids"])) for v in ResultsDB(db).claim_verdicts(latest=False)]


def test_two_claims_at_once_then_a_seed_held_elsewhere_never_give_a_verdict_on_fewer_seeds(workdir, tiny_model_dir,
                                                                                          capsys, monkeypatch):  # fmt: skip
    path = two_arm_claim(workdir, tiny_model_dir)
    db = workdir / "r.sqlite"
    ResultsDB(db)
    # Two `bench claim` of one file at once: each seed trains once, and one verdict on all of them is stored.
    cmd = [sys.executable, "-m", "bench.cli", "claim", str(path), "--db", str(db), "--retries", "0", "--wait", "5"]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    both = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env) for _ in range(2)]
    outs = [p.communicate(timeout=900)[0] for p in both]
    assert [p.returncode for p in both] == [0, 0], outs
    assert all("1 vs 3" in o and "INCOMPLETE" not in o for o in outs), outs
    runs = ResultsDB(db).runs()
    assert len(runs) == 4 and set(runs["status"]) == {"finished"}  # no seed trained twice
    all_runs = sorted(runs["id"].astype(int).tolist())
    (stored,) = ResultsDB(db).claim_verdicts(latest=False)
    assert sorted(stored["run_ids"]) == all_runs
    assert sum("is stored already" in o for o in outs) == 1

    # A seed's run lost (failed on a rerun, say) and leased by a live process: the next call waits for it at most
    # --wait, then says the claim is incomplete and stores nothing (today: a 2-seed verdict, stored, exit 0).
    _, arms = load_checked(path, "cpu")
    seed2 = int(runs[(runs["method"] == "laser3-self") & (runs["seed"] == 2)]["id"].iloc[0])
    ResultsDB(db).update_run(seed2, status="failed")
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    try:
        hold_point(db, arms[0].points[-1], holder.pid)
        argv = ["claim", str(path), "--db", str(db), "--retries", "0"]
        assert main([*argv, "--wait", "0.02"]) == 1
        out = capsys.readouterr().out
        assert "waiting for them (at most 0.02 min" in out and "still being run by another process after 0.02 min" in out
        assert "INCOMPLETE" in out and "nothing stored" in out and "laser3-self seed 2: failed run" in out
        assert "1 vs 2" not in out and len(ResultsDB(db).claim_verdicts(latest=False)) == 1

        assert main(["claim", str(path), "--db", str(db), "--status"]) == 0
        status = capsys.readouterr().out
        assert "laser3-self seed 0: done run" in status and "vanilla seed 0: done run" in status
        assert "laser3-self seed 2: failed run" in status

        # The holder dies while the next call waits: that call runs the seed itself and judges on all three.
        threading.Timer(3.0, holder.kill).start()
        assert main([*argv, "--wait", "5"]) == 0
        out = capsys.readouterr().out
        assert "waiting for them" in out and "1 vs 3" in out and "INCOMPLETE" not in out
    finally:
        holder.kill()
        holder.wait()
    assert ResultsDB(db).runs()["status"].value_counts()["finished"] == 4

    # The database copied to another machine (another folder, an empty LENBENCH_CACHE: no corpus counted there yet)
    # gives the same verdicts with --no-run as where it was made.
    assert main(["claim", str(path), "--db", str(db), "--no-run"]) == 0
    here = capsys.readouterr().out
    copy = workdir / "elsewhere" / "copy.sqlite"
    copy.parent.mkdir()
    shutil.copy(db, copy)
    monkeypatch.setenv("LENBENCH_CACHE", str(workdir / "empty-cache"))
    assert main(["claim", str(path), "--db", str(copy), "--no-run"]) == 0
    there = capsys.readouterr().out
    assert "INCOMPLETE" not in there and verdicts_block(there) == verdicts_block(here)


def verdicts_block(out: str) -> str:
    return out[out.index("minus each comparator"):]
