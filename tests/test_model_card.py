"""Trained encoders as first-class models: one folder per `bench run`, a model card written from the database,
Run.model_info filled from the model, training checkpoints deleted after success unless --keep-checkpoints, and the
folder loading in sentence-transformers with the card in it."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.cli import main
from results_db import ResultsDB
from tests.conftest import STS_ROWS as ALL_STS_ROWS, write_sts

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: threads only add contention

STS_ROWS = ALL_STS_ROWS[:5]


@pytest.fixture(scope="module")
def finished_run(tiny_model_dir, tmp_path_factory):
    """`bench run` of simcse + mlm (2 steps each) with its untrained baseline."""
    root = tmp_path_factory.mktemp("card")
    write_sts(root / "data" / "sts" / "stsb-test.tsv", STS_ROWS)
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(f"Sentence {i} talks about topic {i % 5} with a few more words." for i in range(30)) + "\n")
    argv = ["run", "--method", "simcse,mlm", "--backbone", str(tiny_model_dir), "--corpus", str(corpus),
            "--budget", "steps=2", "--batch-size", "4", "--max-len", "32", "--checkpoint-every", "1",
            "--suite", "sts:stsb", "--eval-max-len", "64", "--data-dir", str(root / "data"),
            "--db", str(root / "r.sqlite"), "--out", str(root / "runs"), "--no-progress", "--no-cache"]
    assert main(argv) == 0
    return root, argv, ResultsDB(root / "r.sqlite")


def test_all_runs_of_one_bench_run_share_one_folder_and_checkpoints_are_deleted(finished_run, capsys):
    root, _, db = finished_run
    runs = db.runs().set_index("method")
    folders = {Path(d).parent for d in runs["output_dir"]}
    assert len(folders) == 1 and folders.pop().parent == root / "runs"
    for method in ("simcse", "mlm"):
        out = Path(runs.loc[method, "output_dir"])
        assert not (out / "checkpoints").exists()
        assert (out / "encoder" / "model.safetensors").exists() and (out / "encoder" / "README.md").exists()


def test_keep_checkpoints_keeps_the_final_checkpoint(finished_run, tmp_path):
    root, argv, _ = finished_run
    argv = [a for a in argv if a != "simcse,mlm"]
    argv[argv.index("--method") + 1:argv.index("--method") + 1] = ["simcse"]
    argv[argv.index("--out") + 1] = str(tmp_path / "runs")
    argv[argv.index("--db") + 1] = str(tmp_path / "r.sqlite")
    assert main([*argv, "--keep-checkpoints", "--no-baseline"]) == 0
    out = Path(ResultsDB(tmp_path / "r.sqlite").runs()["output_dir"].iloc[0])
    assert (out / "checkpoints" / "LATEST").read_text() == "step-00000002"


def test_model_card_says_what_was_trained_and_holds_the_database_scores(finished_run):
    from bench.train.registry import get_method

    _, _, db = finished_run
    runs = db.runs().set_index("method")
    run = db.get_run(int(runs.loc["simcse", "id"]))
    card = (Path(run["model"]) / "README.md").read_text()
    assert card.startswith("---\nlibrary_name: sentence-transformers\n")
    assert "| method | `simcse` |" in card and get_method("simcse").paper in card
    assert f"| backbone | `{run['backbone']}` |" in card and f"| seed | {run['seed']} |" in card
    assert "| budget asked | steps=2 |" in card and "steps=2, examples=8" in card  # asked and consumed
    assert run["train_corpus"] and run["train_corpus"] in card
    assert f"parameters {run['model_info']['parameters']:,}" in card
    score = db.scores([run["id"]]).set_index("variant").loc["clean", "value"]
    assert f"| sts | stsb | spearman | 5 | {score:.2f} |" in card
    reproduce = card.split("## Reproduce", 1)[1]
    assert "bench run --method simcse" in reproduce and "--budget steps=2" in reproduce and "# from:" not in reproduce


def test_model_info_is_read_from_the_model(finished_run, tiny_model_dir):
    from safetensors.torch import load_file

    _, _, db = finished_run
    runs = db.runs().set_index("method")
    expected = sum(t.numel() for t in load_file(str(tiny_model_dir / "model.safetensors")).values())
    baseline = db.get_run(int(runs.loc["vanilla", "id"]))["model_info"]
    assert baseline["parameters"] == expected and baseline["embedding_dim"] == 32
    for method in ("simcse", "mlm"):  # the saved encoder: no MLM head, max_seq_length = the evaluation max_len
        run = db.get_run(int(runs.loc[method, "id"]))
        saved = sum(t.numel() for t in load_file(str(Path(run["model"]) / "model.safetensors")).values())
        assert run["model_info"] == {**baseline, "parameters": saved, "max_tokens": 64}
        assert saved - expected in (0, 32 * 32 + 32)  # at most transformers' pooler layer added on load


def test_trained_folder_with_its_card_loads_in_sentence_transformers(finished_run):
    st = pytest.importorskip("sentence_transformers")
    import numpy as np

    from bench.encode.encoder import Encoder

    _, _, db = finished_run
    folder = db.runs().set_index("method").loc["simcse", "model"]
    texts = ["A man is playing a guitar.", "The stock market fell sharply."]
    theirs = st.SentenceTransformer(folder, device="cpu").encode(texts, normalize_embeddings=True)
    ours = Encoder.load(folder, use_cache=False, show_progress=False).encode(texts)
    assert np.allclose(ours, theirs, atol=1e-5)


def test_sentence_transformers_scores_what_the_model_card_says(finished_run):
    """Trained with --max-len 32, scored with --eval-max-len 64: the folder declares 64 and the evaluation pooling,
    so SentenceTransformer(folder) gives the card's clean STS score (to 1e-4) and lenbench's vectors for a text
    longer than 32 tokens."""
    st = pytest.importorskip("sentence_transformers")
    import json

    import numpy as np
    from scipy.stats import spearmanr

    from bench.encode.encoder import Encoder

    _, _, db = finished_run
    run = db.get_run(int(db.runs().set_index("method").loc["simcse", "id"]))
    folder = Path(run["model"])
    assert json.loads((folder / "sentence_bert_config.json").read_text())["max_seq_length"] == 64
    model = st.SentenceTransformer(str(folder), device="cpu")
    assert model.max_seq_length == 64
    s1, s2, gold = zip(*STS_ROWS)
    e1, e2 = (model.encode(list(s), normalize_embeddings=True) for s in (s1, s2))
    theirs = float(spearmanr(np.sum(e1 * e2, axis=1), gold).statistic) * 100
    score = float(db.scores([run["id"]]).set_index("variant").loc["clean", "value"])
    assert abs(theirs - score) < 1e-4
    assert f"{score:.2f}" in (folder / "README.md").read_text() and "| max_len / pooling (evaluation) | 64 / mean |" in (folder / "README.md").read_text()
    long_text = " ".join(f"word{i} follows" for i in range(30))  # well over 32 tokens, under 64
    ours = Encoder.load(str(folder), max_len=64, use_cache=False, show_progress=False, backend="torch")
    assert len(ours.tokenize([long_text]).ids[0]) > 32
    assert np.allclose(model.encode([long_text], normalize_embeddings=True), ours.encode([long_text]), atol=1e-5)


def test_bench_eval_records_model_info(tiny_model_dir, tmp_path):
    write_sts(tmp_path / "data" / "sts" / "stsb-test.tsv", STS_ROWS)
    rc = main(["eval", "--model", str(tiny_model_dir), "--suite", "sts:stsb", "--data-dir", str(tmp_path / "data"),
               "--db", str(tmp_path / "e.sqlite"), "--no-cache", "--max-len", "64"])
    assert rc == 0
    info = ResultsDB(tmp_path / "e.sqlite").runs()["model_info"].iloc[0]
    assert info["embedding_dim"] == 32 and info["parameters"] > 0 and info["max_tokens"] > 0


def test_model_card_flags_a_subset_evaluation():
    import pandas as pd

    from bench.report.model_card import render_model_card

    run = {"id": 3, "method": "simcse", "backbone": "minilm", "config": {"eval": {"limit": 100}}, "command": "bench run"}
    scores = pd.DataFrame([{"suite": "sts", "dataset": "stsb", "metric": "spearman", "variant": "clean", "value": 80.0, "n": 100}])
    card = render_model_card(run, scores)
    assert "**Subset:** evaluated on the first 100 items" in card and "| sts | stsb | spearman | 100 | 80.00 |" in card
    assert 'base_model: "sentence-transformers/all-MiniLM-L6-v2"' in card
    assert "Subset" not in render_model_card({**run, "config": {}}, scores)


def test_model_card_calls_a_limit_above_every_sets_size_the_full_set():
    """`--limit 1000000` scored the whole of each dataset: the card does not call those scores a subset."""
    import pandas as pd

    from bench.report.model_card import render_model_card

    run = {"id": 3, "method": "simcse", "backbone": "minilm", "config": {"eval": {"limit": 1000000}}, "command": "bench run"}
    row = {"suite": "sts", "dataset": "stsb", "metric": "spearman", "variant": "clean", "value": 80.0, "n": 1379}
    whole = pd.DataFrame([{**row, "info": {"limit_above_size": 1000000}}])
    assert "Subset" not in render_model_card(run, whole)
    cut = pd.DataFrame([{**row, "info": {"limit_above_size": 1000000}}, {**row, "dataset": "sts12", "info": {"limit": 1000000}}])
    assert "**Subset:** evaluated on the first 1000000 items" in render_model_card(run, cut)


def test_a_resumed_bench_run_keeps_every_run_in_the_first_folder(finished_run, tmp_path, monkeypatch):
    """The first attempt dies evaluating simcse (mlm's row never created); --resume puts mlm beside it."""
    import bench.evaluate.runner

    _, argv, _ = finished_run
    argv = list(argv)
    argv[argv.index("--out") + 1] = str(tmp_path / "runs")
    argv[argv.index("--db") + 1] = str(tmp_path / "r.sqlite")
    real = bench.evaluate.runner.evaluate
    monkeypatch.setattr(bench.evaluate.runner, "evaluate", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt()))
    assert main([*argv, "--no-baseline"]) == 130
    monkeypatch.setattr(bench.evaluate.runner, "evaluate", real)
    first = ResultsDB(tmp_path / "r.sqlite").runs()
    assert first["method"].tolist() == ["simcse"] and first["status"].tolist() == ["interrupted"]  # Ctrl-C: a clean stop, resumable
    assert main([*argv, "--no-baseline", "--resume"]) == 0
    runs = ResultsDB(tmp_path / "r.sqlite").runs()
    assert runs["method"].tolist() == ["simcse", "mlm"] and set(runs["status"]) == {"finished"}
    assert {Path(d).parent for d in runs["output_dir"]} == {Path(first["output_dir"].iloc[0]).parent}
