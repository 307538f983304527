"""`bench eval --estimate`: sizes from the files, time from a calibration on samples, nothing recorded; a dataset
that is not here is estimated from its published size and named with what to download."""

from __future__ import annotations

import json
import random

import pytest

from bench.cli import main
from bench.experiment.estimate.evaluation import estimate_evaluation
from bench.experiment.eval_spec import EvalOptions, EvalSpec
from results_db import ResultsDB
from results_db.records import json_column

pytestmark = pytest.mark.usefixtures("one_thread")

WORDS = ("cell protein gene study patients results analysis method data effect increase level model "
         "treatment expression response clinical role risk human disease activity growth function").split()


def write_beir(folder, n_docs: int, n_queries: int, seed: int = 0):
    rng = random.Random(seed)
    (folder / "qrels").mkdir(parents=True)
    with open(folder / "corpus.jsonl", "w") as fh:
        for i in range(n_docs):
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 40)))
            fh.write(json.dumps({"_id": f"d{i}", "title": rng.choice(WORDS), "text": text}) + "\n")
    (folder / "queries.jsonl").write_text("".join(
        json.dumps({"_id": f"q{i}", "text": " ".join(rng.choice(WORDS) for _ in range(5))}) + "\n" for i in range(n_queries)))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"q{i}\td{rng.randrange(n_docs)}\t1\n" for i in range(n_queries)))


def spec(model, suites, data_dir, **options) -> EvalSpec:
    return EvalSpec.from_options(EvalOptions.from_options({"model": str(model), "suite": suites,
                                                           "data_dir": str(data_dir), **options}))


def test_the_estimate_counts_the_files_and_sits_beside_the_measured_run(tmp_path, tiny_model_dir):
    """How near its time comes to the measured one is benchmarks/estimate_accuracy.py's (a ratio, on a quiet
    machine): a unit test on a shared machine can only check what the estimate counts and reports."""
    data = tmp_path / "data"
    write_beir(data / "beir" / "toyset", 3000, 40)
    db = tmp_path / "r.sqlite"
    est = estimate_evaluation(spec(tiny_model_dir, "beir:toyset", data, backend="torch", device="cpu"))
    (ds,) = est.datasets
    assert (ds.documents, ds.queries) == (3000, 40)  # the corpus's lines, the judged queries of the qrels
    assert ds.tokens > 3000 * 8 and ds.cache_bytes > 0 and not ds.download
    assert 0.9 * 3040 <= ds.texts <= 1.1 * 3040  # every text counted once: no sample re-encodes an earlier one's
    assert main(["eval", "--model", str(tiny_model_dir), "--suite", "beir:toyset", "--data-dir", str(data), "--db",
                 str(db), "--backend", "torch", "--device", "cpu"]) == 0  # fmt: skip
    runtime = json_column(ResultsDB(db).runs().iloc[-1]["runtime"])
    actual = runtime["evaluation_seconds"]["beir/toyset"]
    assert ds.seconds > 0 and actual > 0
    assert runtime["wall_seconds"] > 0  # the whole command's time, which an estimate predicts

    from bench.experiment.estimate.report import add_actual

    add_actual(est, ResultsDB(db))  # the earlier identical run's time, beside the prediction
    assert est.datasets[0].actual_seconds == pytest.approx(actual)
    assert "actual" in est.lines()[1]


def test_the_samples_of_one_estimate_share_no_document(tmp_path):
    """A document in two samples would be a cache hit in the second (no time, no tokens, no cache bytes): when the
    samples together came near the corpus's size, the estimate counted a quarter of its texts."""
    import random

    from bench.experiment.estimate.data import sample_lines

    write_beir(tmp_path / "toy", 300, 5)
    corpus, taken, rng = tmp_path / "toy" / "corpus.jsonl", set(), random.Random(0)
    first, second = sample_lines(corpus, 150, rng, taken), sample_lines(corpus, 300, rng, taken)
    assert len(first) == 150 and not set(first) & set(second)
    assert len(first) + len(second) <= 300 and len(taken) == len(first) + len(second)


