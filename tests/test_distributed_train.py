"""Training on several processes (gloo, CPU) equals training on one: same loss at every step, same final weights.

Two processes with global batch 8 (4 rows each, positives gathered across ranks) against one process with batch
8, for simcse (dropout off: with dropout on, the masks of 8 rows cannot be split into two sets of 4) and
laser3-self (random m drawn from the shared rng), mlm (masked-token mean over both ranks) and esimcse (its
momentum queue holds whole global batches on every rank).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.usefixtures("one_thread")

TEXTS = [
    f"Sentence {i} talks about subject {i % 6}{' with many more words to pad the batch' * (i % 3)}. "
    f"A second sentence adds detail number {i}."
    for i in range(40)
]
METHODS = ("simcse", "laser3-self", "mlm", "esimcse")
STEPS = 4


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def train_methods(model_dir: str, out_root: str) -> dict[str, dict]:
    """Each method for STEPS steps from the same tiny BERT with every dropout off; losses and final weights."""
    from transformers import AutoModel, AutoTokenizer

    from bench.train import Budget, TrainConfig, TrainJob, train
    from bench.train.registry import get_method
    from methods.simcse import set_dropout

    tok = AutoTokenizer.from_pretrained(model_dir)
    cfg = TrainConfig(max_len=32, batch_size=8, lr=1e-4, progress=False, checkpoint_every=0, seed=3)
    out = {}
    for method in METHODS:
        adapter = get_method(method).build(tokenizer=tok, max_len=32, seed=3)
        if method == "simcse":
            adapter.config.dropout = 0.0  # setup() applies it: dropout off for an exact comparison
        model = AutoModel.from_pretrained(model_dir, add_pooling_layer=False)  # the pooler would be random, unused
        set_dropout(model, 0.0)
        job = TrainJob(TEXTS, Budget(steps=STEPS), cfg, Path(out_root) / method, save_encoder_dir=None)
        result = train(adapter, model, tok, job)
        out[method] = {
            "losses": result.losses,
            "weights": {k: v.detach().clone() for k, v in model.state_dict().items()},
            "examples": result.consumed.examples,
            "tokens": result.consumed.tokens,
        }
    return out


def _worker(rank: int, world: int, port: int, model_dir: str, out_root: str) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
        LOCAL_WORLD_SIZE=str(world),
    )
    torch.set_num_threads(1)
    from bench.runtime import distributed

    assert distributed.init_from_env("cpu")
    try:
        result = train_methods(model_dir, out_root)
        torch.save(result, Path(out_root) / f"rank{rank}.pt")
    finally:
        distributed.shutdown()


def test_two_processes_train_exactly_as_one(tiny_model_dir, tmp_path):
    import torch.multiprocessing as mp

    single = train_methods(str(tiny_model_dir), str(tmp_path / "single"))
    (tmp_path / "multi").mkdir()
    mp.spawn(_worker, args=(2, free_port(), str(tiny_model_dir), str(tmp_path / "multi")), nprocs=2, join=True)
    ranks = [torch.load(tmp_path / "multi" / f"rank{r}.pt") for r in range(2)]
    for method in METHODS:
        one, two = single[method], ranks[0][method]
        assert len(one["losses"]) == len(two["losses"]) == STEPS
        assert one["losses"][0] != one["losses"][-1]  # it trained
        for step, (a, b) in enumerate(zip(one["losses"], two["losses"]), 1):
            assert abs(a - b) < 1e-5, f"{method} step {step}: one process {a}, two processes {b}"
        assert two["losses"] == ranks[1][method]["losses"]  # every rank reports the global loss
        assert (one["examples"], one["tokens"]) == (two["examples"], two["tokens"])  # budgets count globally
        for name, w in one["weights"].items():
            torch.testing.assert_close(two["weights"][name], w, atol=1e-5, rtol=0, msg=f"{method}: {name}")
            assert torch.equal(ranks[1][method]["weights"][name], two["weights"][name])  # ranks stay identical


def test_batch_size_must_divide_over_processes():
    from bench.runtime.errors import ConfigError
    from bench.train.trainer import per_rank_batch

    assert per_rank_batch(64, 8) == 8
    with pytest.raises(ConfigError, match="multiple of 4"):
        per_rank_batch(10, 4)
