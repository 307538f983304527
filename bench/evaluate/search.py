"""Exact inner-product top-k search in blocks: the documents best for each query, by dot product (cosine for
normalised embeddings), with one ranking rule on every device.

    exact_search(query_emb, doc_emb, k, device="cpu") -> (scores, indices)   # each (n_queries, min(k, n_docs))

The ranking rule: score descending, then document index ascending. Exact ties are broken that way everywhere (also
at the k-th place, where a plain top-k keeps any of the tied documents), so a corpus with duplicate documents ranks
the same on the CPU, on a GPU and from one run to the next.

Memory. The documents are read DOC_BLOCK rows at a time, in order, each block once (the outer loop); the queries
are scored against it QUERY_BLOCK at a time, and each query keeps its running top k. So `doc_emb` may be a float16
matrix or a disk memmap larger than memory, and no queries x corpus matrix is ever made: at most one block of
QUERY_BLOCK x DOC_BLOCK scores (plus the n_queries x k best).

Devices. On the CPU numpy's BLAS multiplies float32 blocks (no torch import). On an accelerator torch does, with
both matrices in float16 and the products summed in float32 (`torch.mm(..., out_dtype=float32)` where this torch
has it on CUDA; else the float16 values are widened to float32 first, the same numbers): half the bytes moved and
tensor-core speed, scores in float32. The float16 rounding of the embeddings (relative 2^-11 per value) moves a
score of unit vectors by at most about 1e-3, so only documents that close to each other can swap places between
the CPU and a GPU; exact ties, and everything further apart, rank the same. A document block with a value beyond
float16's range is scored in float32. `search_torch` runs on CPU tensors too (the tests compare it with the numpy
path and, where installed, faiss's IndexFlatIP).
"""

from __future__ import annotations

from typing import Any

import numpy as np

# Queries x documents scored per matrix product: bounds the scores block to QUERY_BLOCK * DOC_BLOCK float32 values
# (26 MB; with its negation, argpartition's int64 indices and the tie mask about 110 MB: at 1,024 x 50,000 that was
# 0.8 GB of a CPU evaluation's peak). Documents are the outer loop, so a smaller query block reads no document
# twice. An accelerator takes larger blocks (fewer kernel launches, longer top-k rows); ACCELERATOR_* below.
QUERY_BLOCK = 256
DOC_BLOCK = 25_000
ACCELERATOR_QUERY_BLOCK = 2048
ACCELERATOR_DOC_BLOCK = 131_072  # 2,048 x 131,072 float32 scores: 1 GiB on the device
FP16_MAX = 65504.0

_MIXED_MM: dict[str, bool] = {}  # device type -> torch.mm(fp16, fp16, out_dtype=float32) works there


def exact_search(query_emb: np.ndarray, doc_emb: np.ndarray, k: int, device: Any = "cpu") -> tuple[np.ndarray, np.ndarray]:
    """Top-k documents per query (see the module docstring): (scores float32, indices int64), each
    (n_queries, min(k, n_docs)), best first; equal scores by document index ascending."""
    n_q, n_d = len(query_emb), len(doc_emb)
    k = min(k, n_d)
    if k == 0 or n_q == 0:
        return np.zeros((n_q, k), dtype=np.float32), np.zeros((n_q, k), dtype=np.int64)
    if str(device).split(":")[0] == "cpu":
        return search_numpy(query_emb, doc_emb, k)
    return search_torch(query_emb, doc_emb, k, device)


