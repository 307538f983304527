"""Third-party methods register through the `lenbench.methods` entry-point group.

The adapter package in tests/plugin_pkg is pip-installed offline (--no-deps --no-build-isolation --no-index) into a
temporary target folder, never into the venv; that folder, holding the package and its .dist-info with
entry_points.txt, goes on the path of a `bench` subprocess (PYTHONPATH) or of this process (sys.path, restored).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import write_sts

REPO = Path(__file__).resolve().parent.parent
PLUGIN_SRC = Path(__file__).resolve().parent / "plugin_pkg"
BENCH = Path(sys.executable).with_name("bench")


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: threads only add contention


@pytest.fixture(scope="module")
def plugin_target(tmp_path_factory) -> Path:
    """pip install the plugin package into a temporary folder (offline); returns that folder."""
    work = tmp_path_factory.mktemp("plugin")
    src = work / "src"
    shutil.copytree(PLUGIN_SRC, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    target = work / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", "--quiet",
         "--disable-pip-version-check", "--target", str(target), str(src)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    dist = list(target.glob("lenbench_demo_method-*.dist-info"))
    assert len(dist) == 1
    eps = (dist[0] / "entry_points.txt").read_text()
    assert "[lenbench.methods]" in eps and "demo-shuffle = lenbench_demo_method:specs" in eps
    return target


def _env(target: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(target), str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    return env


@pytest.fixture
def plugin_on_path(plugin_target, monkeypatch):
    """The installed plugin importable in this process, with a fresh registry view (originals restored after)."""
    import importlib

    from bench.train import registry

    monkeypatch.syspath_prepend(str(plugin_target))
    monkeypatch.setattr(registry, "METHODS", registry.METHODS.fresh())
    importlib.invalidate_caches()
    return registry


def test_plugin_is_listed_and_built_from_the_registry(plugin_on_path, capsys):
    from bench.cli import main

    registry = plugin_on_path
    spec = registry.get_method("demo-shuffle")
    assert spec.name == "demo-shuffle" and spec.trains and spec.defaults().nan_at_step == 0
    assert "simcse" in registry.all_names() and "demo-shuffle" in registry.all_names()  # built-ins still there
    assert main(["methods"]) == 0
    out = capsys.readouterr().out
    assert "\ndemo-shuffle\n" in out and "word-shuffle augmentation" in out and "nan_at_step=0" in out


def _toy_setup(tmp_path, tiny_model_dir):
    data = tmp_path / "data"
    write_sts(data / "sts" / "stsb-test.tsv", [
        ("A man is playing a guitar.", "A man plays the guitar.", 4.8),
        ("A woman is slicing onions.", "A man is riding a horse.", 0.4),
        ("The cat sleeps on the sofa.", "A cat is sleeping on a couch.", 4.5),
        ("Stocks fell sharply today.", "Children play football outside.", 0.0),
        ("The train arrived late.", "The train was delayed.", 4.0),
    ])
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(f"sentence number {i} about topic {i % 7} and some more words" for i in range(40)) + "\n")
    db = tmp_path / "r.sqlite"
    common = ["--backbone", str(tiny_model_dir), "--corpus", str(corpus), "--suite", "sts:stsb@elong", "--elong", "2",
              "--data-dir", str(data), "--db", str(db), "--out", str(tmp_path / "runs"), "--batch-size", "4",
              "--max-len", "32", "--eval-max-len", "64", "--no-progress", "--no-baseline"]
    return db, common


def test_bench_run_trains_and_evaluates_a_plugin_method(plugin_target, tiny_model_dir, tmp_path):
    """A separate `bench` process that finds the plugin only through the installed dist-info's entry point."""
    from results_db import ResultsDB

    db, common = _toy_setup(tmp_path, tiny_model_dir)
    proc = subprocess.run([str(BENCH), "run", "--method", "demo-shuffle", "--budget", "steps=3", *common],
                          capture_output=True, text=True, env=_env(plugin_target), cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[demo-shuffle] trained 3 steps in " in proc.stdout and "(the steps budget was reached)" in proc.stdout
    rdb = ResultsDB(db)
    runs = rdb.runs()
    assert runs["method"].tolist() == ["demo-shuffle"] and runs["status"].tolist() == ["finished"]
    run = rdb.get_run(int(runs["id"].iloc[0]))
    assert run["budget_consumed"]["steps"] == 3 and run["config"]["method_config"]["nan_at_step"] == 0
    assert "--method demo-shuffle" in run["command"]
    # the plug-in's own source is in the provenance (the checkout's commit does not name it)
    import hashlib

    source = run["runtime"]["method_source"]
    assert source["module"] == "lenbench_demo_method" and source["distribution"] == "lenbench-demo-method 0.1.0"
    assert source["sha256"] == hashlib.sha256((PLUGIN_SRC / "lenbench_demo_method" / "__init__.py").read_bytes()).hexdigest()
    scores = rdb.scores([run["id"]])
    assert set(scores["variant"]) == {"clean", "elong-2"} and set(scores["dataset"]) == {"stsb"}


def test_plugin_nan_loss_stops_the_run_with_one_clear_line(plugin_on_path, tiny_model_dir, tmp_path, capsys, monkeypatch):
    """The harness's NaN stop works for a plugin too: clear one-line error, failed run row, checkpoint kept."""
    from bench.cli import main
    from results_db import ResultsDB

    db, common = _toy_setup(tmp_path, tiny_model_dir)
    monkeypatch.chdir(tmp_path)
    rc = main(["run", "--method", "demo-shuffle", "--budget", "steps=5", "--hp", "demo-shuffle.nan_at_step=3", *common])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "bench: error: non-finite loss (nan) at step 3 of demo-shuffle" in err and "Traceback" not in err
    failed = ResultsDB(db).runs().iloc[-1]
    assert failed["status"] == "failed" and "non-finite loss" in failed["error"]
    ckpt = Path(failed["output_dir"]) / "checkpoints"
    assert (ckpt / "LATEST").read_text() == "step-00000002" and (ckpt / "step-00000002" / "model.safetensors").exists()


BAD_LOSSES = {
    "a vector": (lambda loss: loss.expand(3) * 1.0, "returned a tensor of shape (3,), not a scalar"),
    "detached": (lambda loss: loss.detach(), "returned a tensor with no grad"),
    "a constant": (lambda loss: __import__("torch").tensor(1.0, requires_grad=True), "returned a leaf tensor (a constant)"),
    "a float": (lambda loss: float(loss.detach()), "returned float, not a tensor"),
}


@pytest.mark.parametrize("case", list(BAD_LOSSES))
def test_check_loss_names_the_method_and_the_rule(case):
    import torch

    from bench.runtime.errors import TrainingError
    from bench.train.loss_check import check_loss

    class Adapter:
        name = "my-method"

    w = torch.ones(2, requires_grad=True)
    make, message = BAD_LOSSES[case]
    with pytest.raises(TrainingError) as err:
        check_loss(make((w * 2).sum()), Adapter())
    text = str(err.value)
    assert text.startswith("method 'my-method' (") and message in text and "must return a scalar tensor" in text
    check_loss((w * 2).sum(), Adapter())  # a scalar computed from the parameters passes


def test_a_plugin_loss_that_breaks_the_rule_fails_its_row_and_keeps_the_others(plugin_on_path, tiny_model_dir, tmp_path, capsys, monkeypatch):
    """A plug-in whose loss is a vector: one line naming the method, its module and the rule; its row is failed,
    the method trained before it in the same comparison stays finished with its scores."""
    from bench.cli import main
    from results_db import ResultsDB

    db, common = _toy_setup(tmp_path, tiny_model_dir)
    monkeypatch.chdir(tmp_path)
    import lenbench_demo_method

    original = lenbench_demo_method.DemoShuffleAdapter.loss
    monkeypatch.setattr(lenbench_demo_method.DemoShuffleAdapter, "loss",
                        lambda self, model, batch: (original(self, model, batch)[0].expand(4) * 1.0, {}))  # fmt: skip
    rc = main(["run", "--method", "simcse,demo-shuffle", "--budget", "steps=2", *common])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err, err
    assert ("bench: error: method 'demo-shuffle' (lenbench_demo_method.DemoShuffleAdapter): returned a tensor of "
            "shape (4,), not a scalar") in err  # fmt: skip
    runs = ResultsDB(db).runs().set_index("method")
    assert runs.loc["simcse", "status"] == "finished" and runs.loc["demo-shuffle", "status"] == "failed"
    assert "not a scalar" in runs.loc["demo-shuffle", "error"]
    assert len(ResultsDB(db).scores([int(runs.loc["simcse", "id"])])) > 0
