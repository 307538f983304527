"""A run's identity includes the version of the code that trained it (issue 30: a result is never shown unless it was
computed from exactly the inputs it names): the shared training recipe's version and the method's own version are in
its config and config hash, so a finished run of other recipe code is neither reused nor pooled with new seeds, and
`--rerun` trains and scores a finished run again in a new row."""

from __future__ import annotations

import pytest

from bench.cli import main
from results_db import ResultsDB
from tests.test_accumulate import setup  # noqa: F401 - the fixture: an embedding bag, 5 steps, a tiny STS file

pytestmark = pytest.mark.usefixtures("one_thread")


def _spec_and_configs(argv):
    from bench.cli import build_parser
    from bench.data.corpus import load_corpus
    from bench.experiment.run_spec import RunSpec

    spec = RunSpec.from_args(build_parser().parse_args(argv))
    corpus = load_corpus(spec.corpus)
    return spec, corpus, spec.configs(len(corpus.texts), corpus.digest)


def test_the_recipe_and_method_versions_are_in_the_config_its_hash_and_the_comparison(setup):  # noqa: F811
    from bench.train.config import TRAIN_RECIPE_VERSION
    from bench.train.registry import get_method

    base, _ = setup
    spec, corpus, now = _spec_and_configs(base)
    legacy = spec.configs(len(corpus.texts), corpus.digest, train_recipe=1)
    config, chash = now.per_run[("simcse", 0)]
    assert TRAIN_RECIPE_VERSION >= 2 and config["train_recipe"] == TRAIN_RECIPE_VERSION
    assert config["method_version"] == get_method("simcse").version == 1
    old_config, old_hash = legacy.per_run[("simcse", 0)]
    assert "train_recipe" not in old_config and "method_version" not in old_config
    assert old_hash != chash and legacy.comparison != now.comparison  # never reused, never pooled
    # the untrained backbone trains nothing: no training versions in its config (its comparison still differs)
    assert "train_recipe" not in now.per_run[("vanilla", 0)][0] and "method_version" not in now.per_run[("vanilla", 0)][0]


def test_a_finished_run_of_an_older_recipe_is_not_reused_nor_pooled(setup, capsys):  # noqa: F811
    from bench.runtime.provenance import config_hash

    base, db = setup
    argv = [*base, "--no-baseline"]
    assert main(argv) == 0
    capsys.readouterr()
    rdb = ResultsDB(db)
    (old_id,) = rdb.runs()["id"].tolist()
    # the row as the previous training code wrote it: recipe 1 (no versions recorded), its hash and comparison
    spec, corpus, _ = _spec_and_configs(argv)
    old_config, old_hash = spec.configs(len(corpus.texts), corpus.digest, train_recipe=1).per_run[("simcse", 0)]
    rdb.update_run(old_id, config=old_config, config_hash=old_hash)

    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "[simcse] trained 5 steps" in out and "reusing it" not in out
    assert "pooled in" not in out  # the older row is no seed of this comparison
    runs = ResultsDB(db).runs().set_index("id")
    assert len(runs) == 2 and (runs["status"] == "finished").all()
    new_id = max(runs.index)
    assert runs.loc[old_id, "config_hash"] == old_hash  # the old row is kept as it was
    assert runs.loc[new_id, "config"]["comparison"] != runs.loc[old_id, "config"]["comparison"]

    from bench.report.pooling import comparison_runs

    assert comparison_runs(ResultsDB(db).runs(), runs.loc[new_id, "config"]["comparison"]) == {"simcse": [new_id]}
    # the leaderboard: two rows, never one row of two seeds
    from leaderboard import grouping, main_board, queries

    board_runs = grouping.group_runs(queries.run_list(ResultsDB(db)))
    frame = main_board.build_leaderboard(queries.suite_scores(ResultsDB(db), "sts", ["spearman"], ["clean"]),
                                         board_runs).numeric()  # fmt: skip
    simcse = frame[frame["method"].str.startswith("simcse")]
    assert len(simcse) == 2 and (simcse["seeds"].astype(int) == 1).all(), list(frame["method"])

    # a row of another version of the method itself: same comparison, but never reused nor pooled as a seed
    other = {**runs.loc[new_id, "config"], "method_version": 2}
    rdb.update_run(new_id, config=other, config_hash=config_hash(other))
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "[simcse] trained 5 steps" in out and "reusing it" not in out
    runs = ResultsDB(db).runs()
    newest = int(runs["id"].max())
    pooled = comparison_runs(runs, other["comparison"])
    assert sorted(pooled.values()) == [[new_id], [newest]]  # two labels, one run each: not two seeds of one


def test_rerun_trains_and_scores_a_finished_run_again_in_a_new_row(setup, capsys):  # noqa: F811
    base, db = setup
    argv = [*base, "--no-baseline"]
    assert main(argv) == 0
    capsys.readouterr()
    (first,) = ResultsDB(db).runs()["id"].tolist()
    assert main([*argv, "--rerun"]) == 0
    out = capsys.readouterr().out
    assert f"--rerun: run {first} already finished with these settings; training and scoring again" in out
    assert "[simcse] trained 5 steps" in out
    runs = ResultsDB(db).runs().set_index("id")
    assert len(runs) == 2 and (runs["status"] == "finished").all()
    assert runs["config_hash"].nunique() == 1  # the same identity: the old row kept, the newest one pooled
    second = max(runs.index)
    from bench.report.pooling import comparison_runs

    assert comparison_runs(ResultsDB(db).runs(), runs.loc[second, "config"]["comparison"]) == {"simcse": [second]}
    scores = ResultsDB(db).scores([first, second])
    assert set(scores["run_id"]) == {first, second}  # scored again; the old row's scores kept


def test_a_new_row_never_takes_another_rows_folder(tmp_path):
    """Two commands of one comparison started in the same second share --out/STAMP-COMPARISON: a new row (a re-run,
    or another method version) gets a folder of its own, never the finished row's encoder and TRAINED marker."""
    from bench.experiment.run_files import new_run_folder

    first = new_run_folder(tmp_path, "simcse", 0, per_seed=False)
    assert first == tmp_path / "simcse"
    (first / "encoder").mkdir(parents=True)
    (first / "TRAINED").write_text("{}")
    second = new_run_folder(tmp_path, "simcse", 0, per_seed=False)
    # made here, empty, for the new row alone (atomically: a process choosing at the same time gets another one)
    assert second == tmp_path / "simcse-2" and second.is_dir() and not list(second.iterdir())
    assert new_run_folder(tmp_path, "simcse", 1, per_seed=True) == tmp_path / "simcse-seed1"
    assert new_run_folder(tmp_path, "simcse", 0, per_seed=False) == tmp_path / "simcse-3"


def test_a_method_version_is_a_whole_number_from_1():
    """A plug-in's spec with a version that is not a whole number >= 1 is a ValueError (the registry turns it into a
    warning naming the entry point); the default is 1."""
    from bench.train.method import MethodSpec

    spec = MethodSpec(name="x", paper="", summary="", config_cls=dict, factory=None)
    assert spec.version == 1 and MethodSpec(name="x", paper="", summary="", config_cls=dict, factory=None, version=3).version == 3
    for bad in (0, -1, 1.5, "2", True):
        with pytest.raises(ValueError, match="version"):
            MethodSpec(name="x", paper="", summary="", config_cls=dict, factory=None, version=bad)
