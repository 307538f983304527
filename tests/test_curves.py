"""Learning curves (issue 20): scoring the encoder during training changes nothing about training, points are
stored with their step and read back by `bench results --curves`."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch

from bench.cli import main
from bench.train import Budget, TrainConfig, TrainJob, train
from bench.train.trainer import EvalHook
from methods import get_method
from results_db import ResultsDB
from tests.conftest import write_sts

pytestmark = pytest.mark.usefixtures("one_thread")

TEXTS = [f"Sentence number {i} talks about topic {i % 4} and a few more words." for i in range(24)]
STS_ROWS = [("a cat sits on a mat", "a cat is on the mat", 4.5), ("a dog runs", "the stock market fell", 0.5),
            ("men play football", "people play a ball game", 3.5), ("it rains today", "the weather is wet", 3.0),
            ("a plane lands", "an aircraft touches down", 4.8), ("he eats bread", "she reads a book", 0.8)]  # fmt: skip


def _train(tiny_model_dir, tmp_path, name, hook=None, steps=5):
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    torch.manual_seed(0)  # the unused pooler the folder lacks is initialised at random: the same in both runs
    model = AutoModel.from_pretrained(tiny_model_dir)
    adapter = get_method("simcse").build(tokenizer=tok, max_len=24, seed=0)  # dropout: RNG-dependent
    cfg = TrainConfig(max_len=24, batch_size=4, lr=1e-3, progress=False, checkpoint_every=0, seed=0)
    job = TrainJob(TEXTS, Budget.parse(f"steps={steps}"), cfg, tmp_path / name, save_encoder_dir=None, eval_hook=hook)
    result = train(adapter, model, tok, job)
    return result, model


def test_evaluating_during_training_changes_neither_losses_nor_weights(tiny_model_dir, tmp_path):
    """The same losses and bit-identical final weights with and without a hook that scores STS on the model and
    draws from every RNG; the hook runs before the first step (0), at steps 2, 4 and the last (5), in eval mode, under
    no_grad."""
    from bench.encode.options import EncoderOptions
    from bench.evaluate.curve import CurveEvaluator
    from bench.evaluate.suites import EvalContext, parse_suites

    write_sts(tmp_path / "data" / "sts" / "stsb-test.tsv", STS_ROWS)
    db = ResultsDB(tmp_path / "r.sqlite")
    run_id = db.create_run(model="m", method="simcse")
    curve = CurveEvaluator(parse_suites(["sts:stsb"]), EvalContext(data_dir=str(tmp_path / "data")),
                           EncoderOptions(max_len=32), name="simcse", db=db, run_id=run_id, say=lambda _m: None)  # fmt: skip
    seen = []

    def hook(model, tokenizer, step):
        seen.append((step, model.training, torch.is_grad_enabled()))
        random.random(), np.random.rand(), torch.rand(3)  # a careless evaluation draws from every RNG
        curve(model, tokenizer, step)

    plain, plain_model = _train(tiny_model_dir, tmp_path, "plain")
    hooked, hooked_model = _train(tiny_model_dir, tmp_path, "hooked", EvalHook(2, hook))
    assert hooked.losses == plain.losses
    want = plain_model.state_dict()
    assert all(torch.equal(want[k], v) for k, v in hooked_model.state_dict().items())
    assert seen == [(0, False, False), (2, False, False), (4, False, False), (5, False, False)]
    assert hooked_model.training  # train mode restored
    points = db.curve_points([run_id])
    assert sorted(set(points["step"])) == [0, 2, 4, 5]
    assert set(points["metric"]) == {"spearman"} and points["value"].between(-100, 100).all()
    assert db.scores([run_id]).empty  # curve points never land among the final scores


def test_bench_results_curves_json_and_table(tmp_path, capsys):
    from results_db import ScoreRecord
    from results_db.store import ItemValues

    db = ResultsDB(tmp_path / "r.sqlite")
    run = db.create_run(model="m", method="crop", seed=1, status="finished")
    items = ItemValues("mean", ["a", "b", "c", "d"], [0.0, 0.5, 0.5, 1.0])
    for step in (100, 200, 300):
        db.add_curve_points(run, step, [ScoreRecord("beir", "scifact", "ndcg@10", step / 10, 4, items=items)])
    assert main(["results", "--curves", "--format", "json", "--db", str(tmp_path / "r.sqlite")]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["run_id"], r["method"], r["seed"], r["step"], r["dataset"], r["metric"], r["value"]) for r in rows] == [
        (run, "crop", 1, 100, "scifact", "ndcg@10", 10.0), (run, "crop", 1, 200, "scifact", "ndcg@10", 20.0),
        (run, "crop", 1, 300, "scifact", "ndcg@10", 30.0)]  # fmt: skip
    assert main(["results", "--curves", "--db", str(tmp_path / "r.sqlite")]) == 0
    out = capsys.readouterr().out
    assert "step 100" in out and "step 300" in out and "30.00" in out


def test_curves_name_their_subset_and_n_and_show_the_final_score_beside_them(tmp_path, capsys):
    """A curve scored on a --curve-limit subset says so (DATASET[N], n) and sits beside the run's reported score on
    the whole dataset with its own n: the two numbers are never read as one."""
    from results_db import ScoreRecord

    db = ResultsDB(tmp_path / "r.sqlite")
    run = db.create_run(model="m", method="crop", seed=0, kind="train")
    for step, value in ((0, 8.0), (100, 15.0), (200, 19.95)):
        db.add_curve_points(run, step, [ScoreRecord("heldout", "wiki-offline-heldout", "ndcg_at_10", value, 200,
                                                    info={"limit": 200})])  # fmt: skip
    db.add_scores(run, [ScoreRecord("heldout", "wiki-offline-heldout", "ndcg_at_10", 13.56, 448)])
    db.finish_run(run)
    assert main(["results", "--curves", "--db", str(tmp_path / "r.sqlite")]) == 0
    out = capsys.readouterr().out
    header, line = out.splitlines()[1], out.splitlines()[2]
    assert header.split()[:10] == ["run_id", "method", "seed", "dataset", "metric", "variant", "n", "step", "0", "step"]
    assert "wiki-offline-heldout[200]" in line and " 200 " in line and "19.95" in line
    assert "13.56 (wiki-offline-heldout, n=448)" in line
    assert main(["results", "--curves", "--format", "json", "--db", str(tmp_path / "r.sqlite")]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["step"], r["subset"], r["n"], r["final_value"], r["final_n"], r["final_subset"]) for r in rows] == [
        (0, 200, 200, 13.56, 448, None), (100, 200, 200, 13.56, 448, None), (200, 200, 200, 13.56, 448, None)]


def test_point_intervals_bootstrap_one_run_and_t_over_seeds():
    from bench.report.curves import bootstrap_interval, over_seeds

    low, high = bootstrap_interval({"aggregate": "mean", "values": [0.0, 1.0] * 50})
    assert 0.38 < low < 0.5 < high < 0.62  # mean 0.5, standard error 0.05
    assert np.isnan(bootstrap_interval(None)[0])
    import pandas as pd

    frame = pd.DataFrame({"method": "crop", "step": 100, "suite": "beir", "dataset": "d", "variant": "clean",
                          "metric": "ndcg@10", "value": [10.0, 12.0, 14.0]})  # fmt: skip
    (row,) = over_seeds(frame).to_dict("records")
    assert row["value"] == 12.0 and row["seeds"] == 3 and row["low"] < 12.0 < row["high"]
    assert abs((row["high"] - 12.0) - 4.303 * 2.0 / 3**0.5) < 1e-2  # t(0.975, 2) * sd / sqrt(n)


def test_eval_every_options_are_checked_before_anything_runs(tmp_path, capsys):
    db = tmp_path / "r.sqlite"
    base = ["run", "--method", "crop", "--db", str(db), "--suite", "heldout", "--budget", "steps=1", "--out", str(tmp_path)]
    assert main([*base, "--curve-suite", "heldout"]) == 2
    assert "--eval-every" in capsys.readouterr().err
    assert main([*base, "--eval-every", "0"]) == 2
    assert "positive" in capsys.readouterr().err


def test_run_and_compare_views_draw_curves_with_intervals(tmp_path, monkeypatch):
    """The Run view shows a run's curve (line + bootstrap band, read from curve_points) and the Compare view both
    runs'; a run without points says how to get them; the in-domain run's corpus is labelled in the main view."""
    from results_db import ScoreRecord
    from results_db.store import ItemValues
    from tests.test_leaderboard_app import go, open_app, texts

    path = tmp_path / "r.sqlite"
    db = ResultsDB(path)
    ids = []
    for method, gain in (("crop", 10.0), ("simcse", 1.0)):
        run = db.create_run(model="m", method=method, kind="train", budget_label="steps=300", train_corpus="beir:scifact",
                            config={"in_domain": ["scifact"]}, status="finished")  # fmt: skip
        db.add_scores(run, [ScoreRecord("beir", "scifact", "ndcg@10", 3 * gain, 4)])
        for step in (100, 200, 300):
            items = ItemValues("mean", ["a", "b", "c", "d"], [step / 100 * gain / 4 * x for x in (0.5, 1.0, 1.0, 1.5)])
            db.add_curve_points(run, step, [ScoreRecord("beir", "scifact", "ndcg@10", step / 100 * gain, 4, items=items)])
        ids.append(run)
    bare = db.create_run(model="m2", method="vanilla", status="finished")
    db.engine.dispose()
    at = open_app(path, monkeypatch)
    # (the table cuts settings to 20 characters; the full label is in the header's help and the Run view)
    assert any(str(v).startswith("in-domain: beir:") for v in at.dataframe[0].value["corpus"])
    go(at, "Run")
    at.sidebar.number_input(key="run_id").set_value(ids[0]).run()
    assert "Learning curve" in texts(at) and "bootstrap" in texts(at)
    specs = [c.proto.spec for c in at.get("vega_lite_chart")]
    assert any('"area"' in s and '"line"' in s and '"high"' in s for s in specs)  # line + its interval band
    at.sidebar.number_input(key="run_id").set_value(bare).run()
    assert "--eval-every" in texts(at)
    go(at, "Compare")
    at.sidebar.number_input(key="cmp_a").set_value(ids[0]).run()
    at.sidebar.number_input(key="cmp_b").set_value(ids[1]).run()
    assert not at.exception and "Learning curve" in texts(at)


def test_curve_points_are_scored_at_the_final_scores_precision(tiny_model_dir, tmp_path, capsys):
    """`--precision bf16` on the CPU (where `auto` is fp32): the learning-curve points run at bf16 like the final
    scores, as each score's info records (the curve hook gets the run's encoder options whole)."""
    data = tmp_path / "data"
    write_sts(data / "sts" / "stsb-test.tsv", STS_ROWS)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(TEXTS) + "\n")
    db = tmp_path / "r.sqlite"
    assert main(["run", "--method", "simcse", "--no-baseline", "--backbone", str(tiny_model_dir), "--corpus", str(corpus),
                 "--budget", "steps=2", "--batch-size", "4", "--max-len", "24", "--suite", "sts:stsb",
                 "--data-dir", str(data), "--eval-every", "1", "--precision", "bf16", "--backend", "torch",
                 "--db", str(db), "--out", str(tmp_path / "runs"), "--no-progress"]) == 0  # fmt: skip
    capsys.readouterr()
    store = ResultsDB(db)
    (run,) = store.runs().to_dict("records")
    points = store.curve_points([run["id"]])
    assert sorted(points["step"].unique()) == [0, 1, 2]
    final = {score["info"]["dtype"] for score in store.scores([run["id"]]).to_dict("records")}
    curve = {json.loads(info)["dtype"] if isinstance(info, str) else info["dtype"] for info in points["info"]}
    assert final == curve == {"bf16"} and run["runtime"]["precision"] == "bf16"
