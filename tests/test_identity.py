"""One identity for runs and evaluations, over resolved settings (bench.experiment.identity): `auto` is resolved
before hashing, so a CPU run (fp32) and a CUDA run of the same command never share a config hash; rows a database
of the previous schema (6) holds are re-keyed from their recorded runtime (results_db.migrations, schema 7) and are
found again by the same command."""

from __future__ import annotations

import json
import shlex
import shutil
import sqlite3
from pathlib import Path

import pytest

RELEASE = Path(__file__).resolve().parent / "data" / "release" / "lenbench-schema6.sqlite"
COMMAND = ["--method", "simcse", "--suite", "heldout", "--budget", "steps=2", "--precision", "auto"]


def _hashes(monkeypatch, device: str, argv: list[str] = COMMAND) -> dict:
    """The rows' (config, hash) of `bench run ARGV`, with `auto` and the default device resolved as on `device`."""
    import bench.runtime.device as policy
    from bench.cli import build_parser
    from bench.experiment.run_spec import RunSpec

    monkeypatch.setattr(policy, "default_device", lambda: device)  # a CUDA machine, simulated
    spec = RunSpec.from_args(build_parser().parse_args(["run", *argv]))
    configs = spec.configs(100)
    return {**configs.per_run, "comparison": configs.comparison}


def test_a_cpu_run_and_a_cuda_run_of_the_same_command_never_share_a_hash(monkeypatch):
    from bench.runtime.device import AUTO_PRECISION, TRAIN_AUTO_PRECISION

    cpu, cuda = _hashes(monkeypatch, "cpu"), _hashes(monkeypatch, "cuda")
    assert cpu["comparison"] != cuda["comparison"]
    for row in (("vanilla", 0), ("simcse", 0)):
        assert cpu[row][1] != cuda[row][1], row
    (config, _), (cuda_config, _) = cpu[("simcse", 0)], cuda[("simcse", 0)]
    assert config["train"]["precision"] == "fp32" and "precision" not in config["eval"]  # fp32: as rows always hashed
    assert cuda_config["train"]["precision"] == TRAIN_AUTO_PRECISION["cuda"]
    assert cuda_config["eval"]["precision"] == AUTO_PRECISION["cuda"]
    # the same computation is the same row: fp32 asked on a GPU is the CPU's auto (the device is not in the hash)
    asked = _hashes(monkeypatch, "cuda", [*COMMAND, "--precision", "fp32"])
    assert asked[("simcse", 0)][1] == cpu[("simcse", 0)][1] and asked["comparison"] == cpu["comparison"]


def test_a_row_recorded_by_a_cuda_run_is_not_found_by_the_cpu_command(monkeypatch, tmp_path):
    from results_db import ResultsDB

    cuda_config, cuda_hash = _hashes(monkeypatch, "cuda")[("simcse", 0)]
    db = ResultsDB(tmp_path / "r.sqlite")
    db.create_run(kind="train", model="m", method="simcse", config=cuda_config, config_hash=cuda_hash, seed=0,
                  status="finished", runtime={"device": "cuda", "precision": "fp16", "train_precision": "bf16"})  # fmt: skip
    _, cpu_hash = _hashes(monkeypatch, "cpu")[("simcse", 0)]
    runs = db.runs()
    assert list(runs["config_hash"]) == [cuda_hash] and cpu_hash not in set(runs["config_hash"])


def _stored(path: Path) -> list[tuple]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT id, method, seed, config, config_hash, command FROM runs ORDER BY id").fetchall()
    return [(i, m, s, json.loads(c), h, cmd) for i, m, s, c, h, cmd in rows]


