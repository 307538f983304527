"""The encoder's chunk pipeline: texts -> cache hits, token ids, length-sorted batches -> one matrix and the cache.

    encode_chunks(encoder, texts, out, batch_size, desc, cache, normalize)   # `out` None: into the cache only

The texts are walked in chunks (`bench.encode.chunks.chunk_bounds`). Per chunk: its texts are looked up in the
embedding cache by text (`lookup_chunk`), the rest are tokenised (on a second thread, while the previous chunk runs
through the model), looked up again by model input, and the distinct missing inputs are encoded in length-sorted
batches (`run_chunk`); each vector is written into the output matrix and the chunk is committed to the cache
(`commit_chunk`), also when an exception interrupts it. On an accelerator (`overlap_commits`) a chunk's vectors
are copied to pinned host memory behind its batches (an event marks the copy done) and the chunk is committed only
once the next chunk's batches are queued, so the device-to-host copy, the normalising and the cache write of one
chunk overlap the next chunk's forward passes instead of leaving the GPU waiting; on the CPU each chunk is
committed as soon as it has run, as before. What runs a batch is the encoder's (`PipelineHost._forward`, its backend);
what this module owns is the order of the work and what is kept of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from bench.encode.batching import ShapedBatch, at_own_shapes, pad_batch, plan_batches, plan_shapes
from bench.encode.cache import EmbeddingCache, ids_key, text_key
from bench.encode.chunks import RAMP, Chunk, Done, chunk_bounds
from bench.encode.finite import rerun_non_finite
from bench.encode.inputs import ModelInputs, TokenRows

if TYPE_CHECKING:
    from bench.encode.backends.base import Backend


class PipelineHost(Protocol):
    """What the pipeline reads of its encoder (`bench.encode.encoder.Encoder` has it): the tokenizer and the model
    inputs it makes, the batching and chunking it asked for, the backend, and the counters the pipeline keeps."""

    max_len: int
    batch_tokens: int | None
    shape_bounded: bool  # bucketed batch shapes (an accelerator)
    precision: str  # at fp16 or bf16, a text whose vector is not finite runs again at fp32
    show_progress: bool
    chunk_size: int
    first_chunk_size: int
    prefetch: bool  # tokenise the next chunk on a second thread
    overlap_commits: bool  # commit a chunk once the next one's batches are queued (an accelerator)
    engine: "Backend"
    shapes: set[tuple[int, int]]
    forward_calls: int
    texts_encoded: int
    texts_asked: int
    batch_cost: int  # a forward call's fixed cost in token slots (the CPU plan's)
    token_slots: int
    tokens_run: int
    fp32_reruns: int

    @property
    def tokenizer(self) -> Any: ...

    @property
    def dim(self) -> int: ...

    def tokenize(self, texts: Sequence[str]) -> ModelInputs: ...

    def pad_id(self) -> int: ...

    def _forward(self, batch: dict[str, np.ndarray]) -> Any: ...


def encode_chunks(enc: PipelineHost, texts: Sequence[str], out: np.ndarray | None, batch_size: int, desc: str,
                  cache: EmbeddingCache | None, normalize: bool) -> None:  # fmt: skip
    """Fill `out` (None: the cache only) with the texts' vectors, chunk by chunk: chunk k+1 is looked up in the cache
    here and tokenised on a second thread (the tokenizer releases the GIL and runs on its own threads) while chunk
    k's batches run through the model. With `enc.overlap_commits` (an accelerator) chunk k is committed only after
    chunk k+1's batches are queued: its vectors come to the host while the device runs k+1."""
    from bench.runtime import progress

    n = len(texts)
    enc.texts_asked += n
    bar = progress.bar(total=n, desc=desc, unit="text", disable=not enc.show_progress or n < 256)
    bounds = chunk_bounds(n, enc.first_chunk_size, enc.chunk_size, RAMP if enc.shape_bounded else None)
    pool = None
    if enc.prefetch and len(bounds) > 1:
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lenbench-tokenize")
    pending: tuple[Chunk, Any] | None = None  # looked up, being tokenised
    running: RunChunk | None = None  # its batches queued, its vectors on their way to the host, not committed
    try:
        for start, stop in bounds:
            chunk = lookup_chunk(enc, list(texts[start:stop]), out, start, cache, bar)
            todo_texts = [chunk.texts[i] for i in chunk.todo]
            if todo_texts:
                enc.tokenizer  # noqa: B018 - loaded here, on this thread, before the worker uses it
            future = pool.submit(model_inputs, enc, todo_texts) if pool is not None and todo_texts else None
            if future is None and todo_texts:
                future = Done(model_inputs(enc, todo_texts))
            if pending is not None:
                running = step(enc, running, run_chunk(enc, *pending, cache, batch_size, normalize, bar), cache, normalize)
            pending = (chunk, future)
        if pending is not None:
            running = step(enc, running, run_chunk(enc, *pending, cache, batch_size, normalize, bar), cache, normalize)
        pending = None
    finally:
        try:
            if running is not None:  # what was encoded is committed, also when an exception interrupts
                commit_chunk(enc, running, cache, normalize)
        finally:
            bar.close()
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)


