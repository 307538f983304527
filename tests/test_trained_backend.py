"""A freshly trained encoder is scored once, so `--backend auto` does not export it to ONNX on the CPU (the export
costs more than onnx saves on one evaluation: EvalSettings.for_trained); the untrained backbone, evaluated again and
again, still runs on onnx. Each row's Run.runtime says which backend scored it."""

from __future__ import annotations

import json

import pytest

import lenbench
from results_db import ResultsDB
from tests.conftest import write_sts

pytestmark = pytest.mark.usefixtures("one_thread")


def test_auto_scores_a_trained_encoder_with_torch_and_exports_only_the_backbone(tiny_model_dir, tmp_path, monkeypatch):
    pytest.importorskip("onnxruntime")
    cache = tmp_path / "cache"
    monkeypatch.setenv("LENBENCH_CACHE", str(cache))
    write_sts(tmp_path / "data" / "sts" / "stsb-test.tsv",
              [(f"a text about topic {i}", f"another text on topic {i % 7}", float(i % 5)) for i in range(30)])  # fmt: skip
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(f"Sentence {i} is about topic {i % 5}. It has more words {i}." for i in range(40)) + "\n")
    lenbench.run("simcse", "sts:stsb", budget="steps=2", backbone=str(tiny_model_dir), corpus=str(corpus), batch_size=4,
                 max_len=32, data_dir=str(tmp_path / "data"), db=tmp_path / "r.sqlite", out=str(tmp_path / "runs"),
                 quiet=True, device="cpu", backend="auto")  # fmt: skip
    runs = ResultsDB(tmp_path / "r.sqlite").runs().set_index("method")
    backend = {m: (r if isinstance(r, dict) else json.loads(r))["encoder_backend"] for m, r in runs["runtime"].items()}
    assert backend == {"vanilla": "onnx", "simcse": "torch"}
    assert len(list((cache / "onnx").glob("*.onnx"))) == 1  # the backbone's export alone
