"""`bench results` reads a claim's (or any sweep's) runs as one comparison: each point is a `bench run --seed N`, so
each seed has a comparison hash of its own, yet they are seeds of one comparison, against the untrained reference
that ran with seed 0."""

from __future__ import annotations

import numpy as np

from bench.cli import main
from bench.experiment.run_spec import RunSpec
from bench.report.pooling import comparison_groups
from results_db import ItemValues, ResultsDB, ScoreRecord

FIXED = {"backbone": "minilm", "suite": "sts:stsb", "budget": "steps=30", "batch_size": 16, "max_len": 64,
         "no_baseline": True}  # fmt: skip
SHIFT = {"vanilla": 0.0, "laser3-self": 6.0, "delete-words": 5.5}  # planted effects, scores x100


def point_run(db: ResultsDB, method: str, seed: int) -> int:
    """A finished row as the claim's point `bench run --method METHOD --seed SEED --no-baseline` records it (its
    config and hash from RunSpec.configs, as `bench run` computes them), with 60 items around its planted mean."""
    config, chash = RunSpec.from_options({**FIXED, "method": method, "seed": seed}).configs(500).per_run[(method, seed)]
    run = db.create_run(kind="train" if method != "vanilla" else "eval", model=f"runs/{method}-{seed}", method=method,
                        backbone="minilm", suite="sts:stsb", config=config, config_hash=chash, seed=seed,
                        sweep="claim-tiny-cpu", sweep_point=f"variant={method} seed={seed}")  # fmt: skip
    rng = np.random.default_rng([seed, len(method)])
    values = (50.0 + SHIFT[method] + rng.normal(0, 1.0) + rng.normal(0, 5.0, 60)).tolist()
    db.add_scores(run, [ScoreRecord("sts", "stsb", "spearman", float(np.mean(values)), 60,
                                    items=ItemValues("mean", [f"i{k}" for k in range(60)], values))])  # fmt: skip
    db.finish_run(run)
    return run


def claim_db(path, seeds=(0, 1, 2)) -> ResultsDB:
    db = ResultsDB(path)
    point_run(db, "vanilla", 0)
    for seed in seeds:
        for method in ("laser3-self", "delete-words"):
            point_run(db, method, seed)
    return db


def test_a_claims_seeds_are_one_comparison_against_its_reference(tmp_path, capsys):
    db = claim_db(tmp_path / "r.sqlite")
    runs = db.runs()
    assert runs["config"].map(lambda c: c["comparison"]).nunique() == 3  # one comparison hash per --seed
    (group,) = comparison_groups(runs)
    assert len(group) == 7
    assert main(["results", "--db", str(tmp_path / "r.sqlite")]) == 0
    out = capsys.readouterr().out
    assert out.count("comparison ") == 1 and "difference vs vanilla" in out
    diffs = [ln.split() for ln in out.splitlines() if ln.lstrip().startswith("sts ") and "seeds+items" in ln]
    assert sorted(row[4] for row in diffs) == ["delete-words", "laser3-self"]  # each pooled over its 3 seeds
    assert all("(3 seeds)" in " ".join(row) for row in diffs)


def test_the_leaderboard_pools_the_same_runs_as_seeds(tmp_path):
    """The board groups by method and settings, bench results by comparison_groups: for a claim's runs they agree."""
    from bench.report.pooling import by_method
    from leaderboard import grouping, main_board, queries

    db = claim_db(tmp_path / "r.sqlite")
    (group,) = comparison_groups(db.runs())
    pooled = {label: len(ids) for label, ids in by_method(group, finished_only=True).items()}
    board = main_board.build_leaderboard(queries.suite_scores(db, "sts", ["spearman"], ["clean"]),
                                         grouping.group_runs(queries.run_list(db))).numeric()  # fmt: skip
    assert dict(zip(board["method"], board["seeds"].astype(int))) == pooled == {"vanilla": 1, "laser3-self": 3,
                                                                                 "delete-words": 3}  # fmt: skip
