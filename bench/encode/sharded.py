"""Sharded encoding under torchrun: every rank encodes a disjoint share of each text list, every rank gets it all.

`ShardedEncoder` wraps an encoder (anything with the `bench.encode.encoder.Encoder` API) and changes only `encode` and
`token_embeddings`; everything else (name, tokenizer, max_len, fingerprint, cache...) is the wrapped encoder's.
The suites run unchanged on every rank, in lockstep: each call's distinct texts are spread over the ranks
(sorted by length and dealt round-robin, so shares cost about the same), each rank encodes its share through
the wrapped encoder (its embedding cache included), and the vectors come back to every rank in one all_gather.
So a text is encoded once across ranks, and every rank holds the same embeddings as one process would: the
scores are the single-process scores. Rank 0 writes them (bench.evaluate.runner); the other ranks' copies of the
search and scoring are the price of running the suites' code unchanged.

Nothing here runs without a process group of more than one rank: `shard_encoder` returns the encoder as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from bench.runtime import distributed


def shard_encoder(model: Any) -> Any:
    """The model wrapped for sharded encoding under several processes; unchanged otherwise (or without encode)."""
    if not distributed.active() or not callable(getattr(model, "encode", None)) or isinstance(model, ShardedEncoder):
        return model
    return ShardedEncoder(model)


def _share(texts: Sequence[str], rank: int, world: int) -> list[int]:
    """Indices of this rank's texts: sorted by length, dealt round-robin."""
    order = sorted(range(len(texts)), key=lambda i: (len(texts[i]), i))
    return order[rank::world]


class ShardedEncoder:
    window = 100_000  # texts per lockstep window (of each encode call)

    def __init__(self, inner: Any):
        self.inner = inner
        if not distributed.is_main() and hasattr(inner, "show_progress"):
            inner.show_progress = False  # progress bars from rank 0 only

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def encode(
        self,
        texts: Sequence[str],
        batch_size: int | None = None,
        desc: str = "encode",
        use_cache: bool | None = None,
        normalize: bool = True,
        **kwargs: Any,
    ) -> np.ndarray:
        # Only the options the caller set are passed on, so the wrapped encoder's own defaults apply.
        options = {k: v for k, v in (("batch_size", batch_size), ("use_cache", use_cache)) if v is not None}
        options.update(kwargs, desc=desc)
        if not normalize:
            options["normalize"] = False
        n = len(texts)
        if not n:  # the same on every rank: no collective needed
            return self.inner.encode([], **options)
        out: np.ndarray | None = None
        # Window by window (every rank walks the same windows), so a corpus is never listed whole and the gathered
        # float32 rows are bounded by one window; the result is the wrapped encoder's matrix type (memmap above its
        # threshold, --emb-dtype).
        for start in range(0, n, self.window):
            vectors = self._encode_window(list(texts[start : start + self.window]), options)
            if out is None:
                allocate = getattr(self.inner, "_allocate", None)
                out = allocate(n, vectors.dtype) if allocate else np.empty((n, vectors.shape[1]), vectors.dtype)
            out[start : start + len(vectors)] = vectors
        return out

    def _encode_window(self, texts: list[str], options: dict[str, Any]) -> np.ndarray:
        unique = list(dict.fromkeys(texts))
        world, rank = distributed.world_size(), distributed.rank()
        mine = _share(unique, rank, world)
        local = self.inner.encode([unique[i] for i in mine], **options)
        import torch  # only under several ranks: a single process never imports it here

        rows = distributed.all_gather_rows(torch.from_numpy(np.ascontiguousarray(local, dtype=np.float32)))
        vectors = np.empty((len(unique), rows.shape[1]), dtype=np.float32)
        start = 0
        for r in range(world):
            idx = _share(unique, r, world)
            vectors[idx] = rows[start : start + len(idx)].numpy()
            start += len(idx)
        position = {t: i for i, t in enumerate(unique)}
        return vectors[[position[t] for t in texts]].astype(local.dtype, copy=False)  # e.g. --emb-dtype fp16

    def token_embeddings(self, texts: Sequence[str], batch_size: int | None = None) -> list[np.ndarray]:
        texts = list(texts)
        if not texts:
            return []
        world, rank = distributed.world_size(), distributed.rank()
        mine = _share(texts, rank, world)
        options = {} if batch_size is None else {"batch_size": batch_size}
        local = self.inner.token_embeddings([texts[i] for i in mine], **options) if mine else []
        out: list[np.ndarray | None] = [None] * len(texts)
        for r, arrays in enumerate(distributed.all_gather_object(local)):
            for i, array in zip(_share(texts, r, world), arrays):
                out[i] = array
        return out  # type: ignore[return-value]
