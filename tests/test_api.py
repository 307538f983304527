"""The Python API (lenbench.evaluate / run / load): the example of docs/reference/api.md runs as printed (a tiny model in place of
minilm, a small corpus) and gives the numbers the command line gives on the same settings; options are checked by
the same declarations and checks as the commands' parser."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import lenbench
from bench.cli import main
from bench.runtime.errors import ConfigError
from results_db import ResultsDB

PAGE = Path(__file__).resolve().parent.parent / "docs" / "reference" / "api.md"  # its example is run here

pytestmark = pytest.mark.usefixtures("one_thread")


def _example() -> str:
    return PAGE.read_text().split("```python\n", 1)[1].split("```", 1)[0]


def test_readme_example_gives_the_command_lines_numbers(tiny_model_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(f"Sentence {i} is about topic {i % 5}. It has more words {i}." for i in range(40)) + "\n")
    tiny = str(tiny_model_dir)
    small = {"backbone": tiny, "corpus": str(corpus), "batch_size": 4, "max_len": 32}
    code = _example().replace('"minilm"', repr(tiny)).replace(
        "lenbench.run(", "lenbench.run(" + ", ".join(f"{k}={v!r}" for k, v in small.items()) + ", ")
    namespace: dict = {}
    exec(compile(code, "docs/reference/api.md", "exec"), namespace)  # noqa: S102 - the page's own example
    ev, cmp, store, frame = namespace["ev"], namespace["cmp"], namespace["store"], namespace["frame"]

    cli_db = str(tmp_path / "cli.sqlite")
    assert main(["eval", "--model", tiny, "--suite", "sts:stsb@elong", "--elong", "2", "--limit", "200", "--db", cli_db]) == 0
    assert main(["run", "--method", "simcse", "--suite", "sts:stsb", "--budget", "steps=5", "--limit", "200",
                 "--backbone", tiny, "--corpus", str(corpus), "--batch-size", "4", "--max-len", "32", "--db", cli_db]) == 0
    capsys.readouterr()
    cli = ResultsDB(cli_db)
    runs = cli.runs().set_index("id")
    scores = cli.scores().assign(kind=lambda f: f["run_id"].map(runs["kind"]), method=lambda f: f["run_id"].map(runs["method"]))
    key = ["kind", "method", "suite", "dataset", "variant", "metric"]

    def values(part: pd.DataFrame) -> dict:
        return {tuple(r[k] for k in key): round(float(r["value"]), 6) for _, r in part.iterrows()}

    api_eval = ev.to_pandas()
    assert set(api_eval["variant"]) == {"clean", "elong-2"} and (api_eval["n"] > 0).all() and (api_eval["subset"] == 200).all()
    assert (api_eval["ci_low"] < api_eval["value"]).all() and (api_eval["value"] < api_eval["ci_high"]).all()
    from_eval = (runs.loc[scores["run_id"], "suite"] == "sts:stsb@elong").to_numpy()  # the bench eval row
    cli_eval = scores[from_eval]
    # the evaluated row is labelled by its model's folder, as bench eval's table labels it; stored as 'vanilla'
    assert set(api_eval["method"]) == {"/".join(Path(tiny).parts[-2:])} and set(cli_eval["method"]) == {"vanilla"}
    assert values(api_eval.assign(method="vanilla")) == values(cli_eval)
    api_run = cmp.to_pandas()
    cli_run = scores[~from_eval]
    assert set(api_run["method"]) == {"vanilla", "simcse"} and values(api_run) == values(cli_run)
    assert set(api_run["budget"].dropna()) == {"steps=5"} and set(api_run["backbone"]) == {tiny}
    diffs = namespace["diffs"]
    assert set(diffs["method"]) == {"simcse"} and len(diffs) == 1
    assert store.comparison().comparison == cmp.comparison
    assert values(frame) == values(api_run)
    rows = ResultsDB(tmp_path / "notebook.sqlite").runs()
    assert rows["command"].str.startswith("bench ").all()  # the equivalent command line, not the interpreter's


def test_api_options_are_checked_by_the_commands_parser(tmp_path):
    with pytest.raises(ConfigError, match="^limit=0: 0 is not positive"):  # the keyword, as the caller wrote it
        lenbench.evaluate("bm25", suites="sts:stsb", limit=0, db=tmp_path / "r.sqlite")
    with pytest.raises(ConfigError, match="'no_such_option' is not a `bench eval` option"):
        lenbench.evaluate("bm25", suites="sts:stsb", no_such_option=1, db=tmp_path / "r.sqlite")
    from results_db.errors import ResultsDBError

    with pytest.raises(ResultsDBError, match="does not exist"):
        lenbench.load(tmp_path / "missing.sqlite")


def test_api_refuses_a_missing_model_and_a_database_that_is_not_a_path(tmp_path, monkeypatch):
    """model=None would load the working folder as a model, db=123 would create a database file named '123': both
    are refused in one line, before anything is loaded or created."""
    monkeypatch.chdir(tmp_path)
    for model in (None, "", 7):
        with pytest.raises(ConfigError, match=r"^model=.*give a model folder, a hub id, 'minilm' or 'bm25'"):
            lenbench.evaluate(model, suites="sts:stsb", db=tmp_path / "r.sqlite")
    for db in (123, 4.5, b"r.sqlite", ["r.sqlite"]):
        with pytest.raises(ConfigError, match=r"^db=.*file path or an SQLAlchemy URL string"):
            lenbench.evaluate("bm25", suites="sts:stsb", db=db)
        with pytest.raises(ConfigError, match=r"^db="):
            lenbench.load(db)
    assert list(tmp_path.iterdir()) == []  # no database file, no model folder read
