"""The leaderboard's rows and `bench results`' rows are one partition of the runs (bench.report.pooling): two runs
are seeds of one row exactly when their configs are the same but for the seed (`pooling.row_key`). A claim, a sweep
and a plain `bench run` in one database; a seed scored at other settings than its siblings is a row of its own in
every view, named by the setting that differs."""

from __future__ import annotations

import numpy as np

from bench.experiment.run_spec import RunSpec
from bench.report.pooling import by_method, comparison_groups
from leaderboard import grouping, main_board, queries
from results_db import ItemValues, ResultsDB, ScoreRecord

FIXED = {"backbone": "minilm", "suite": "sts:stsb", "budget": "steps=30", "batch_size": 16, "max_len": 64}


def add_run(db: ResultsDB, options: dict, method: str, seed: int, sweep: str = "", shift: float = 0.0) -> int:
    """A finished row as `bench run` records it for one method and seed of these options (config and hash from
    RunSpec.configs), with 40 items around a planted mean."""
    spec = RunSpec.from_options({**FIXED, **options})
    configs = spec.configs(500)
    config, chash = configs.per_run[(method, seed)]
    trains = "train" in config
    run = db.create_run(kind="train" if trains else "eval", model=f"runs/{method}-{seed}/encoder", method=method,
                        backbone="minilm", suite="sts:stsb", config=config, config_hash=chash, seed=seed,
                        budget_label=spec.settings.budget.label() if trains else "",
                        train_corpus="wiki-offline (500 texts; packaged)" if trains else "",
                        sweep=sweep, sweep_point=f"seed={seed}" if sweep else "")  # fmt: skip
    rng = np.random.default_rng([seed, len(method), int(shift)])
    values = (50.0 + shift + rng.normal(0, 5.0, 40)).tolist()
    db.add_scores(run, [ScoreRecord("sts", "stsb", "spearman", float(np.mean(values)), 40,
                                    items=ItemValues("mean", [f"i{k}" for k in range(40)], values))])  # fmt: skip
    db.finish_run(run)
    return run


def board_rows(db: ResultsDB) -> dict[str, frozenset[int]]:
    """The main board's rows: label -> the ids of the runs it pools."""
    board = main_board.build_leaderboard(queries.suite_scores(db, "sts", ["spearman"], ["clean"]),
                                         grouping.group_runs(queries.run_list(db))).numeric()  # fmt: skip
    labels = [f"{m} · {b}" for m, b in zip(board["method"], board["budget"])]
    assert len(set(labels)) == len(labels)
    return {label: frozenset(int(i) for i in ids.split(", ")) for label, ids in zip(labels, board["run ids"])}


def results_rows(db: ResultsDB) -> list[tuple[str, frozenset[int]]]:
    """`bench results`' rows: (label, run ids) of each method label of each comparison."""
    return [(label, frozenset(ids)) for group in comparison_groups(db.runs())
            for label, ids in by_method(group, finished_only=True).items()]  # fmt: skip


def assert_one_partition(db: ResultsDB) -> dict[str, frozenset[int]]:
    """Every board row is the runs of one row key (the latest run of each seed); every `bench results` row is runs
    of one row key, and a trained one is that key's board row whole."""
    from bench.report.pooling import row_key

    board = board_rows(db)
    runs = db.runs()
    key_of = {int(r["id"]): row_key(r) for r in runs.to_dict("records")}
    board_key = {}
    for label, ids in board.items():
        (key,) = {key_of[i] for i in ids}
        mine = runs[[key_of[int(i)] == key for i in runs["id"]]]
        latest = mine.sort_values("id").drop_duplicates("seed", keep="last")
        assert ids == frozenset(int(i) for i in latest["id"]), label
        board_key[key] = ids
    assert len(board_key) == len(board)  # one row per key
    trained = {int(r["id"]) for r in runs.to_dict("records") if "train" in r["config"]}
    for label, ids in results_rows(db):
        (key,) = {key_of[i] for i in ids}
        assert key in board_key, label
        assert not ids & trained or ids == board_key[key], label
    return board


def test_a_seed_scored_at_other_settings_is_not_pooled_with_its_siblings_in_any_view(tmp_path):
    """A claim's third seed scored with fp16 embedding matrices (`--emb-dtype fp16`: part of what a run computes,
    in its config and its comparison): `bench results` keeps it apart from the two fp32 seeds; the leaderboard
    pooled all three as seeds of one row (it looked only at the method's hyper-parameters and some settings)."""
    db = ResultsDB(tmp_path / "r.sqlite")
    add_run(db, {"method": "laser3-self", "seed": 0}, "vanilla", 0)
    for seed in (0, 1):
        add_run(db, {"method": "laser3-self", "seed": seed, "no_baseline": True}, "laser3-self", seed, shift=6.0)
    add_run(db, {"method": "laser3-self", "seed": 2, "no_baseline": True, "emb_dtype": "fp16"}, "laser3-self", 2,
            shift=6.0)  # fmt: skip
    results = results_rows(db)
    assert sorted(len(ids) for label, ids in results if label == "laser3-self") == [1, 2]  # two comparisons
    board = board_rows(db)
    trained = [ids for label, ids in board.items() if label.startswith("laser3-self")]
    assert sorted(trained, key=len) == sorted([ids for label, ids in results if label == "laser3-self"], key=len)
    seeds = {label.split(" · ")[0]: len(ids) for label, ids in board.items()}
    assert seeds == {"vanilla": 1, "laser3-self (emb_dtype=—)": 2, "laser3-self (emb_dtype=fp16)": 1}
    assert_one_partition(db)


