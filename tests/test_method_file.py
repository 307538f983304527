"""A method is one file passed by path (`bench run --method ./my_method.py`): nothing installed, its content part of
its runs' identity (an edit gives a new run, an unchanged file reuses its row), and the small contract
(`lenbench.contrastive`, a text-to-positive function over a batch of texts) trains like the built-in pair methods."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import write_sts

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.usefixtures("one_thread")

SHUFFLE = '''\
from dataclasses import dataclass

from lenbench import contrastive, hp


@dataclass
class Config:
    min_words: int = hp(2, ge=1, lt=1000)


@contrastive(config=Config)
def word_shuffle(texts, config, rng):
    """text vs its words shuffled"""
    out = []
    for text in texts:
        words = text.split()
        out.append(" ".join(rng.sample(words, len(words))) if len(words) >= config.min_words else None)
    return out
'''


def _setup(tmp_path: Path) -> list[str]:
    data = tmp_path / "data"
    write_sts(data / "sts" / "stsb-test.tsv", [
        ("A man is playing a guitar.", "A man plays the guitar.", 4.8),
        ("A woman is slicing onions.", "A man is riding a horse.", 0.4),
        ("The cat sleeps on the sofa.", "A cat is sleeping on a couch.", 4.5),
        ("Stocks fell sharply today.", "Children play football outside.", 0.0),
        ("The train arrived late.", "The train was delayed.", 4.0),
    ])
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(f"sentence number {i} about topic {i % 7} and some more words" for i in range(40)) + "\n")
    return ["--backbone", "minilm", "--corpus", str(corpus), "--suite", "sts:stsb", "--data-dir", str(data),
            "--db", str(tmp_path / "r.sqlite"), "--out", str(tmp_path / "runs"), "--batch-size", "4", "--max-len", "32",
            "--eval-max-len", "64", "--budget", "steps=2", "--no-progress", "--no-baseline"]  # fmt: skip


def _bench(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """A fresh `bench` process, run from the method's folder, with nothing but the checkout on its path."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(cwd), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
           "LENBENCH_CACHE": str(cwd / "cache")}  # fmt: skip
    return subprocess.run([sys.executable, "-m", "bench", *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=600)  # fmt: skip


def test_a_method_file_runs_from_its_folder_and_its_content_is_its_identity(tmp_path):
    from results_db import ResultsDB

    method = tmp_path / "my_method.py"
    method.write_text(SHUFFLE)
    common = _setup(tmp_path)
    first = _bench(["run", "--method", "./my_method.py", *common], tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    db = ResultsDB(tmp_path / "r.sqlite")
    runs = db.runs()
    assert runs["method"].tolist() == ["word-shuffle"] and runs["status"].tolist() == ["finished"]
    run = db.get_run(int(runs["id"].iloc[0]))
    import hashlib

    sha = hashlib.sha256(method.read_bytes()).hexdigest()
    assert run["config"]["method_file_sha256"] == sha and run["config"]["method_config"] == {"min_words": 2}
    assert run["runtime"]["method_source"] == {"file": str(method), "sha256": sha}
    assert "--method ./my_method.py:word-shuffle" in run["command"]

    again = _bench(["run", "--method", "./my_method.py", *common], tmp_path)  # unchanged: the same row, reused
    assert again.returncode == 0, again.stdout + again.stderr
    assert len(db.runs()) == 1

    method.write_text(SHUFFLE.replace("min_words: int = hp(2,", "min_words: int = hp(3,"))  # edited: a new run
    edited = _bench(["run", "--method", "./my_method.py", *common], tmp_path)
    assert edited.returncode == 0, edited.stdout + edited.stderr
    runs = db.runs()
    assert len(runs) == 2 and set(runs["status"]) == {"finished"}
    second = db.get_run(int(runs["id"].max()))
    assert second["config"]["method_file_sha256"] != sha and second["config"]["method_config"] == {"min_words": 3}


def test_the_positives_function_sees_whole_batches_and_a_per_text_one_is_batched(tmp_path):
    from bench.encode.backbones import reference_tokenizer_dir
    from bench.train.registry import get_method
    from transformers import AutoTokenizer

    calls: list[int] = []
    batched = tmp_path / "batched.py"
    batched.write_text(SHUFFLE.replace("word_shuffle", "batched_shuffle"))
    per_text = tmp_path / "per_text.py"
    per_text.write_text("from lenbench import contrastive\n\n\n@contrastive(per_text=True)\n"
                        "def upper(text, config, rng):\n    return text.upper()\n")
    tokenizer = AutoTokenizer.from_pretrained(reference_tokenizer_dir())
    texts = ["one two three four", "five six seven eight", "x", "nine ten eleven"]
    spec = get_method(str(batched))
    adapter = spec.build(tokenizer=tokenizer, max_len=32)
    fn = adapter.contract.fn
    adapter.contract = type(adapter.contract)(lambda t, c, r: calls.append(len(t)) or fn(t, c, r))
    batch = adapter.make_batch(texts, random.Random(0))
    assert calls == [4] and batch["n_examples"] == 3  # one call for the batch; "x" (one word) skipped
    upper = get_method(str(per_text)).build(tokenizer=tokenizer, max_len=32)
    pairs = upper.pairs(["a b", "c d"], random.Random(0))
    assert [tokenizer.decode(p[1][1:-1]) for p in pairs] == ["a b", "c d"]  # the uncased vocab: upper = same ids
