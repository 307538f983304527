"""`bench sweep`: a grid run by the local executor (and submitit's local executor) on a tiny model, re-run safely.

The sweep runs each point as a `bench run` child process; these tests read what the children wrote to the
database: one finished row per point, the point's config hash, its sweep name and key, nothing duplicated after a
worker is killed and the sweep run again, a failing point retried on the same row and reported.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.cli import main
from bench.runtime.errors import ConfigError
from bench.sweep.points import expand
from bench.sweep.spec import load_spec
from results_db import ResultsDB
from tests.conftest import STS_ROWS, child_process_workdir

REPO = Path(__file__).resolve().parent.parent
TEXTS = [f"Sentence {i} talks about subject {i % 6}. A second sentence adds detail number {i}." for i in range(40)]
STS = STS_ROWS[:4]

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    return child_process_workdir(tmp_path, monkeypatch, STS, TEXTS)


def write_spec(path: Path, model: Path, grid: str, steps: int = 2, extra: str = "") -> Path:
    path.write_text(f"""
[sweep]
name = "{path.stem}"
[grid]
{grid}
[fixed]
backbone = "{model}"
corpus = "corpus.txt"
budget = "steps={steps}"
batch_size = 4
max_len = 32
checkpoint_every = 5
suite = "sts:stsb"
eval_max_len = 32
data_dir = "data"
{extra}
""")
    return path


def children_of(pid: int) -> list[int]:
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if int(fields[1]) == pid:  # field 4 of /proc/PID/stat: the parent's pid
            kids.append(int(stat.parent.name))
    return kids


def test_sweep_runs_every_point_once_and_resumes_a_killed_worker(workdir, tiny_model_dir, capsys):
    spec = write_spec(workdir / "grid.toml", tiny_model_dir, 'method = ["simcse", "laser3-self"]\nseed = [0, 1]', steps=60)
    db = workdir / "r.sqlite"
    target = "method=laser3-self seed=0"
    argv = ["sweep", str(spec), "--db", str(db), "--jobs", "2", "--retries", "0", "--folder", "sw"]
    proc = subprocess.Popen([sys.executable, "-m", "bench.cli", *argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    killed = None
    deadline = time.monotonic() + 300
    try:
        while killed is None and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
            try:
                runs = ResultsDB(db, read_only=True).runs()
            except Exception:  # noqa: BLE001 - not created yet
                continue
            row = runs[(runs["sweep_point"] == target) & (runs["status"] == "running")]
            latest = Path(row.iloc[0]["output_dir"]) / "checkpoints" / "LATEST" if len(row) else None
            if latest is None or not latest.exists() or latest.read_text().strip() < "step-00000010":
                continue
            holder = int(row.iloc[0]["pid"])  # the job slot's process running the point (bench.sweep.serve)
            if holder in children_of(proc.pid):
                os.kill(holder, signal.SIGKILL)  # the worker dies mid-training: no handler runs
                killed = holder
        first_output = proc.communicate(timeout=300)[0].decode()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert killed is not None, first_output
    assert proc.returncode == 1, first_output  # one point failed, the others finished
    assert f"FAILED {target}" in first_output
    rdb = ResultsDB(db)
    runs = rdb.runs()
    assert len(runs) == 4
    assert sorted(runs[runs["status"] == "finished"]["sweep_point"]) == sorted(
        ["method=simcse seed=0", "method=simcse seed=1", "method=laser3-self seed=1"])
    killed_id = int(runs[runs["sweep_point"] == target]["id"].iloc[0])

    # the points' hashes are the ones `bench run` recorded
    points = {p.key: p for p in expand(load_spec(spec))}
    assert {r.sweep_point: r.config_hash for r in runs.itertuples()} == {k: p.config_hash for k, p in points.items()}
    assert set(runs["sweep"]) == {"grid"}

    # run the same sweep again: only the killed point runs, resumed from its checkpoint on its own row
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "running 1 point(s)" in out and "1 finished, 0 failed" in out
    after = rdb.runs()
    assert len(after) == 4 and set(after["status"]) == {"finished"}
    assert sorted(after["id"]) == sorted(runs["id"])
    consumed = rdb.get_run(killed_id)["budget_consumed"]
    assert consumed["steps"] == 60 and consumed["resumed_from_step"] >= 10
    scores = rdb.scores()
    assert not scores.duplicated(["run_id", "suite", "dataset", "variant", "metric"]).any()
    assert set(scores["run_id"]) == set(after["id"])

    # and again: nothing to do; --status shows each cell's mean over the 2 seeds with its interval
    assert main(argv) == 0
    assert "nothing to run: every point is done" in capsys.readouterr().out
    assert main(["sweep", str(spec), "--db", str(db), "--status"]) == 0
    status = capsys.readouterr().out
    assert "4 points: 4 done, 0 running, 0 failed, 0 missing" in status
    for cell in ("method=simcse", "method=laser3-self"):
        line = next(ln for ln in status.splitlines() if ln.startswith(cell + " ") and " stsb " in ln and " clean " in ln)
        values = rdb.scores(list(after[after["sweep_point"].str.startswith(cell + " ")]["id"]))
        mean = values[(values["dataset"] == "stsb") & (values["variant"] == "clean")]["value"].mean()
        assert f"{mean:.2f}" in line and " 2 " in line


def test_slurm_path_retries_a_failing_point_then_reports_it_while_the_other_finishes(workdir, tiny_model_dir, capsys):
    """`--executor slurm` through submitit's own local executor (no Slurm here): one job array, one task per point,
    the same worker code as on a cluster. sts:sts12 in the data folder has no score column: that point trains, then
    fails in evaluation on every attempt (a dataset missing altogether is refused before anything is recorded)."""
    (workdir / "data" / "sts" / "sts12.tsv").write_text("sentence1\tsentence2\nA cat.\tA dog.\n")
    spec = write_spec(workdir / "arr.toml", tiny_model_dir, 'suite = ["sts:stsb", "sts:sts12"]', extra='method = "simcse"')
    spec.write_text(spec.read_text().replace('suite = "sts:stsb"\n', ""))
    db = workdir / "s.sqlite"
    argv = ["sweep", str(spec), "--db", str(db), "--executor", "slurm", "--submitit-cluster", "local", "--wait",
            "--retries", "1", "--partition", "gpu", "--time", "0:10:00", "--slurm", "account=nlp", "--folder", "sw"]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "submitted 2 point(s) as job array" in out and "1 finished, 1 failed" in out
    assert "FAILED suite=sts:sts12 after 2 attempt(s)" in out and "sts12" in out.split("FAILED", 1)[1]
    runs = ResultsDB(db).runs().set_index("sweep_point")
    assert len(runs) == 2  # the retry resumed the failed row instead of adding one
    assert runs.loc["suite=sts:stsb", "status"] == "finished" and runs.loc["suite=sts:sts12", "status"] == "failed"
    log = (workdir / "sw" / "logs" / "suite=sts_sts12.log").read_text()
    assert log.count("\n=== ") == 2 and "attempt 2/2" in log
    assert list((workdir / "sw" / "submitit").rglob("*_result.pkl"))  # submitit's own job files, per array task
    assert main(["sweep", str(spec), "--db", str(db), "--status"]) == 0
    assert "2 points: 1 done, 0 running, 1 failed, 0 missing" in capsys.readouterr().out


def test_bad_sweep_files_are_one_clear_error(workdir, tiny_model_dir, capsys):
    spec = write_spec(workdir / "bad.toml", tiny_model_dir, 'method = ["simcse"]', extra="learning_rate = 0.1")
    assert main(["sweep", str(spec), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bench: error:") and "'learning_rate' is not a `bench run` option" in err
    with pytest.raises(ConfigError, match="set by `bench sweep` itself"):
        load_spec(write_spec(workdir / "bad2.toml", tiny_model_dir, 'method = ["simcse"]', extra='db = "x.sqlite"'))
    with pytest.raises(ConfigError, match="unknown method|not a registered|simcsx"):
        expand(load_spec(write_spec(workdir / "bad3.toml", tiny_model_dir, 'method = ["simcsx"]')))
    with pytest.raises(ConfigError, match="same config hash"):  # the device does not change the result
        expand(load_spec(write_spec(workdir / "bad4.toml", tiny_model_dir, 'method = ["simcse"]\ndevice = ["cpu", "meta"]')))
    assert not (workdir / "lenbench.sqlite").exists()


def test_every_shipped_sweep_file_expands_offline(capsys, monkeypatch):
    import bench.data.corpus as corpus_module

    def no_reading(*args, **kwargs):
        raise AssertionError("a sweep hash read a training corpus")

    for reader in ("load_corpus", "wiki_offline_articles", "read_lines", "read_beir_documents"):
        monkeypatch.setattr(corpus_module, reader, no_reading)
    files = sorted((REPO / "sweeps").glob("*.toml"))
    assert len(files) >= 6
    for path in files:
        spec = load_spec(path)
        points = expand(spec)  # every point through RunSpec (methods, --hp, budget...), no corpus read
        assert points and len({p.key for p in points}) == len(points)
        # no corpus counted on this machine yet (a fresh cache): a trained point's hash waits for a run
        assert all(p.config_hash is None and "not counted" in p.hash_note for p in points if p.method != "vanilla")
        cells = {p.cell for p in points}
        for pub in spec.published:  # every published number belongs to a cell of its file
            matching = [p for p in points if all(str({**p.labels, "method": p.method}.get(k)) == str(v) for k, v in pub.cell.items())]
            assert matching, f"{path.name}: published cell {pub.cell} matches no point"
            assert {p.cell for p in matching} <= cells
        if path.stem not in ("smoke", "crop-scratch-cpu"):  # CPU-scale runs show a direction, not a paper's number
            assert spec.published, f"{path.name} carries no published number"
    assert main(["sweep", str(REPO / "sweeps" / "laser3-table2.toml"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.count("bench run ") >= 2 and "--corpus wiki1m" in out and "--suite beir14" in out
    monkeypatch.undo()
    corpus_module.load_corpus("wiki-offline", limit=2000)  # what a smoke point's run loads: its count is noted
    points = expand(load_spec(REPO / "sweeps" / "smoke.toml"))
    assert all(p.config_hash and p.config_hash == p.spec.configs(2000).per_method[p.method][1] for p in points)


def test_status_compares_cells_over_seeds_beside_the_papers_number(tmp_path):
    """Scores written by hand for 2 cells x 3 seeds: the comparison's mean, t-interval and BEIR-style average (the
    cqadupstack forums count once, through their mean row) against values computed here."""
    from scipy import stats

    from bench.report.stats import mean_ci
    from bench.sweep.report import comparison_table
    from bench.sweep.state import point_states
    from results_db import ScoreRecord

    spec_path = write_spec(tmp_path / "cmp.toml", Path("minilm"), 'method = ["simcse", "laser3-self"]\nseed = [0, 1, 2]',
                           extra="""[[published]]
