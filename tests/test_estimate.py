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


def test_the_estimate_counts_the_files_and_its_time_is_near_the_measured_one(tmp_path, tiny_model_dir):
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
    assert actual / 3 <= ds.seconds <= actual * 3, (ds.seconds, actual)  # loose: a shared machine's timings
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
    limited = estimate_evaluation(spec(tiny_model_dir, "beir:fever", tmp_path / "empty", backend="torch", device="cpu",
                                       limit=50))  # fmt: skip
    assert (limited.datasets[0].documents, limited.datasets[0].queries) == (550, 50)  # --limit's slice: 10 others each
    assert limited.datasets[0].seconds < float(total.split()[1]) / 100
