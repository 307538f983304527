"""The encoder's chunk pipeline: texts -> cache hits, token ids, length-sorted batches -> one matrix and the cache.

    encode_chunks(encoder, texts, out, batch_size, desc, cache, normalize)   # `out` None: into the cache only

The texts are walked in chunks (`bench.encode.chunks.chunk_bounds`). Per chunk: its texts are looked up in the
embedding cache by text (`lookup_chunk`), the rest are tokenised (on a second thread, while the previous chunk runs
through the model), looked up again by model input, and the distinct missing inputs are encoded in length-sorted
batches (`run_chunk`); their vectors are queued for the host (`Backend.host_copy`: on CUDA a copy into pinned memory
behind the batches) and the chunk goes to the committer (`bench.encode.commits`), which writes each vector into the
output matrix and the chunk into the cache on a thread of its own, in chunk order, one chunk at a time, also when
an exception interrupts the run (`enc.background_commits`: on an accelerator and from three cores; else each chunk
is committed here as soon as it ran). So this thread, the critical path, goes on to the next chunk's lookup, planning
and forward passes while the previous chunk is normalised and written (and, on an accelerator, while its vectors
come back from the device); an input that the chunk before encoded is taken from that chunk, not the cache, so a
repeated text gets its first vector whether or not that commit is done. What runs a batch is the encoder's
(`PipelineHost._forward`, its backend); what this module owns is the order of the work and what is kept of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from bench.encode.batching import ShapedBatch, at_own_shapes, pad_batch, plan_batches, plan_shapes
from bench.encode.cache import EmbeddingCache, ids_key, text_key
from bench.encode.chunks import RAMP, Chunk, Done, chunk_bounds
from bench.encode.commits import Committer, RunChunk, in_flight_rows
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
    background_commits: bool  # commit each chunk on a thread of its own while the next one runs (bench.encode.commits)
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
    k's batches run through the model, and chunk k-1 is committed on a third (`enc.background_commits`)."""
    from bench.runtime import progress

    n = len(texts)
    enc.texts_asked += n
    bar = progress.bar(total=n, desc=desc, unit="text", disable=not enc.show_progress or n < 256)
    bounds = chunk_bounds(n, enc.first_chunk_size, enc.chunk_size, RAMP if enc.shape_bounded else None)
    pool = None
    if enc.prefetch and len(bounds) > 1:
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lenbench-tokenize")
    committer: Committer | None = None
    try:
        committer = Committer(enc, cache, normalize, background=enc.background_commits and len(bounds) > 1)
        pending: tuple[Chunk, Any] | None = None  # looked up, being tokenised
        for start, stop in bounds:
            chunk = lookup_chunk(enc, list(texts[start:stop]), out, start, cache, bar)
            todo_texts = [chunk.texts[i] for i in chunk.todo]
            if todo_texts:
                enc.tokenizer  # noqa: B018 - loaded here, on this thread, before the worker uses it
            future = pool.submit(model_inputs, enc, todo_texts) if pool is not None and todo_texts else None
            if future is None and todo_texts:
                future = Done(model_inputs(enc, todo_texts))
            if pending is not None:
                run_chunk(enc, *pending, cache, committer, batch_size, bar)
            pending = (chunk, future)
        if pending is not None:
            run_chunk(enc, *pending, cache, committer, batch_size, bar)
    except BaseException:
        if committer is not None:  # what ran is committed, also when an exception interrupts
            committer.close(failing=True)
        raise
    else:
        committer.close(failing=False)  # raises an exception of the last commit
    finally:
        bar.close()
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


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


def run_chunk(enc: PipelineHost, chunk: Chunk, tokenized: Any, cache: EmbeddingCache | None, committer: Committer,
              batch_size: int, bar: Any) -> None:  # fmt: skip
    """Cache hits by model input (and the inputs the chunk before encoded, whose commit may be in flight), then the
    distinct missing model inputs through the model in length-sorted batches; their vectors stay where the model ran
    (the GPU), one copy of them to the host is queued behind them, and the chunk goes to the committer. An
    interrupted chunk commits what ran before the exception goes on."""
    todo, out, rows, tkeys = chunk.todo, chunk.out, chunk.rows, chunk.tkeys
    if not len(todo):
        return
    ids, keys = tokenized.result()
    hit2 = cache.fill(keys, out, rows[todo]) if cache is not None else np.zeros(len(todo), dtype=bool)
    before = committer.in_flight() if cache is not None else None
    copied, copied_from = in_flight_hits(before, keys, hit2)
    bar.update(int(hit2.sum()))
    first: dict[bytes, int] = {}  # distinct model inputs: each is encoded once
    misses = np.flatnonzero(~hit2)
    for j in misses:
        first.setdefault(keys[j], j)
    distinct = np.fromiter(first.values(), dtype=np.int64, count=len(first))
    lengths = ids.lengths[distinct]
    plan = plan_shapes(lengths, batch_size, enc.batch_tokens, enc.max_len) if enc.shape_bounded else \
        at_own_shapes(plan_batches(lengths, batch_size, enc.batch_tokens, enc.batch_cost), lengths)  # fmt: skip
    done: list[tuple[np.ndarray, Any]] = []  # (indices into distinct's inputs, pooled vectors as the model left them)

    def ran(complete: bool) -> RunChunk:
        encoded = np.concatenate([b for b, _ in done]) if done else np.zeros(0, dtype=np.int64)
        vectors = enc.engine.host_copy([v for _, v in done]) if done else Done(None)
        return RunChunk(chunk, ids, keys, hit2, first, encoded, vectors, complete, copied, copied_from,
                        before.chunk.out if before is not None else None)  # fmt: skip

    try:
        for shaped in plan:
            batch = distinct[shaped.members]
            with committer.engine_lock:
                done.append((batch, embed_ids(enc, ids.take(batch), shaped)))
            enc.texts_encoded += len(batch)
            bar.update(len(batch))
    except BaseException:
        committer.submit(ran(False), failing=True)
        raise
    committer.submit(ran(True))
    bar.update(len(misses) - len(first))  # repeated inputs: their first one's vector, copied when committed


def in_flight_hits(before: RunChunk | None, keys: list[bytes], hit2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The inputs the cache lacked that the chunk `before` encoded (its commit may be in flight): marked as hits in
    `hit2`; (their indices into the todo texts, their rows in that chunk's matrix)."""
    empty = np.zeros(0, dtype=np.int64)
    if before is None or not len(before.encoded) or hit2.all():
        return empty, empty
    there = in_flight_rows(before)
    found = [(j, there[keys[j]]) for j in np.flatnonzero(~hit2) if keys[j] in there]
    if not found:
        return empty, empty
    copied, copied_from = (np.array(x, dtype=np.int64) for x in zip(*found))
    hit2[copied] = True
    return copied, copied_from


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
