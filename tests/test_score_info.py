"""What a score carries (issue 27): every score's info records its suite's scoring version, the fingerprint of the
data it read, the time and throughput of its scoring, the device, dtype and attention implementation, and peak
memory."""

from __future__ import annotations

import pytest

from bench.cli import main
from results_db import ResultsDB
from tests.conftest import write_sts

pytestmark = pytest.mark.usefixtures("one_thread")

PAIRS = [(f"a cat sat on mat number {i}", f"a dog sat on rug number {i}", float(i % 5)) for i in range(12)]


def test_every_score_records_version_fingerprint_speed_device_and_memory(tiny_model_dir, tmp_path, capsys):
    from bench.evaluate import score_info

    sts = write_sts(tmp_path / "data" / "sts" / "stsb-test.tsv", PAIRS)
    db = tmp_path / "r.sqlite"
    argv = ["eval", "--model", str(tiny_model_dir), "--suite", "sts:stsb@elong", "--elong", "2", "--data-dir",
            str(tmp_path / "data"), "--db", str(db), "--no-cache", "--backend", "torch", "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    capsys.readouterr()
    scores = ResultsDB(db).scores()
    assert set(scores["variant"]) == {"clean", "elong-2"}
    for info in scores["info"]:
        assert info["suite_version"] == 1
        assert info["data_fingerprint"] == score_info.fingerprint({str(sts)})
        assert info["seconds"] > 0 and info["texts_per_s"] > 0 and info["tokens_per_s"] > info["texts_per_s"]
        assert info["device"] == "cpu" and info["device_name"] and info["dtype"] == "fp32" and info["emb_dtype"] == "fp32"
        assert info["attention"] in ("eager", "sdpa")
        assert info["attention_kernels"] == "sdpa default" and info["attention_path"] == "padded"  # issue 36
        assert info["peak_memory_mb"] > 0 and info["peak_memory_kind"] == "process_rss"
        # where the time went (bench.runtime.stages): this run tokenised and ran the model, wrote no cache
        stages = info["seconds_by_stage"]
        assert set(stages) == {"read", "tokenise", "forward", "cache reads", "cache writes", "search", "scoring"}
        assert stages["tokenise"] > 0 and stages["forward"] > 0 and stages["cache writes"] == 0
        assert 0 < info["texts_encoded"] <= info["texts_asked"]
    runtime = ResultsDB(db).runs().iloc[0]["runtime"]
    assert runtime["attention_kernels"] == "sdpa default" and runtime["precision"] == "fp32"
    # the attack's own keys are kept beside them
    assert "changed_frac" in scores.set_index("variant").loc["elong-2", "info"]
    # another file: another fingerprint
    write_sts(sts, PAIRS[:-1])
    assert score_info.fingerprint({str(sts)}) != scores["info"].iloc[0]["data_fingerprint"]
