"""The pieces of the encoder's chunked pipeline that hold no model: where chunks start and stop, the output matrix
(in RAM, or a disk-backed memmap when it is large) and what one chunk carries between its cache lookup and its
encoding (`bench.encode.pipeline` runs the pipeline)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np

CHUNK_TEXTS = 2048  # texts looked up, tokenised, encoded and committed together
ACCELERATOR_CHUNK_TEXTS = 16384  # on an accelerator: few last-batch shapes, and tokenisation far ahead of the GPU
FIRST_CHUNK_TEXTS = 256  # the first chunk is short: its tokenisation is the only one nothing overlaps
RAMP = 4  # on an accelerator each later chunk is this many times the one before, up to the chunk size
# Matrices above this many bytes are a disk-backed memmap (an unlinked file in the cache folder) instead of RAM.
MEMMAP_BYTES = 2 << 30  # default of $LENBENCH_MEMMAP_BYTES, read when an encoder is made (bench.environment)


def chunk_bounds(n: int, first_size: int, size: int, ramp: int | None = None) -> list[tuple[int, int]]:
    """(start, stop) of each chunk of n texts: a short first one (its tokenisation overlaps nothing), then `size`,
    or with `ramp` each chunk `ramp` times the one before up to `size`. While the model encodes one chunk the next
    is tokenised. Where tokenising is the slower side (a cold corpus on a GPU), a ramp has the model wait only for
    the first chunk's tokenisation and run only a small last chunk after the tokenizer is done, not a chunk of
    `size`; on the CPU the model is the slower side, and fewer, larger chunks keep the tokenizer's threads busier."""
    bounds, start, step = [], 0, max(1, min(first_size, size))
    while start < n:
        bounds.append((start, min(n, start + step)))
        start, step = start + step, max(1, min(size, step * ramp) if ramp else size)
    return bounds


def allocate_matrix(n: int, dim: int, dtype: Any, memmap_bytes: int, folder: Path) -> np.ndarray:
    """A zeroed (n, dim) matrix: in RAM up to `memmap_bytes`, else a memmap over an unlinked file in `folder`."""
    if n * dim * np.dtype(dtype).itemsize <= memmap_bytes:
        return np.zeros((n, dim), dtype=dtype)
    folder.mkdir(parents=True, exist_ok=True)
    # Unlinked at once: the mapping keeps it alive, and nothing is left on disk when the process ends.
    backing = tempfile.TemporaryFile(dir=folder, prefix="matrix-")
    return np.memmap(backing, dtype=dtype, mode="w+", shape=(n, dim))


class Chunk:
    """One chunk between its cache lookup and its encoding: its texts, the matrix and rows it fills, their text keys
    and the positions the cache did not have."""

    __slots__ = ("texts", "out", "rows", "tkeys", "todo")

    def __init__(self, texts: list[str], out: np.ndarray, rows: np.ndarray, tkeys: list[bytes], todo: np.ndarray):
        self.texts, self.out, self.rows, self.tkeys, self.todo = texts, out, rows, tkeys, todo


class Done:
    """A finished result with a future's `result()` (the chunk tokenised on this thread)."""

    def __init__(self, value: Any):
        self.value = value

    def result(self) -> Any:
        return self.value