def test_an_estimate_for_data_that_is_not_here_names_what_to_download_and_its_size(tmp_path, tiny_model_dir, capsys):
    (tmp_path / "empty").mkdir()
    db = tmp_path / "r.sqlite"
    assert main(["eval", "--model", str(tiny_model_dir), "--suite", "beir:fever", "--data-dir", str(tmp_path / "empty"),
                 "--db", str(db), "--backend", "torch", "--device", "cpu", "--estimate"]) == 0  # fmt: skip
    out = capsys.readouterr().out.splitlines()
    assert not db.exists()  # nothing recorded, no database created
    (row,) = [ln for ln in out if ln.strip().startswith("beir:fever")]
    assert row.split()[1:3] == ["5.42M", "6,666"] and row.endswith("(not here)")  # BEIR's published figures
    url = "https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/fever.zip"
    assert f"  download fever: {url} (about 1.1 GiB)" in out
    total = out[-1]
    assert total.startswith("total: ") and float(total.split()[1]) > 0 and "downloads about 1.1 GiB" in total
    sampled = estimate_evaluation(spec(tiny_model_dir, "beir:fever", tmp_path / "empty", backend="torch", device="cpu",
                                       limit=50))  # fmt: skip
    assert (sampled.datasets[0].documents, sampled.datasets[0].queries) == (5_416_568, 50)  # 50 queries, whole corpus
    limited = estimate_evaluation(spec(tiny_model_dir, "beir:fever", tmp_path / "empty", backend="torch", device="cpu",
                                       limit=50, limit_mode="first"))  # fmt: skip
    assert (limited.datasets[0].documents, limited.datasets[0].queries) == (550, 50)  # the first N's slice: 10 others each
    assert limited.datasets[0].seconds < float(total.split()[1]) / 100


def test_the_download_total_of_beir14_is_the_sum_over_its_unique_urls(tmp_path, tiny_model_dir, monkeypatch):
    """cqadupstack.zip holds all 12 forums: one download line and its size once in the total (it was counted once
    per forum, 12 times: 9.3 GiB said for 4.5 GiB fetched)."""
    from bench.data import get_info
    from bench.data.catalog import BEIR14
    from bench.data.published import published

    monkeypatch.chdir(tmp_path)  # no ./data, no ../shared/data: none of the 14 is here
    monkeypatch.delenv("LENBENCH_DATA", raising=False)
    (tmp_path / "empty").mkdir()
    est = estimate_evaluation(spec(tiny_model_dir, ["beir14"], tmp_path / "empty", backend="torch", device="cpu",
                                   limit=4), calibration_seconds=1)  # fmt: skip
    from bench.experiment.estimate.data import members

    urls = {get_info(m, kind="beir").source: name for name in BEIR14 for m in members(name)}
    assert len(urls) == len(BEIR14) == 14  # one file per set of BEIR-14 (cqadupstack: one for its 12 forums)
    assert est.download_bytes == sum(published(name).download_bytes for name in urls.values())
    downloads = [line for line in est.lines() if line.startswith("  download ")]
    assert len(downloads) == 14
    (cqa,) = [line for line in downloads if "cqadupstack" in line]
    assert cqa.startswith(f"  download cqadupstack (12 datasets): {get_info('cqadupstack-android').source} (about")
    total = est.lines()[-1]
    assert "downloads about 4." in total, total  # BEIR-14's zips: about 4.5 GiB


def test_the_command_prints_whole_seconds_and_nothing_about_its_scratch_files(tmp_path, tiny_model_dir):
    """The token-id cache of the calibration's scratch folder was closed at exit, after the folder was gone, and
    logged that it could not write its index there; the total had a decimal point at any size."""
    import os
    import re
    import subprocess
    import sys

    from tests.conftest import REPO

    write_beir(tmp_path / "data" / "beir" / "toyset", 400, 10)
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "LENBENCH_CACHE": str(tmp_path / "c")}
    proc = subprocess.run([sys.executable, "-m", "bench.cli", "eval", "--model", str(tiny_model_dir), "--suite",
                           "beir:toyset", "--data-dir", str(tmp_path / "data"), "--backend", "torch", "--device", "cpu",
                           "--estimate", "--calibration-seconds", "2", "--db", str(tmp_path / "r.sqlite")],
                          capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    assert re.match(r"total: \d+ s \(", lines[-1]), lines[-1]  # whole seconds
    assert "not sorted on disk" not in proc.stdout + proc.stderr and "No such file" not in proc.stderr, proc.stderr


def test_cache_bytes_are_counted_as_a_finished_run_leaves_them(tmp_path):
    """An open SQLite cache holds its writes in a write-ahead log, a page once per transaction that rewrote it: the
    calibration's byte count checkpoints the log first, so a sample's bytes are what the closed cache will hold
    (counted raw, AG News' cache was estimated 2.1x its measured size)."""
    import sqlite3

    from bench.experiment.estimate.evaluation import folder_bytes, settled_bytes

    con = sqlite3.connect(tmp_path / "cache.sqlite")
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("CREATE TABLE e (k TEXT PRIMARY KEY, v BLOB)")
    for i in range(300):  # a batch a transaction, as the embedding cache writes
        con.execute("INSERT INTO e VALUES (?, ?)", (f"text {i}", bytes(1536)))
        con.commit()
    raw = folder_bytes(tmp_path)
    settled = settled_bytes(tmp_path)
    con.close()
    closed = folder_bytes(tmp_path)
    assert settled == closed and raw > 1.5 * closed