def test_a_database_of_the_previous_release_is_re_keyed_and_its_rows_found_again(tmp_path):
    """The fixture was written by lenbench at schema 6 (`bench run --method simcse --backbone random-bert-tiny
    --budget steps=2 --batch-size 4 --max-len 32 --corpus-limit 200 --suite sts:stsb --limit 20` on a CPU), whose
    hashes left the resolved precision out (train.precision "auto"). After the migration, the same command computes
    every stored hash and the stored comparison, so `bench run` finds and reuses the rows."""
    from bench.cli import build_parser
    from bench.experiment.run_spec import RunSpec
    from results_db import ResultsDB

    db_path = tmp_path / "release.sqlite"
    shutil.copy(RELEASE, db_path)
    before = _stored(db_path)
    invoked = before[0][5].split("   # from: ")[1]
    spec = RunSpec.from_args(build_parser().parse_args(shlex.split(invoked)[1:]))
    corpus_texts = next(c["corpus_texts"] for *_, c, _, _ in before if "corpus_texts" in c)
    configs = spec.configs(corpus_texts)
    assert {h for *_, h, _ in before}.isdisjoint(h for _, h in configs.per_run.values())  # not found before it
    ResultsDB(db_path, create=False).engine.dispose()  # opening it migrates
    after = _stored(db_path)
    assert [r[:3] for r in after] == [r[:3] for r in before]  # every row kept
    for run_id, method, seed, config, chash, _ in after:
        expected_config, expected_hash = configs.per_run[(method, seed)]
        assert chash == expected_hash and config["comparison"] == configs.comparison, run_id
        assert {k: v for k, v in config.items() if k not in ("curves", "in_domain")} == expected_config, run_id
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == "8"


def test_the_migration_keys_a_cuda_row_by_what_it_ran_at(monkeypatch, tmp_path):
    """A row a CUDA run wrote at schema 6 (its hash left `auto` out; its runtime says fp16 scoring and bf16
    training) gets the hash today's CUDA run of the same command computes, never the CPU's."""
    from results_db import ResultsDB
    from results_db.migrations import _hash

    db_path = tmp_path / "release.sqlite"
    shutil.copy(RELEASE, db_path)
    with sqlite3.connect(db_path) as conn:  # the fixture's rows, as a CUDA machine would have written them
        for run_id, config, runtime in conn.execute("SELECT id, config, runtime FROM runs").fetchall():
            runtime = {**json.loads(runtime), "device": "cuda", "precision": "fp16", "train_precision": "bf16"}
            conn.execute("UPDATE runs SET runtime = ?, config_hash = ? WHERE id = ?",
                         (json.dumps(runtime), _hash(json.loads(config)), run_id))  # fmt: skip
    ResultsDB(db_path, create=False).engine.dispose()
    after = {m: (c, h) for _, m, _, c, h, _ in _stored(db_path)}
    invoked = _stored(db_path)[0][5].split("   # from: ")[1]
    argv = shlex.split(invoked)[2:]
    corpus_texts = after["simcse"][0]["corpus_texts"]
    import bench.runtime.device as policy
    from bench.cli import build_parser
    from bench.experiment.run_spec import RunSpec

    for device, same in (("cuda", True), ("cpu", False)):
        monkeypatch.setattr(policy, "default_device", lambda d=device: d)
        configs = RunSpec.from_args(build_parser().parse_args(["run", *argv])).configs(corpus_texts)
        for method in ("vanilla", "simcse"):
            assert (after[method][1] == configs.per_run[(method, 0)][1]) is same, (device, method)
    assert after["simcse"][0]["eval"]["precision"] == "fp16" and after["simcse"][0]["train"]["precision"] == "bf16"


@pytest.mark.parametrize("asked", ["fp32", "bf16"])
def test_an_asked_precision_hashes_as_it_runs(monkeypatch, asked):
    """An asked fp32 is the CPU's auto (the same computation); an asked bf16 is bf16 on any device."""
    cpu = _hashes(monkeypatch, "cpu")
    mine = _hashes(monkeypatch, "cpu", [*COMMAND, "--precision", asked])
    assert (mine[("simcse", 0)][1] == cpu[("simcse", 0)][1]) is (asked == "fp32")