# ----------------------------------------------------------------------------------------- numpy (CPU)
def search_numpy(query_emb: np.ndarray, doc_emb: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    n_q, n_d = len(query_emb), len(doc_emb)
    k = min(k, n_d)
    best_s = np.zeros((n_q, 0), dtype=np.float32)
    best_i = np.zeros((n_q, 0), dtype=np.int64)
    query_blocks = [np.ascontiguousarray(query_emb[s : s + QUERY_BLOCK], dtype=np.float32) for s in range(0, n_q, QUERY_BLOCK)]
    for ds in range(0, n_d, DOC_BLOCK):
        block_t = np.ascontiguousarray(doc_emb[ds : ds + DOC_BLOCK], dtype=np.float32).T
        new_s, new_i = [], []
        for q in query_blocks:
            s, i = top_of_block_numpy(q @ block_t, k)
            new_s.append(s)
            new_i.append(i + ds)
        best_s, best_i = merge_numpy(best_s, best_i, np.concatenate(new_s), np.concatenate(new_i), k)
    return best_s, best_i


def top_of_block_numpy(sims: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k best columns of each row by the ranking rule, best first: (scores, column indices)."""
    n = sims.shape[1]
    if k < n:
        cols = np.argpartition(-sims, k - 1, axis=1)[:, :k]
        edge = np.take_along_axis(sims, cols, axis=1).min(axis=1)
        # rows where a document tied with the k-th score was left out: there the lowest-indexed of the ties win,
        # which a stable sort of the whole row gives (rare: exact ties at the boundary)
        crowded = np.flatnonzero(np.count_nonzero(sims >= edge[:, None], axis=1) > k)
        if len(crowded):
            cols[crowded] = np.argsort(-sims[crowded], axis=1, kind="stable")[:, :k]
    else:
        cols = np.broadcast_to(np.arange(n), sims.shape)
    cols = np.sort(cols, axis=1)  # by index, then a stable sort by score: ties stay in index order
    order = np.argsort(-np.take_along_axis(sims, cols, axis=1), axis=1, kind="stable")
    cols = np.take_along_axis(cols, order, axis=1)
    return np.take_along_axis(sims, cols, axis=1), cols


def merge_numpy(best_s: np.ndarray, best_i: np.ndarray, s: np.ndarray, i: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Running top k of each row with a later block's (every index in `i` above every index in `best_i`): both are
    in ranking order, so a stable sort of the concatenation by score keeps the index order of ties."""
    s, i = np.concatenate([best_s, s], axis=1), np.concatenate([best_i, i], axis=1)
    order = np.argsort(-s, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(s, order, axis=1), np.take_along_axis(i, order, axis=1)


# ------------------------------------------------------------------------------------ torch (accelerator)
def search_torch(query_emb: np.ndarray, doc_emb: np.ndarray, k: int, device: Any, half: bool = True,
                 query_block: int | None = None, doc_block: int | None = None) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The same search with torch on `device` (an accelerator, or the CPU in tests): float16 matrices and float32
    scores when `half`, else float32 throughout. Each document block is copied to the device once."""
    import torch

    n_q, n_d = len(query_emb), len(doc_emb)
    k = min(k, n_d)
    query_block = query_block or ACCELERATOR_QUERY_BLOCK
    doc_block = doc_block or ACCELERATOR_DOC_BLOCK
    queries = torch.from_numpy(host_rows(query_emb, np.float32)).to(device)
    queries_half = queries.half() if half and bool(queries.abs().max() <= FP16_MAX) else None
    best_s = torch.zeros((n_q, 0), dtype=torch.float32, device=device)
    best_i = torch.zeros((n_q, 0), dtype=torch.int64, device=device)
    with torch.inference_mode():
        for ds in range(0, n_d, doc_block):
            block = torch.from_numpy(host_rows(doc_emb[ds : ds + doc_block])).to(device)
            block_half = None
            if queries_half is not None and bool(block.abs().max() <= FP16_MAX):
                block_half = block if block.dtype == torch.float16 else block.half()
            block = block.float() if block_half is None else None
            new_s, new_i = [], []
            for qs in range(0, n_q, query_block):
                if block_half is not None:
                    sims = half_product(queries_half[qs : qs + query_block], block_half)
                else:
                    sims = queries[qs : qs + query_block] @ block.T
                s, i = top_of_block_torch(sims, k)
                new_s.append(s)
                new_i.append(i + ds)
            best_s, best_i = merge_torch(best_s, best_i, torch.cat(new_s), torch.cat(new_i), k)
    return best_s.cpu().numpy(), best_i.cpu().numpy()


def host_rows(rows: np.ndarray, dtype: Any = None) -> np.ndarray:
    """A contiguous, writable in-memory copy of rows when they are not one already (torch wraps only writable
    arrays; a read-only memmap's rows are read here)."""
    out = np.ascontiguousarray(rows, dtype=dtype)
    return out if out.flags.writeable and not isinstance(out, np.memmap) else np.array(out)


def half_product(q: Any, d: Any) -> Any:
    """q @ d.T of two float16 matrices as float32 scores, summed in float32."""
    import torch

    kind = q.device.type
    if kind not in _MIXED_MM:
        try:
            probe = torch.ones((2, 4), dtype=torch.float16, device=q.device)
            _MIXED_MM[kind] = torch.mm(probe, probe.T, out_dtype=torch.float32).dtype == torch.float32
        except (TypeError, RuntimeError, NotImplementedError):  # no mixed-output matmul in this torch or on this device
            _MIXED_MM[kind] = False
    if _MIXED_MM[kind]:
        return torch.mm(q, d.T, out_dtype=torch.float32)
    return q.float() @ d.float().T  # the same products: float16 values are exact in float32


def top_of_block_torch(sims: Any, k: int) -> tuple[Any, Any]:
    """`top_of_block_numpy` in torch (on the scores' device)."""
    import torch

    rows, n = sims.shape
    if k < n:
        top, cols = torch.topk(sims, k, dim=1)
        crowded = torch.nonzero((sims >= top[:, -1:]).sum(dim=1) > k).flatten()
        if len(crowded):  # a document tied with the k-th score was left out (one sync per block to ask)
            cols[crowded] = torch.sort(sims[crowded], dim=1, descending=True, stable=True).indices[:, :k]
    else:
        cols = torch.arange(n, device=sims.device).expand(rows, n)
    cols = torch.sort(cols, dim=1).values
    order = torch.sort(sims.gather(1, cols), dim=1, descending=True, stable=True).indices
    cols = cols.gather(1, order)
    return sims.gather(1, cols), cols


def merge_torch(best_s: Any, best_i: Any, s: Any, i: Any, k: int) -> tuple[Any, Any]:
    """`merge_numpy` in torch."""
    import torch

    s, i = torch.cat([best_s, s], dim=1), torch.cat([best_i, i], dim=1)
    order = torch.sort(s, dim=1, descending=True, stable=True).indices[:, :k]
    return s.gather(1, order), i.gather(1, order)