cell = { method = "laser3-self" }
suite = "beir"
average_of = ["scifact", "nfcorpus", "cqadupstack"]
metric = "ndcg_at_10"
value = 18.16
source = "LA(SER)^3 Table 2"
""")
    spec = load_spec(spec_path)
    points = expand(spec, compute_hash=False)  # no hash: rows are matched by sweep name and point key
    db = ResultsDB(tmp_path / "cmp.sqlite")
    values = {}
    for p in points:
        if p.key == "method=simcse seed=2":
            continue  # not run yet
        run_id = db.create_run(kind="train", model="m", method=p.method, seed=p.seed, sweep="cmp", sweep_point=p.key)
        base = 10.0 * (p.method == "laser3-self") + p.seed
        per = {"scifact": base + 1, "nfcorpus": base + 2, "cqadupstack": base + 6, "cqadupstack-gis": 99.0}
        db.add_scores(run_id, [ScoreRecord("beir", d, "ndcg_at_10", v) for d, v in per.items()])
        db.finish_run(run_id)
        values.setdefault(p.cell, []).append((base + 1 + base + 2 + base + 6) / 3)
    states = point_states(db.runs(), points)
    assert [s.state for s in states].count("done") == 5 and [s.state for s in states].count("missing") == 1
    table = comparison_table(db, spec, states)
    rows = {tuple(ln.split()[:3]): ln for ln in table.splitlines()[1:]}
    laser = rows[("method=laser3-self", "beir", "average")]
    ci = mean_ci(values["method=laser3-self"])
    half = stats.t.ppf(0.975, 2) * stats.tstd(values["method=laser3-self"]) / 3 ** 0.5
    assert ci.mean == pytest.approx(14.0) and ci.high - ci.mean == pytest.approx(half)  # (13 + 14 + 15) / 3
    assert f"{ci.mean:.2f}" in laser and f"[{ci.low:.2f}, {ci.high:.2f}]" in laser
    assert "18.16" in laser and "LA(SER)^3 Table 2" in laser
    simcse = rows[("method=simcse", "beir", "average")]
    assert " 2 " in simcse and "3.50" in simcse and "18.16" not in simcse  # 2 seeds done; no paper number for it
    assert "n/a (2 seeds: seed variance not estimated)" in simcse  # no t(1) interval over 2 seeds
    assert "cqadupstack-gis" in table  # the forum row itself is still listed, but not averaged


def test_resubmitting_skips_points_whose_slurm_job_is_still_queued(tmp_path):
    """Only the scheduler knows a job that has not started: the sweep's record of its submissions, asked of Slurm."""
    from types import SimpleNamespace

    from bench.sweep.executors import record_submission, still_queued

    spec = write_spec(tmp_path / "q.toml", Path("minilm"), 'method = ["simcse"]\nseed = [0, 1, 2]')
    points = expand(load_spec(spec), compute_hash=False)
    record_submission(tmp_path, [SimpleNamespace(job_id=f"77_{i}") for i in range(3)], points)
    states = {"77_0": "COMPLETED", "77_1": "PENDING", "77_2": "FAILED"}
    assert still_queued(points, tmp_path, job_state=lambda _folder, job: states[job]) == {"method=simcse seed=1": "77_1"}
    assert still_queued(points, tmp_path / "elsewhere", job_state=lambda *_: "PENDING") == {}