def step(enc: PipelineHost, running: "RunChunk | None", launched: "RunChunk | None", cache: EmbeddingCache | None,
         normalize: bool) -> "RunChunk | None":  # fmt: skip
    """Commit the chunk that was running (its successor's batches are queued by now); the new one runs on, or is
    committed at once without `enc.overlap_commits` (the CPU: its vectors are already here)."""
    if running is not None:
        commit_chunk(enc, running, cache, normalize)
    if launched is not None and not enc.overlap_commits:
        commit_chunk(enc, launched, cache, normalize)
        return None
    return launched


def model_inputs(enc: PipelineHost, texts: list[str]) -> tuple[TokenRows, list[bytes]]:
    """(token ids, cache keys) of texts: the work the prefetch thread does for the next chunk."""
    ids = enc.tokenize(texts).ids
    return ids, [ids_key(x) for x in ids]


def lookup_chunk(enc: PipelineHost, texts: list[str], out: np.ndarray | None, start: int,
                 cache: EmbeddingCache | None, bar: Any) -> Chunk:  # fmt: skip
    """Fill a chunk's cache hits (by text) and say which texts are left to tokenise."""
    if out is None:  # into the cache only: a scratch matrix for this chunk
        out, start = np.zeros((len(texts), enc.dim), dtype=np.float32), 0
    rows = np.arange(start, start + len(texts))
    if cache is not None:
        tkeys = [text_key(t) for t in texts]
        hit = cache.fill(cache.aliases(tkeys), out, rows)
    else:
        tkeys, hit = [], np.zeros(len(texts), dtype=bool)
    bar.update(int(hit.sum()))
    return Chunk(texts, out, rows, tkeys, np.flatnonzero(~hit))


@dataclass
class RunChunk:
    """A chunk whose batches have run (or are queued on the device): what committing it needs."""

    chunk: Chunk
    ids: TokenRows  # the model inputs of the chunk's texts to encode
    keys: list[bytes]
    hit2: np.ndarray  # cache hits by model input
    first: dict[bytes, int]  # distinct model input -> its first text (index into the todo texts)
    encoded: np.ndarray  # indices into the todo texts whose vectors `vectors` brings, in its order
    vectors: Any  # .result(): the pooled vectors, float32 on the host (bench.encode.backends: host_copy)
    complete: bool  # every distinct input ran (else an exception interrupted it: only what ran is committed)
    bar: Any  # the progress bar (repeated inputs count when committed)


