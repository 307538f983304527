"""One rank's share of a training batch: the rows it trains on, cut from the global batch the adapter built.

It knows the adapters' batch layout (one row per example in every tensor, global 'n_examples' / 'n_tokens'
counts, `<prefix>attention_mask` padding), so it lives beside the trainer; the rank arithmetic it uses
(`shard_bounds`, `world_size`) is `bench.runtime.distributed`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from bench.runtime.distributed import shard_bounds, world_size
from bench.runtime.errors import TrainingError


def shard_batch(
    batch: dict[str, Any], rank_: int | None = None, world: int | None = None, trim: Sequence[str] = ()
) -> dict[str, Any]:
    """This rank's rows of a global batch: every tensor whose first dimension is the batch's example count is
    sliced; counts ('n_examples', 'n_tokens') stay global (budgets count global examples and tokens).

    `trim`: key prefixes (e.g. "anchor_") whose `<prefix>attention_mask` marks padding: the 2-D tensors of that
    prefix lose the padding columns no row of this shard uses (the batch was padded to its longest row of all
    ranks). A method declares them (its `shard_trim` attribute) when nothing else in its batch is aligned to them.
    """
    w = world_size() if world is None else world
    if w <= 1:
        return batch
    n = int(batch["n_examples"])
    start, end = shard_bounds(n, rank_, w)
    out: dict[str, Any] = {}
    for key, value in batch.items():
        if torch.is_tensor(value) and value.ndim >= 1:
            if value.shape[0] != n:
                raise TrainingError(
                    f"cannot shard batch field {key!r}: its first dimension is {value.shape[0]}, not the batch's "
                    f"{n} examples (a method's batch must hold one row per example to train on several processes)"
                )
            out[key] = value[start:end]
        else:
            out[key] = value
    out["n_local_examples"] = end - start
    for prefix in trim:
        mask = out.get(f"{prefix}attention_mask")
        if not torch.is_tensor(mask) or mask.ndim != 2 or mask.shape[0] == 0:
            continue
        used = mask.any(dim=0).nonzero()
        width = int(used.max()) + 1 if used.numel() else 1
        for key, value in out.items():
            if key.startswith(prefix) and torch.is_tensor(value) and value.ndim == 2 and value.shape[1] == mask.shape[1]:
                out[key] = value[:, :width]
    return out