def test_random_backbone_written_by_points_starting_together_is_whole(tmp_path, reference_dir):
    """A sweep's points share --out/backbones: each sees no folder or a complete one (measured before the fix: one
    of two points failed with 'no file named model.safetensors' and only its retry passed)."""
    from concurrent.futures import ThreadPoolExecutor

    from transformers import AutoModel

    from bench.encode.backbones import make_random_bert

    target = tmp_path / "backbones" / "random-bert-tiny"
    (target).mkdir(parents=True)  # a partial folder left by an older, non-atomic write
    (target / "config.json.partial").write_text("{}")
    seen_partial, writing = [], True

    def watch() -> None:  # what a point starting meanwhile would see
        while writing:
            if (target / "config.json").exists() and not (target / "model.safetensors").exists():
                seen_partial.append(True)

    with ThreadPoolExecutor(5) as pool:
        watcher = pool.submit(watch)
        folders = list(pool.map(lambda _: make_random_bert(target, size="tiny", seed=0), range(4)))
        writing = False
        watcher.result()
    assert folders == [target] * 4 and not seen_partial
    assert AutoModel.from_pretrained(target).config.num_hidden_layers == 2
    assert sorted(p.name for p in target.parent.iterdir()) == ["random-bert-tiny"]  # no temp folder left behind


