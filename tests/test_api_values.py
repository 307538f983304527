"""The Python API takes Python values and answers in lenbench's own errors: lists, tuples, sets and generators for list
options, numbers (numpy's too) for run ids, falsy values for flags, numbers from `differences()`, one line for a bad
id, reference or process count; `quiet=True` prints nothing, on stdout or stderr; `allow_pickle=True` reaches the
loader without any environment variable."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import lenbench
from bench.runtime.errors import ConfigError, ModelLoadError
from results_db import ResultsDB
from tests.test_report import _sts_run

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def stored(tmp_path):
    """A database with one comparison: vanilla (run 1) and simcse (run 2), clean and elong-2 STS scores."""
    db = ResultsDB(tmp_path / "r.sqlite")
    _sts_run(db, "vanilla", 0.5)
    _sts_run(db, "simcse", 3.0)
    return tmp_path / "r.sqlite"


def _one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text.strip(), text
    return text


# ------------------------------------------------------------------------------------------- ids
def test_run_ids_are_any_whole_number_and_never_a_bool(stored):
    store = lenbench.load(stored)
    assert store.comparison(np.int64(1)).runs == store.comparison(1).runs == {"vanilla": [1], "simcse": [2]}
    with pytest.raises(ConfigError, match="run id True") as exc:
        store.comparison(True)
    _one_line(exc)
    assert sorted(store.scores(np.array([2]))["run_id"].unique()) == [2]
    assert sorted(store.scores(np.int64(1))["run_id"].unique()) == [1]
    assert sorted(store.scores({1, 2})["run_id"].unique()) == [1, 2]


def test_a_missing_run_id_is_one_lenbench_line(stored):
    with pytest.raises(ConfigError, match=r"no run 999 in .*r\.sqlite") as exc:
        lenbench.load(stored).scores([999])
    _one_line(exc)
    with pytest.raises(ConfigError, match="no run 999"):
        lenbench.load(stored).comparison(999)


# ------------------------------------------------------------------------------------------- differences
def test_differences_are_numbers_and_a_bad_reference_is_refused_as_by_report(stored):
    from bench.report.stats import paired_bootstrap
    from tests.test_report import _items

    results = lenbench.load(stored).comparison()
    diffs = results.differences().set_index("variant")
    for column in ("diff", "ci_low", "ci_high", "p"):
        assert diffs[column].dtype == np.float64, column
    assert diffs["significant"].dtype == bool
    db = ResultsDB(stored)
    clean = db.scores().query("variant == 'clean'").set_index("run_id")["id"]
    expected = paired_bootstrap(_items(db, clean[1]), _items(db, clean[2]))
    assert diffs.loc["clean", "diff"] == pytest.approx(expected.difference)
    assert (diffs.loc["clean", "ci_low"], diffs.loc["clean", "ci_high"]) == pytest.approx((expected.low, expected.high))
    assert diffs.loc["clean", "significant"] and diffs.loc["clean", "ci_high"] < 0  # sortable, filterable
    assert f"{diffs.loc['clean', 'diff']:.2f}*" in results.report()  # the report's rounding of the same number
    for call in (results.differences, results.report):
        with pytest.raises(ConfigError, match="reference 'nonexistent' is not one of the compared methods") as exc:
            call(reference="nonexistent")
        _one_line(exc)


# ------------------------------------------------------------------------------------------- list options
@pytest.fixture
def captured(monkeypatch):
    """The RunSpec `lenbench.run` hands to the comparison job (the job itself not run)."""
    from bench.experiment import comparison
    from bench.experiment.record import command_line

    seen = {}

    def fake(spec, db=None, *, say=None, runtime=None, **kw):  # noqa: ANN001, ANN202
        seen["spec"], seen["runtime"], seen["command"] = spec, runtime, command_line()
        return comparison.ComparisonResult("c", {}, {"vanilla": []}, db=db)

    monkeypatch.setattr(comparison, "run_comparison", fake)
    return seen


def test_list_options_take_lists_tuples_sets_and_generators(captured, tmp_path):
    lenbench.run(methods=(m for m in ["simcse", "crop"]), suites=["heldout"], seeds=[0, 1, 2], elong=("2", "rand"),
                 report_to=["tensorboard"], hp=("simcse.temperature=0.1",), db=tmp_path / "r.sqlite",
                 out=str(tmp_path / "runs"), quiet=True)  # fmt: skip
    spec = captured["spec"]
    assert spec.settings.seeds == [0, 1, 2] and spec.settings.methods == ["simcse", "crop"]
    assert spec.settings.elong == ["2", "rand"] and spec.report_to == "tensorboard"
    assert spec.settings.overrides == {"simcse": {"temperature": 0.1}}
    assert "--method simcse,crop " in captured["command"] and "--seeds 0,1,2 " in captured["command"]  # as recorded
    lenbench.run(methods={"simcse", "crop"}, suites="heldout", seeds=np.arange(2), db=tmp_path / "r.sqlite",
                 out=str(tmp_path / "runs"), quiet=True)  # fmt: skip
    assert sorted(captured["spec"].settings.methods) == ["crop", "simcse"] and captured["spec"].settings.seeds == [0, 1]


def test_a_list_where_one_value_is_expected_and_bad_values_are_one_lenbench_line(captured, tmp_path):
    for options, message in (({"batch_size": [8, 16]}, r"batch_size=\[8, 16\]: one value expected"),
                             ({"max_len": "long"}, "max_len='long': not a valid int"),
                             ({"seeds": [0, 0]}, "seed 0 is given more than once"),
                             ({"no_cache": "no"}, "no_cache='no': a flag is True or False"),
                             ({"nproc": 2}, "nproc=2: the Python API runs in this process only")):  # fmt: skip
        with pytest.raises(ConfigError, match=message) as exc:
            lenbench.run(methods="simcse", suites="heldout", db=tmp_path / "r.sqlite", quiet=True, **options)
        _one_line(exc)
    assert "spec" not in captured and not (tmp_path / "r.sqlite").exists()


def test_evaluate_takes_falsy_flags_lists_and_refuses_several_processes(tiny_model_dir, tmp_path):
    db = tmp_path / "r.sqlite"
    with pytest.raises(ConfigError, match="nproc=2: the Python API runs in this process only") as exc:
        lenbench.evaluate(str(tiny_model_dir), suites="sts:stsb", nproc=2, db=db)
    _one_line(exc)
    assert not db.exists()
    ev = lenbench.evaluate(str(tiny_model_dir), suites=["sts:stsb@elong"], elong=["2"], limit=20, max_len=np.int64(32),
                           no_cache=0, db=db, quiet=True)  # fmt: skip
    frame = ev.to_pandas()
    assert set(frame["variant"]) == {"clean", "elong-2"} and set(frame["subset"]) == {20}
    (run,) = ResultsDB(db).runs().to_dict("records")
    assert run["config"]["max_len"] == 32 and run["command"].startswith("bench eval --model ")
    assert "--elong 2" in run["command"] and "--no-cache" not in run["command"]


# ------------------------------------------------------------------------------------------- quiet, pickle
def test_quiet_prints_nothing_on_stdout_or_stderr(tiny_model_dir, tmp_path, capfd):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(f"Sentence {i} is about topic {i % 5}. It has more words {i}." for i in range(40)) + "\n")
    capfd.readouterr()
    cmp = lenbench.run(methods="simcse", suites="sts:stsb", budget="steps=2", limit=20, seeds=[0, 1],
                       backbone=str(tiny_model_dir), corpus=str(corpus), batch_size=4, max_len=32, eval_every=1,
                       db=tmp_path / "r.sqlite", out=str(tmp_path / "runs"), quiet=True)  # fmt: skip
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")
    assert len(cmp.runs["simcse"]) == 2 and len(cmp.runs["vanilla"]) == 1  # two seeds trained, as asked
    assert {(r["method"], r["seed"]) for r in ResultsDB(tmp_path / "r.sqlite").runs().to_dict("records")} == {
        ("vanilla", 0), ("simcse", 0), ("simcse", 1)}


def test_allow_pickle_reaches_the_loader_of_a_pickle_only_folder(tiny_model_dir, tmp_path, monkeypatch):
    import torch
    from safetensors.torch import load_file

    monkeypatch.delenv("LENBENCH_ALLOW_PICKLE", raising=False)
    folder = shutil.copytree(tiny_model_dir, tmp_path / "bin-model")
    torch.save(load_file(str(folder / "model.safetensors")), folder / "pytorch_model.bin")
    (folder / "model.safetensors").unlink()
    db = tmp_path / "r.sqlite"
    with pytest.raises(ModelLoadError, match="only pickle weights"):
        lenbench.evaluate(str(folder), suites="sts:stsb", limit=20, max_len=32, db=db, quiet=True)
    pickled = lenbench.evaluate(str(folder), suites="sts:stsb", limit=20, max_len=32, allow_pickle=True, db=db, quiet=True)
    safe = lenbench.evaluate(str(tiny_model_dir), suites="sts:stsb", limit=20, max_len=32, db=db, quiet=True)
    assert pickled.to_pandas()["value"].tolist() == pytest.approx(safe.to_pandas()["value"].tolist(), abs=1e-9)