def test_a_claim_a_sweep_and_a_plain_run_are_the_same_rows_in_every_view(tmp_path):
    """A claim (3 seeds of laser3-self, its m_mode=twice variant and delete-words, each point a `bench run --seed N
    --no-baseline`, with the reference run once), a sweep over two budgets (each point with its vanilla row) and a
    plain `bench run --seeds 0,1` of simcse: the board's rows are the row keys' classes, and `bench results`' rows
    lie in them (a trained row whole)."""
    db = ResultsDB(tmp_path / "r.sqlite")
    add_run(db, {"method": "laser3-self", "seed": 0}, "vanilla", 0)
    for seed in (0, 1, 2):
        add_run(db, {"method": "laser3-self", "seed": seed, "no_baseline": True}, "laser3-self", seed, shift=6.0)
        add_run(db, {"method": "laser3-self", "seed": seed, "no_baseline": True, "hp": ["laser3-self.m_mode=twice"]},
                "laser3-self", seed, shift=4.0)  # fmt: skip
        add_run(db, {"method": "delete-words", "seed": seed, "no_baseline": True}, "delete-words", seed, shift=5.0)
    for budget in ("steps=10", "steps=20"):
        add_run(db, {"method": "simcse", "budget": budget}, "vanilla", 0, sweep="grid")
        add_run(db, {"method": "simcse", "budget": budget}, "simcse", 0, sweep="grid", shift=1.0)
    for method, seed in (("vanilla", 0), ("simcse", 0), ("simcse", 1)):
        add_run(db, {"method": "simcse", "seeds": "0,1"}, method, seed, shift=2.0)
    board = assert_one_partition(db)
    seeds = {label: len(ids) for label, ids in board.items()}
    assert seeds == {"vanilla · —": 1, "laser3-self (m_mode=random) · steps=30": 3,
                     "laser3-self (m_mode=twice) · steps=30": 3, "delete-words · steps=30": 3,
                     "simcse · steps=10": 1, "simcse · steps=20": 1, "simcse · steps=30": 2}  # fmt: skip
    # the plain run has the claim's settings (its seed 0 is the claim's first point's comparison): one comparison
    # with 5 rows (its vanilla is the claim's reference computed again), then the sweep's two points of 2 rows
    assert [len(g) for g in comparison_groups(db.runs())] == [13, 2, 2] and len(results_rows(db)) == 5 + 2 + 2


def test_settings_written_alike_still_make_two_rows():
    """A label names the settings that differ; where two values read the same ("1" and 1), the labels end with a
    hash of their settings, so two settings never share a row's name."""
    from bench.report.pooling import variant_labels

    labels = variant_labels(["simcse"] * 4, [{"lr": 1, "k": "a"}, {"lr": "1", "k": "a"}, {"lr": 1, "k": "a"}, {"k": "a"}])
    assert labels[0] == labels[2] and len(set(labels)) == 3
    assert labels[0].startswith("simcse (lr=1) #") and labels[3] == "simcse (lr=—)"
    assert variant_labels(["a", "b"], [{"x": 1}, {"x": 2}]) == ["a", "b"]  # other labels: nothing to tell apart


def test_one_model_scored_on_other_suites_by_two_commands_is_one_row(tmp_path):
    """What a run scored (its suites, its attacked variants) is not a setting of the model: `bench run --suite
    sts:stsb` then `--suite sts:stsb@elong` with the same method and settings give one row "simcse" (the board keeps
    each seed's latest score per dataset and variant), not "simcse (suite=...)" rows that split one model."""
    from bench.report.pooling import row_key

    db = ResultsDB(tmp_path / "r.sqlite")
    first = add_run(db, {"method": "simcse", "seeds": "0", "no_baseline": True}, "simcse", 0)
    second = add_run(db, {"method": "simcse", "seeds": "0", "no_baseline": True, "suite": "sts:stsb@elong",
                          "elong": "2"}, "simcse", 0, shift=3.0)  # fmt: skip
    runs = {int(r["id"]): r for r in db.runs().to_dict("records")}
    assert runs[first]["config"]["suite"] != runs[second]["config"]["suite"]
    assert row_key(runs[first]) == row_key(runs[second])
    board = board_rows(db)
    assert list(board) == ["simcse · steps=30"] and board["simcse · steps=30"] == frozenset({second})
