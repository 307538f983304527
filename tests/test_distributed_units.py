"""The pure parts of multi-process runs, without processes: how a global batch and a text list are split over
ranks, and how `--nproc` is taken out of the re-launched command line."""

from __future__ import annotations

import pytest
import torch

from bench.runtime.distributed import shard_bounds
from bench.runtime.launch import strip_option
from bench.train.sharding import shard_batch
from bench.runtime.errors import TrainingError
from bench.encode.sharded import _share


@pytest.mark.parametrize("n,world", [(8, 2), (7, 2), (10, 4), (3, 3)])
def test_shards_are_contiguous_disjoint_and_cover_the_batch(n, world):
    bounds = [shard_bounds(n, r, world) for r in range(world)]
    assert bounds[0][0] == 0 and bounds[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
    sizes = [e - s for s, e in bounds]
    assert max(sizes) - min(sizes) <= 1


def test_shard_batch_takes_rows_keeps_global_counts_and_drops_unused_padding():
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]])
    batch = {"anchor_input_ids": torch.arange(20).reshape(4, 5) * mask, "anchor_attention_mask": mask,
             "labels": torch.arange(4), "n_examples": 4, "n_tokens": 11}
    first = shard_batch(batch, 0, 2, trim=("anchor_",))
    second = shard_batch(batch, 1, 2, trim=("anchor_",))
    assert first["anchor_input_ids"].tolist() == [[0, 1, 2, 3, 4], [5, 6, 0, 0, 0]]  # row 0 uses all 5 columns
    assert second["anchor_input_ids"].tolist() == [[10, 11, 12], [15, 0, 0]]  # 2 unused padding columns dropped
    assert second["anchor_attention_mask"].shape == (2, 3) and second["labels"].tolist() == [2, 3]
    assert (second["n_examples"], second["n_tokens"], second["n_local_examples"]) == (4, 11, 2)
    assert shard_batch(batch, 1, 2)["anchor_input_ids"].shape == (2, 5)  # no trim asked: widths kept
    assert shard_batch(batch, 0, 1) is batch


def test_shard_batch_refuses_a_field_that_is_not_one_row_per_example():
    batch = {"input_ids": torch.zeros(4, 3), "queue": torch.zeros(9, 3), "n_examples": 4}
    with pytest.raises(TrainingError, match="'queue'.*first dimension is 9"):
        shard_batch(batch, 0, 2)


def test_text_shares_partition_the_texts_with_balanced_lengths():
    texts = [("word " * (i % 13)) + str(i) for i in range(101)]
    shares = [_share(texts, r, 4) for r in range(4)]
    assert sorted(i for s in shares for i in s) == list(range(101))
    chars = [sum(len(texts[i]) for i in s) for s in shares]
    assert max(chars) - min(chars) < max(len(t) for t in texts) * 2  # dealt by length: no rank gets all long ones


def test_nproc_is_stripped_from_the_relaunched_command():
    argv = ["run", "--nproc", "2", "--method", "simcse", "--nproc=4", "--batch-size", "8"]
    assert strip_option(argv, "--nproc") == ["run", "--method", "simcse", "--batch-size", "8"]


def test_sharded_encode_goes_window_by_window_and_keeps_order_duplicates_and_dtype(monkeypatch):
    """One rank (the collectives are identities): several windows, repeated texts, fp16 out, same rows as unsharded."""
    import numpy as np
    import torch

    from bench.encode import sharded
    from bench.runtime import distributed

    class Inner:
        calls: list[int] = []

        def encode(self, texts, **options):
            self.calls.append(len(texts))
            vecs = np.array([[len(t), sum(map(ord, t)) % 97, 1.0] for t in texts], dtype=np.float32).reshape(-1, 3)
            return vecs.astype(np.float16)

    monkeypatch.setattr(distributed, "world_size", lambda: 1)
    monkeypatch.setattr(distributed, "rank", lambda: 0)
    monkeypatch.setattr(distributed, "is_main", lambda: True)
    monkeypatch.setattr(distributed, "all_gather_rows", lambda rows: torch.cat([rows]))
    texts = ["a", "bb", "a", "ccc", "dddd", "bb", "eeeee", "a"]
    enc = sharded.ShardedEncoder(Inner())
    enc.window = 3
    out = enc.encode(texts)
    assert out.dtype == np.float16 and Inner.calls == [2, 3, 2]  # windows of 3: each window's distinct texts once
    assert np.array_equal(out, Inner().encode(texts))
