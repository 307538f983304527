"""Progress output without a terminal: a few lines per stage in a log, nothing but results with --no-progress."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

from bench.runtime import progress
from bench.runtime.progress import LineProgress

REPO = Path(__file__).resolve().parent.parent


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_long_stage_writes_a_line_at_most_every_30_seconds_and_one_at_the_end():
    clock, out = FakeClock(), io.StringIO()
    bar = LineProgress(10_000, "encode", "text", clock=clock, stream=out)
    for i in range(1, 10_001):  # 10,000 updates over 100 s: a tqdm bar in a file would write a line per redraw
        clock.now = i / 100
        bar.update(1)
    bar.close()
    lines = out.getvalue().splitlines()
    # first line after 10 s, then every 30 s (40, 70, 100 is the end: no running line there), then the closing one
    assert len(lines) == 4, lines
    assert lines[0].startswith("encode: 1,000/10,000 texts (10%)") and "ETA 1 min 30 s" in lines[0]
    assert lines[-1].startswith("encode: 10,000/10,000 texts") and lines[-1].endswith("(done)")


def test_a_short_stage_writes_only_its_closing_line_and_a_silent_one_nothing():
    clock, out = FakeClock(), io.StringIO()
    bar = LineProgress(300, "stsb clean", "text", clock=clock, stream=out)
    clock.now = 2.0
    bar.update(300)
    bar.set_postfix(loss="1.0e+00")
    bar.close()
    bar.close()
    assert out.getvalue().splitlines() == ["stsb clean: 300/300 texts, 2.0 s, 150.0 texts/s, loss=1.0e+00 (done)"]
    quiet = io.StringIO()
    silent = LineProgress(300, "x", "text", clock=clock, stream=quiet, silent=True)
    clock.now = 100.0
    silent.update(300)
    silent.close()
    assert quiet.getvalue() == ""


def test_mode_follows_the_terminal_the_flag_and_the_environment(monkeypatch):
    monkeypatch.delenv(progress.ENV, raising=False)
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # not a terminal
    assert progress.configure() == "lines"
    assert os.environ[progress.ENV] == "lines"  # inherited by the processes a command starts
    progress.restore()
    assert progress.ENV not in os.environ
    assert progress.configure(quiet=True) == "off"
    assert isinstance(progress.bar(total=10), LineProgress)
    progress.restore()
    monkeypatch.setenv(progress.ENV, "bar")
    assert progress.configure() == "bar"
    progress.restore()


def test_pooler_only_load_report_is_dropped_and_other_reports_kept():
    import logging

    f = progress._PoolerOnlyReport()

    def record(message: str) -> logging.LogRecord:
        return logging.LogRecord("transformers.modeling_utils", logging.WARNING, __file__, 1, message, None, None)

    pooler = ("BertModel LOAD REPORT from: x\nKey                 | Status  | \n--------------------+---------+-\n"
              "pooler.dense.weight | MISSING | \npooler.dense.bias   | MISSING | \n\nNotes:\n- MISSING: ...")  # fmt: skip
    other = pooler.replace("pooler.dense.bias  ", "encoder.layer.0.x")
    assert not f.filter(record(pooler))
    assert f.filter(record(other))
    assert f.filter(record("some other warning"))


def _bench(args: list[str], cwd: Path, env: dict[str, str]) -> list[str]:
    log = cwd / "log.txt"
    with open(log, "w") as fh:  # stdout and stderr to a file: no terminal, as in a job's log
        done = subprocess.run([sys.executable, "-m", "bench", *args], cwd=cwd, env=env, stdout=fh, stderr=subprocess.STDOUT,
                              timeout=300)  # fmt: skip
    text = log.read_text()
    assert done.returncode == 0, text
    return text.splitlines()


def test_clean_sts_b_eval_into_a_file_writes_a_few_lines(tmp_path, tiny_model_dir):
    env = {k: v for k, v in os.environ.items() if k != progress.ENV}
    env["LENBENCH_CACHE"] = str(tmp_path / "cache")
    args = ["eval", "--model", str(tiny_model_dir), "--suite", "sts:stsb", "--db", str(tmp_path / "r.sqlite"),
            "--data-dir", str(tmp_path)]  # fmt: skip
    lines = _bench(args, tmp_path, env)  # the whole STS-B test set (packaged), an ONNX export, a model load
    assert len(lines) <= 15, lines
    text = "\n".join(lines)
    assert "LOAD REPORT" not in text and "Writing model shards" not in text and "\r" not in text
    assert any(line.startswith("stsb clean: 2,758/2,758 texts") for line in lines), lines
    assert any("spearman 1379" in line for line in lines), lines
    quiet = _bench(args + ["--no-progress", "--limit", "20"], tmp_path, env)
    # results only: which file was scored, the run line and the table; no export or progress lines
    assert [line.split()[0] for line in quiet[:2]] == ["data", "run"], quiet
    assert not any(line.startswith(("stsb clean:", "exporting")) for line in quiet), quiet


def test_no_progress_silences_hugging_face_bars_of_code_lenbench_does_not_call(tmp_path, tiny_model_dir):
    """With --no-progress set before transformers is imported, a save_pretrained that lenbench does not wrap (a
    plug-in's, or a library's) prints no "Writing model shards" bar either, nor does a process it starts."""
    child = f"from transformers import AutoModel; AutoModel.from_pretrained({str(tiny_model_dir)!r}).save_pretrained({str(tmp_path / 'child')!r})"
    code = (
        "import subprocess, sys\n"
        "from bench.runtime import progress\n"
        "progress.configure(quiet=True)\n"
        "from transformers import AutoModel\n"
        f"AutoModel.from_pretrained({str(tiny_model_dir)!r}).save_pretrained({str(tmp_path / 'out')!r}, max_shard_size='1MB')\n"
        f"subprocess.run([sys.executable, '-c', {child!r}], check=True)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in (progress.ENV, "HF_HUB_DISABLE_PROGRESS_BARS")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert len(list((tmp_path / "out").glob("*.safetensors"))) > 1  # sharded: the bar had several shards to show
    assert "Writing model shards" not in proc.stderr + proc.stdout and "\r" not in proc.stderr, proc.stderr