def test_status_flags_a_limit_subset_and_keeps_it_from_the_papers_number(tmp_path):
    """A point scored with --limit shows its subset beside the dataset (its average too) and is not set beside the paper's full-set value."""
    from bench.sweep.report import comparison_table
    from bench.sweep.state import point_states
    from results_db import ScoreRecord

    spec_path = write_spec(tmp_path / "lim.toml", Path("minilm"), 'method = ["simcse"]\nseed = [0]',
                           extra="""[[published]]
cell = { method = "simcse" }
suite = "beir"
average_of = ["scifact", "nfcorpus"]
metric = "ndcg_at_10"
value = 18.16
source = "paper"
""")
    spec = load_spec(spec_path)
    (point,) = expand(spec, compute_hash=False)
    db = ResultsDB(tmp_path / "lim.sqlite")
    run_id = db.create_run(kind="train", model="m", method=point.method, seed=point.seed, sweep="lim", sweep_point=point.key)
    db.add_scores(run_id, [ScoreRecord("beir", d, "ndcg_at_10", v, info={"limit": 20}) for d, v in (("scifact", 1.0), ("nfcorpus", 3.0))])
    db.finish_run(run_id)
    table = comparison_table(db, spec, point_states(db.runs(), [point]))
    rows = [ln for ln in table.splitlines()[1:] if not ln.startswith("note: ")]
    datasets = [re.split(r"\s{2,}", ln)[2] for ln in rows]  # a row without a limit mode: its items were the first 20
    assert sorted(datasets) == ["average (first 20)", "nfcorpus (first 20)", "scifact (first 20)"], table
    assert "18.16" not in table


