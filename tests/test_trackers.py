"""`bench run --report-to`: loss, learning rate, curve points and final scores go to experiment trackers through their
own libraries. TensorBoard's event files are read back with tensorboard's reader; W&B runs in its offline mode."""

from __future__ import annotations

import pytest

from bench.cli import main
from results_db import ResultsDB
from tests.test_run_cli import STS_ROWS
from tests.conftest import write_sts

pytestmark = pytest.mark.usefixtures("one_thread")


def _argv(root, tiny_model_dir, report_to: str) -> list[str]:
    data = root / "data"
    write_sts(data / "sts" / "stsb-test.tsv", STS_ROWS)
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(f"Sentence {i} is about topic {i % 5}. It has more words {i}." for i in range(40)) + "\n")
    return ["run", "--method", "simcse", "--backbone", str(tiny_model_dir), "--corpus", str(corpus), "--budget", "steps=4",
            "--batch-size", "4", "--max-len", "32", "--suite", "sts:stsb@elong", "--elong", "2", "--eval-max-len", "64",
            "--eval-every", "2", "--data-dir", str(data), "--db", str(root / "r.sqlite"), "--out", str(root / "runs"),
            "--no-progress", "--no-cache", "--no-baseline", "--report-to", report_to]  # fmt: skip


def test_tensorboard_event_files_hold_one_loss_point_per_logged_step(tiny_model_dir, tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    assert main(_argv(tmp_path, tiny_model_dir, "tensorboard")) == 0
    db = ResultsDB(tmp_path / "r.sqlite")
    (run,) = db.runs().to_dict("records")
    log = db.train_log(int(run["id"]))
    folders = list((tmp_path / "runs").rglob("events.out.tfevents.*"))
    assert len(folders) == 1 and folders[0].parent.name == "tensorboard"
    events = EventAccumulator(str(folders[0].parent), size_guidance={"scalars": 0}).Reload()
    loss = events.Scalars("train/loss")
    assert [e.step for e in loss] == log["step"].tolist() == [1, 2, 3, 4]
    assert [e.value for e in loss] == pytest.approx(log["loss"].tolist(), rel=1e-6)
    assert [e.value for e in events.Scalars("train/learning_rate")] == pytest.approx(log["lr"].tolist(), rel=1e-6)
    curve = events.Scalars("curve/stsb/spearman")
    stored = db.curve_points([int(run["id"])])
    clean = stored[stored["variant"] == "clean"]
    assert [e.step for e in curve] == clean["step"].tolist() and [e.value for e in curve] == pytest.approx(clean["value"].tolist(), rel=1e-6)
    scores = db.scores([int(run["id"])]).set_index("variant")["value"]
    (final,) = events.Scalars("eval/stsb/spearman")
    assert final.step == 4 and final.value == pytest.approx(scores["clean"], rel=1e-6)
    (attacked,) = events.Scalars("eval/stsb/spearman/elong-2")
    assert attacked.value == pytest.approx(scores["elong-2"], rel=1e-6)


def test_wandb_offline_run_logs_the_same_points(tiny_model_dir, tmp_path, monkeypatch):
    """W&B in offline mode: the run's log calls carry one loss point per logged step and the final scores, and W&B
    writes its offline run (its transaction log) under the run folder."""
    wandb = pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb-config"))
    monkeypatch.setenv("WANDB_CACHE_DIR", str(tmp_path / "wandb-cache"))
    logged: list[tuple[dict, int]] = []
    real_init = wandb.init

    def init(*args, **kwargs):
        run = real_init(*args, **kwargs)
        real_log = run.log

        def log(data, step=None, **kw):
            logged.append((dict(data), step))
            return real_log(data, step=step, **kw)

        run.log = log
        return run

    monkeypatch.setattr(wandb, "init", init)
    assert main(_argv(tmp_path, tiny_model_dir, "wandb")) == 0
    (offline,) = list((tmp_path / "runs").rglob("offline-run-*"))
    assert offline.parent.name == "wandb" and offline.parent.parent.name == "simcse"
    (history,) = list(offline.glob("*.wandb"))
    assert history.stat().st_size > 0
    assert [step for data, step in logged if "train/loss" in data] == [1, 2, 3, 4]
    db = ResultsDB(tmp_path / "r.sqlite")
    log = db.train_log(int(db.runs()["id"].iloc[0]))
    assert [data["train/loss"] for data, _ in logged if "train/loss" in data] == pytest.approx(log["loss"].tolist())
    finals = {k: v for data, _ in logged for k, v in data.items() if k.startswith("eval/")}
    scores = db.scores().set_index("variant")["value"]
    assert finals["eval/stsb/spearman"] == pytest.approx(scores["clean"], rel=1e-6)


def test_an_unknown_tracker_is_one_line_before_anything_runs(tiny_model_dir, tmp_path, capsys):
    assert main(_argv(tmp_path, tiny_model_dir, "tensorbored")) == 2
    err = capsys.readouterr().err
    assert "--report-to tensorbored: not a tracker" in err and not (tmp_path / "r.sqlite").exists()


def test_tensorboard_gets_the_config_as_hparams_with_the_final_scores_as_metrics(tmp_path):
    """The config was one text blob; TensorBoard's HPARAMS tab now lists it as parameters (nested keys joined with
    '.', lists as JSON text) and the final eval/ scores as the run's metrics. Read back with tensorboard's reader."""
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData

    from bench.runtime.trackers import TensorBoardTracker

    config = {"method": "simcse", "seed": 1, "train": {"batch_size": 4, "lr": 3e-5, "fp16": False},
              "eval": {"elong": ["2", "rand"], "limit": None}}  # fmt: skip
    tracker = TensorBoardTracker(tmp_path / "tb", "simcse (run 1)", config)
    tracker.log({"train/loss": 1.5}, 1)
    tracker.log({"eval/stsb/spearman": 71.25, "eval/stsb/spearman/elong-2": 60.5}, 2)
    tracker.finish()
    events = EventAccumulator(str(tmp_path / "tb")).Reload()
    assert "lenbench/config" not in events.Tags()["tensors"]  # no text blob
    content = {tag: HParamsPluginData.FromString(data) for tag, data in events.PluginTagToContent("hparams").items()}
    start = content["_hparams_/session_start_info"].session_start_info.hparams
    assert start["method"].string_value == "simcse" and start["seed"].number_value == 1
    assert start["train.batch_size"].number_value == 4 and start["train.lr"].number_value == pytest.approx(3e-5)
    assert start["train.fp16"].bool_value is False and start["eval.elong"].string_value == '["2", "rand"]'
    assert start["eval.limit"].string_value == "none"
    experiment = content["_hparams_/experiment"].experiment
    assert {m.name.tag for m in experiment.metric_infos} == {"eval/stsb/spearman", "eval/stsb/spearman/elong-2"}
    assert {h.name for h in experiment.hparam_infos} >= {"method", "train.batch_size", "eval.elong"}