def run_chunk(enc: PipelineHost, chunk: Chunk, tokenized: Any, cache: EmbeddingCache | None, batch_size: int,
              normalize: bool, bar: Any) -> RunChunk | None:  # fmt: skip
    """Cache hits by model input, then the distinct missing model inputs through the model in length-sorted batches;
    their vectors stay where the model ran (the GPU), and one copy of them to the host is queued behind them. An
    interrupted chunk commits what ran before the exception goes on."""
    todo, out, rows, tkeys = chunk.todo, chunk.out, chunk.rows, chunk.tkeys
    if not len(todo):
        return None
    ids, keys = tokenized.result()
    if cache is not None:
        hit2 = cache.fill(keys, out, rows[todo])
        cache.put_aliases([(tkeys[i], keys[j]) for j, i in enumerate(todo) if hit2[j]])
        bar.update(int(hit2.sum()))
    else:
        hit2 = np.zeros(len(todo), dtype=bool)
    first: dict[bytes, int] = {}  # distinct model inputs: each is encoded once
    for j in np.flatnonzero(~hit2):
        first.setdefault(keys[j], j)
    distinct = np.fromiter(first.values(), dtype=np.int64, count=len(first))
    lengths = ids.lengths[distinct]
    plan = plan_shapes(lengths, batch_size, enc.batch_tokens, enc.max_len) if enc.shape_bounded else \
        at_own_shapes(plan_batches(lengths, batch_size, enc.batch_tokens, enc.batch_cost), lengths)  # fmt: skip
    done: list[tuple[np.ndarray, Any]] = []  # (indices into distinct's inputs, pooled vectors as the model left them)

    def ran(complete: bool) -> RunChunk:
        encoded = np.concatenate([b for b, _ in done]) if done else np.zeros(0, dtype=np.int64)
        vectors = enc.engine.host_copy([v for _, v in done]) if done else Done(None)
        return RunChunk(chunk, ids, keys, hit2, first, encoded, vectors, complete, bar)

    try:
        for shaped in plan:
            batch = distinct[shaped.members]
            done.append((batch, embed_ids(enc, ids.take(batch), shaped)))
            enc.texts_encoded += len(batch)
            bar.update(len(batch))
    except BaseException:
        commit_chunk(enc, ran(False), cache, normalize)
        raise
    return ran(True)


def commit_chunk(enc: PipelineHost, run: RunChunk, cache: EmbeddingCache | None, normalize: bool) -> None:
    """Write a run chunk's vectors into the matrix and the cache (waiting for their copy to the host), and copy the
    vectors of repeated inputs."""
    todo, out, rows, tkeys = run.chunk.todo, run.chunk.out, run.chunk.rows, run.chunk.tkeys
    keys, hit2, first, encoded = run.keys, run.hit2, run.first, run.encoded
    if len(encoded):
        vectors = host_vectors(enc, run.vectors.result(), normalize, run.ids.take(encoded))
        out[rows[todo[encoded]]] = vectors
        if cache is not None:
            done_keys = [keys[j] for j in encoded]
            finished = set(done_keys)
            aliases = [(tkeys[i], keys[j]) for j, i in enumerate(todo) if not hit2[j] and keys[j] in finished]
            cache.put(done_keys, vectors, aliases)
    if not run.complete:
        return
    repeats = np.array([j for j in np.flatnonzero(~hit2) if first[keys[j]] != j], dtype=np.int64)
    if len(repeats):  # repeated inputs: copy the first one's vector
        sources = np.fromiter((first[keys[j]] for j in repeats), dtype=np.int64, count=len(repeats))
        out[rows[todo[repeats]]] = out[rows[todo[sources]]]
        run.bar.update(len(repeats))


def embed_ids(enc: PipelineHost, ids: TokenRows, shape: ShapedBatch | None = None) -> Any:
    """Pooled vectors (not normalised) of one batch padded to `shape` (its extra rows dropped): float32 numpy on
    the CPU, a float32 tensor on an accelerator (`host_vectors` brings a chunk's worth back at once)."""
    width, rows = (shape.width, shape.rows) if shape is not None else (None, None)
    input_ids, mask = pad_batch(ids, enc.pad_id(), width=width, n_rows=rows)
    enc.shapes.add(input_ids.shape)
    enc.token_slots += int(mask.size)
    enc.tokens_run += int(mask[: len(ids)].sum())
    pooled = enc._forward({"input_ids": input_ids, "attention_mask": mask})  # noqa: SLF001 - the encoder's hook
    return pooled[: len(ids)] if len(pooled) > len(ids) else pooled


def host_vectors(enc: PipelineHost, pooled: np.ndarray, normalize: bool, inputs: TokenRows) -> np.ndarray:
    """A chunk's pooled vectors on the host (a text whose vector is not finite at a reduced precision run again at
    fp32), L2-normalised as F.normalize does when asked."""
    if enc.precision != "fp32":
        enc.fp32_reruns += rerun_non_finite(pooled, inputs, enc.pad_id(), enc.engine)
    if normalize:
        pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
    return pooled