def test_a_point_whose_corpus_changed_is_never_done_by_its_label(workdir, tiny_model_dir, capsys):
    """The corpus grew from 40 to 120 texts after the point finished: its hash is unknown until it runs, so the
    sweep does not call it done by its sweep label; it trains again on the corpus as it is (a new row, a new hash),
    and the run of the old corpus stays as it was."""
    spec = write_spec(workdir / "grow.toml", tiny_model_dir, 'method = ["simcse"]')
    db = workdir / "r.sqlite"
    argv = ["sweep", str(spec), "--db", str(db), "--retries", "0", "--folder", "sw"]
    assert main(argv) == 0
    first = ResultsDB(db).runs()
    assert first["status"].tolist() == ["finished"] and first["config"].iloc[0]["corpus_texts"] == 40
    (workdir / "corpus.txt").write_text("\n".join(TEXTS * 3) + "\n")
    capsys.readouterr()
    assert main(["sweep", str(spec), "--db", str(db), "--status"]) == 0
    assert "1 points: 0 done, 0 running, 0 failed, 1 missing" in capsys.readouterr().out
    assert main(argv) == 0
    assert "nothing to run" not in capsys.readouterr().out
    runs = ResultsDB(db).runs()
    assert runs["status"].tolist() == ["finished", "finished"]
    assert [c["corpus_texts"] for c in runs["config"]] == [40, 120] and runs["config_hash"].nunique() == 2


