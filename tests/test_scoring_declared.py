"""A trained encoder's folder declares how it is scored (sentence-transformers' max_seq_length and pooling) when the
trainer saves it: `bench run` gives the trainer the evaluation's max_len and pooling, so nothing rewrites the
folder afterwards (bench.encode.st_config.declare_scoring is for folders saved otherwise)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.cli import main
from bench.train import Budget, TrainConfig, TrainJob, train
from methods import get_method
from results_db import ResultsDB
from tests.conftest import write_sts

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: threads only add contention

TEXTS = [f"Sentence {i} talks about topic {i % 5} with a few more words." for i in range(24)]


@pytest.fixture()
def no_rewrite(monkeypatch):
    """Any later rewrite of the sentence-transformers files fails the test."""
    import bench.encode.st_config as st_config

    def refuse(*args, **kwargs):
        raise AssertionError("the saved encoder's sentence-transformers files were rewritten")

    monkeypatch.setattr(st_config, "declare_scoring", refuse)


def declared(folder: Path) -> tuple[int, bool, bool]:
    """(max_seq_length, pooling cls?, pooling mean?) the folder declares."""
    pooling = json.loads((folder / "1_Pooling" / "config.json").read_text())
    max_len = json.loads((folder / "sentence_bert_config.json").read_text())["max_seq_length"]
    return max_len, pooling["pooling_mode_cls_token"], pooling["pooling_mode_mean_tokens"]


def test_the_trainer_saves_the_scoring_max_len_and_pooling(tiny_model_dir, tmp_path, no_rewrite):
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    adapter = get_method("simcse").build(tokenizer=tok, max_len=16)
    config = TrainConfig(max_len=16, batch_size=4, progress=False, checkpoint_every=0, pooling="cls")
    result = train(adapter, AutoModel.from_pretrained(tiny_model_dir), tok,
                   TrainJob(TEXTS, Budget(steps=1), config, tmp_path / "a", scoring_max_len=40))
    assert declared(result.encoder_dir) == (40, True, False)
    adapter = get_method("simcse").build(tokenizer=tok, max_len=16)
    unset = train(adapter, AutoModel.from_pretrained(tiny_model_dir), tok,
                  TrainJob(TEXTS, Budget(steps=1), config, tmp_path / "b"))
    assert declared(unset.encoder_dir) == (16, True, False)  # no scoring max_len given: the training one


def test_bench_run_folder_declares_the_eval_max_len_without_a_rewrite(tiny_model_dir, tmp_path, no_rewrite):
    write_sts(tmp_path / "data" / "sts" / "stsb-test.tsv",
              [("A man plays a guitar.", "A man is playing the guitar.", 4.8), ("A cat sleeps.", "Stocks fell.", 0.1),
               ("The train was late.", "The train arrived late.", 4.2)])  # fmt: skip
    (tmp_path / "corpus.txt").write_text("\n".join(TEXTS) + "\n")
    argv = ["run", "--method", "simcse", "--no-baseline", "--backbone", str(tiny_model_dir), "--corpus",
            str(tmp_path / "corpus.txt"), "--budget", "steps=1", "--batch-size", "4", "--max-len", "16",
            "--eval-max-len", "48", "--suite", "sts:stsb", "--data-dir", str(tmp_path / "data"),
            "--db", str(tmp_path / "r.sqlite"), "--out", str(tmp_path / "runs"), "--no-progress", "--no-cache"]  # fmt: skip
    assert main(argv) == 0
    (run,) = ResultsDB(tmp_path / "r.sqlite").runs().to_dict("records")
    assert declared(Path(run["model"])) == (48, False, True)