def test_a_point_whose_corpus_was_edited_at_the_same_length_is_not_done(workdir, tiny_model_dir, capsys):
    """The corpus file is edited after the point finished, with the same number of lines and bytes and its
    modification time put back: the point's hash (which includes the file's content digest) is no longer the
    finished run's, so the sweep does not call it done and bench run does not reuse the old run."""
    spec = write_spec(workdir / "edit.toml", tiny_model_dir, 'method = ["simcse"]')
    db = workdir / "r.sqlite"
    argv = ["sweep", str(spec), "--db", str(db), "--retries", "0", "--folder", "sw"]
    assert main(argv) == 0
    corpus = workdir / "corpus.txt"
    before = corpus.stat()
    corpus.write_text("\n".join(t.replace("talks", "walks") for t in TEXTS) + "\n")
    os.utime(corpus, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert corpus.stat().st_size == before.st_size and corpus.stat().st_mtime_ns == before.st_mtime_ns
    capsys.readouterr()
    assert main(["sweep", str(spec), "--db", str(db), "--status"]) == 0
    assert "1 points: 0 done, 0 running, 0 failed, 1 missing" in capsys.readouterr().out
    assert main(argv) == 0
    assert "nothing to run" not in capsys.readouterr().out
    runs = ResultsDB(db).runs()
    assert runs["status"].tolist() == ["finished", "finished"]
    assert [c["corpus_texts"] for c in runs["config"]] == [40, 40] and runs["config_hash"].nunique() == 2
    first, second = (c["corpus_sha256"] for c in runs["config"])
    assert first != second and len(first) == 64
    capsys.readouterr()
    assert main(["sweep", str(spec), "--db", str(db), "--status"]) == 0  # noted by the load: known, and done
    assert "1 points: 1 done, 0 running, 0 failed, 0 missing" in capsys.readouterr().out


def test_a_point_is_leased_atomically_once_among_processes_that_race_for_it(tmp_path):
    """Six processes lease one point at the same moment: exactly one gets it; a lease whose process has ended is
    taken over by exactly one of the next to ask."""
    import json
    from concurrent.futures import ProcessPoolExecutor

    db_path = tmp_path / "r.sqlite"
    ResultsDB(db_path).engine.dispose()
    with ProcessPoolExecutor(6) as pool:
        won = list(pool.map(_lease_once, [str(db_path)] * 6))
    assert sum(won) == 1
    from bench.sweep.leases import Lease, lease, lease_key
    from results_db.models import Meta
    from sqlalchemy import update

    db = ResultsDB(db_path)
    with db.engine.begin() as conn:  # the winner's process is gone (a pid that cannot exist)
        conn.execute(update(Meta).where(Meta.key == lease_key(("--method", "x"))).values(
            value=json.dumps({"host": __import__("socket").gethostname(), "pid": 2**22 + 7, "at": "2020-01-01T00:00:00+00:00"})))
    with ProcessPoolExecutor(6) as pool:
        won = list(pool.map(_lease_once, [str(db_path)] * 6))
    assert sum(won) == 1
    assert isinstance(lease(db, ("--method", "x")), Lease)  # that pool's processes are gone too: stale, taken over


def _lease_once(db_path: str) -> bool:
    import time

    from bench.sweep.leases import Lease, lease

    db = ResultsDB(db_path)
    time.sleep(0.2)
    got = lease(db, ("--method", "x"))
    time.sleep(0.5)  # hold it while the others try
    return isinstance(got, Lease)


def test_a_second_sweep_skips_a_point_another_sweep_has_leased(workdir, tiny_model_dir, capsys):
    """A live `bench sweep` holds the point's lease (here: a sleeping process stands in for it): the second sweep
    starts nothing for it and says so; once the holder is gone, the next sweep runs it."""
    import json
    import socket

    from bench.sweep.leases import lease_key
    from results_db.models import Meta

    spec = write_spec(workdir / "lease.toml", tiny_model_dir, 'method = ["simcse"]')
    db = workdir / "r.sqlite"
    (point,) = expand(load_spec(spec))
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        rdb = ResultsDB(db)
        with rdb.engine.begin() as conn:
            conn.execute(Meta.__table__.insert().values(key=lease_key(point.argv), value=json.dumps(
                {"host": socket.gethostname(), "pid": holder.pid, "at": "2026-01-01T00:00:00+00:00"})))
        argv = ["sweep", str(spec), "--db", str(db), "--retries", "0", "--folder", "sw"]
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert f"held by another sweep (pid {holder.pid} on {socket.gethostname()})" in out
        assert rdb.runs().empty  # nothing trained, no row
    finally:
        holder.kill()
        holder.wait()
    assert main(argv) == 0
    runs = ResultsDB(db).runs()
    assert runs["status"].tolist() == ["finished"]
    with rdb.engine.connect() as conn:  # released when the point ended
        assert conn.execute(Meta.__table__.select().where(Meta.key == lease_key(point.argv))).first() is None


def test_rerun_runs_a_done_point_again_in_a_new_row(workdir, tiny_model_dir, capsys):
    """`bench sweep --rerun` (after a code change that kept the version numbers): a done point trains and scores again
    through `bench run --rerun`, in a new row with the same hash; the old row is kept."""
    spec = write_spec(workdir / "again.toml", tiny_model_dir, 'method = ["simcse"]')
    db = workdir / "r.sqlite"
    argv = ["sweep", str(spec), "--db", str(db), "--retries", "0", "--folder", "sw"]
    assert main(argv) == 0
    assert main(argv) == 0
    assert "nothing to run: every point is done" in capsys.readouterr().out
    assert main([*argv, "--rerun"]) == 0
    out = capsys.readouterr().out
    assert "--rerun: 1 point(s) trained and scored again" in out, out
    runs = ResultsDB(db).runs()
    assert runs["status"].tolist() == ["finished", "finished"] and runs["config_hash"].nunique() == 1, out
    assert set(ResultsDB(db).scores()["run_id"]) == set(runs["id"])


def test_status_reads_every_cell_against_the_vanilla_baseline(tmp_path):
    """The untrained backbone is the row a sweep's cells are read against: its own `vanilla` points where the grid
    has them, else a finished row of this database with the hash `bench run --method vanilla` records under the
    points' settings; without one, a note says how to add it."""
    from bench.experiment.run_spec import RunSpec
    from bench.sweep.report import comparison_table
    from bench.sweep.state import point_states
    from results_db import ScoreRecord

    def table_rows(table: str) -> dict[str, list[str]]:
        lines = [re.split(r"\s{2,}", ln) for ln in table.splitlines()]
        return {r[0]: dict(zip(lines[0], r)) for r in lines[1:] if not r[0].startswith("note: ")}

    def record(db, point, value, **fields):  # noqa: ANN001, ANN202
        run_id = db.create_run(kind="train", model="m", method=point.method, seed=point.seed, **fields)
        db.add_scores(run_id, [ScoreRecord("sts", "stsb", "spearman", value)])
        db.finish_run(run_id)

    # 1. the grid has vanilla: it comes first and every other cell says how far it is from it
    spec = load_spec(write_spec(tmp_path / "own.toml", Path("minilm"), 'method = ["simcse", "vanilla"]\nseed = [0]'))
    points = expand(spec, compute_hash=False)
    db = ResultsDB(tmp_path / "own.sqlite")
    for p, value in zip(points, (71.5, 70.0)):
        record(db, p, value, sweep="own", sweep_point=p.key)
    table = comparison_table(db, spec, point_states(db.runs(), points))
    rows = table_rows(table)
    assert list(rows) == ["method=vanilla", "method=simcse"], table
    assert rows["method=simcse"]["vs vanilla"] == "1.50"
    assert "1.50" not in " ".join(rows["method=vanilla"].values())  # the baseline itself: blank

    # 2. no vanilla point: the untrained row of the same settings, run outside the sweep, is found by its hash
    spec = load_spec(write_spec(tmp_path / "other.toml", Path("minilm"), 'method = ["simcse"]\nseed = [0]'))
    (point,) = expand(spec, compute_hash=False)
    db = ResultsDB(tmp_path / "other.sqlite")
    record(db, point, 71.5, sweep="other", sweep_point=point.key)
    states = point_states(db.runs(), [point])
    assert "no vanilla baseline in this database" in comparison_table(db, spec, states)  # 3. none yet: the note
    options = {**point.options, "method": "vanilla", "no_baseline": True}
    _, chash = RunSpec.from_options(options).configs(0).per_method["vanilla"]
    run_id = db.create_run(kind="train", model="m", method="vanilla", seed=0, config_hash=chash)
    db.add_scores(run_id, [ScoreRecord("sts", "stsb", "spearman", 60.25)])
    db.finish_run(run_id)
    rows = table_rows(comparison_table(db, spec, point_states(db.runs(), [point])))
    assert list(rows) == ["method=vanilla (baseline)", "method=simcse"]
    assert rows["method=vanilla (baseline)"]["mean"] == "60.25" and rows["method=simcse"]["vs vanilla"] == "11.25"
