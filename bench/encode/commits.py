"""Chunk commits: a run chunk's vectors written into the output matrix and the embedding cache, in chunk order, on one
background thread while the main thread plans and runs the next chunk.

    committer = Committer(enc, cache, normalize, background=True)
    committer.submit(run)        # waits for the previous chunk's commit (its exception is raised here), starts this one
    committer.close(failing)     # waits for the last one; `failing`: the main thread is raising, commit errors are logged

Committing a chunk (`commit_chunk`) waits for its vectors to reach the host (`Backend.host_copy`: on CUDA an event
behind its batches), runs a text whose reduced-precision vector is not finite again at fp32, normalises, writes the
rows into the matrix, stores the vectors and the text -> key aliases in the cache (one transaction) and copies the
vectors of repeated inputs. On the main thread that work sat between one chunk's forward passes and the next's
(and on an accelerator it left the device waiting); on the commit thread it overlaps them.

What keeps it exact and bounded:
- One commit in flight at most: `submit` waits for the one before. So two chunks' vectors are held at most (one
  committing, one running), and when a chunk looks its inputs up in the cache, every chunk before the last one
  submitted is in it. An input the last chunk encoded (its commit may be in flight) is taken from that chunk in
  memory (`in_flight_rows`): the same vector the cache would give, copied when this chunk commits, after that one.
- The commit thread writes the cache through its own connection (`EmbeddingCache.writer`; WAL lets the main thread
  read meanwhile) and gives it back (`adopt`) when the call ends: a disk that filled stops the writes, once.
- A rerun at fp32 runs the backend, which is not safe on two threads at once (the torch backend toggles the model's
  training flag around a batch): it holds `engine_lock`, which the main thread holds around every forward.
- Every chunk whose batches ran is committed before the call returns or re-raises: `close` waits for it (a stop
  signal interrupts only the main thread; a second signal interrupts that wait, as it stops a run at once anywhere).

`background=False` commits each chunk on the calling thread as soon as it has run (the switch the tests compare).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from bench.encode.cache import CacheUnavailable, EmbeddingCache
from bench.encode.chunks import Chunk
from bench.encode.finite import rerun_non_finite
from bench.encode.inputs import TokenRows

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

log = logging.getLogger(__name__)


@dataclass
class RunChunk:
    """A chunk whose batches have run (or are queued on the device): what committing it needs."""

    chunk: Chunk
    ids: TokenRows  # the model inputs of the chunk's texts to encode
    keys: list[bytes]
    hit2: np.ndarray  # model inputs not to encode: cache hits, and those the chunk before encoded (`copied`)
    first: dict[bytes, int]  # distinct model input -> its first text (index into the todo texts)
    encoded: np.ndarray  # indices into the todo texts whose vectors `vectors` brings, in its order
    vectors: Any  # .result(): the pooled vectors, float32 on the host (bench.encode.backends: host_copy)
    complete: bool  # every distinct input ran (else an exception interrupted it: only what ran is committed)
    copied: np.ndarray  # indices into the todo texts whose input the chunk before encoded ...
    copied_from: np.ndarray  # ... at these rows of its matrix
    source: np.ndarray | None  # that chunk's matrix (`out`, or its scratch matrix when encoding into the cache only)


def in_flight_rows(run: RunChunk) -> dict[bytes, int]:
    """Model input key -> its row in `run.chunk.out`, for the inputs `run` encoded."""
    todo, rows = run.chunk.todo, run.chunk.rows
    return {run.keys[j]: int(rows[todo[j]]) for j in run.encoded}


class Committer:
    """Commits run chunks in the order given, on one background thread (or at once on this one): see the module
    docstring. `last` is the chunk submitted last: the only one whose commit may not be done."""

    def __init__(self, enc: Any, cache: EmbeddingCache | None, normalize: bool, background: bool):
        self.enc, self.cache, self.normalize = enc, cache, normalize
        self.engine_lock = threading.Lock()  # held around every forward and every fp32 rerun
        self.last: RunChunk | None = None
        self._writes = cache  # the handle commits write through
        self._pool: ThreadPoolExecutor | None = None
        self._future: Future[None] | None = None
        if background and cache is not None:
            try:
                self._writes = cache.writer()
            except (CacheUnavailable, sqlite3.Error) as exc:  # no second connection: commit on this thread, as before
                log.debug("committing on the main thread: %s", exc)
                background = False
        if background:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lenbench-commit")

    @property
    def background(self) -> bool:
        return self._pool is not None

    def in_flight(self) -> RunChunk | None:
        """The chunk whose commit may still be running (None: every chunk submitted is committed)."""
        return self.last if self._pool is not None else None

    def submit(self, run: RunChunk, failing: bool = False) -> None:
        """Commit `run` after the chunks submitted before it. Waits for the previous commit first and raises its
        exception (logs it when `failing`: this chunk was interrupted by an exception that goes on); `run` is
        committed whatever happened to the one before."""
        try:
            self._wait(failing)
        finally:
            self.last = run
            if self._pool is not None:
                self._future = self._pool.submit(self._commit, run)
            elif failing:
                self._logged(lambda: self._commit(run))
            else:
                self._commit(run)

    def close(self, failing: bool) -> None:
        """Wait for the last commit (raising its exception, or logging it when `failing`), end the thread and give
        the cache's writer handle back."""
        try:
            self._wait(failing)
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
            if self._writes is not self.cache and self.cache is not None and self._writes is not None:
                self.cache.adopt(self._writes)

    def _wait(self, failing: bool) -> None:
        future, self._future = self._future, None
        if future is None:
            return
        if failing:
            self._logged(future.result)
        else:
            future.result()

    @staticmethod
    def _logged(op: Any) -> None:
        """op(), an exception of its own logged: another one (the main thread's) is already on its way up."""
        try:
            op()
        except Exception:
            log.exception("committing an interrupted encode's last chunk failed")

    def _commit(self, run: RunChunk) -> None:
        commit_chunk(self.enc, run, self._writes, self.normalize, self.engine_lock)


def commit_chunk(enc: Any, run: RunChunk, cache: EmbeddingCache | None, normalize: bool,
                 engine_lock: threading.Lock) -> None:  # fmt: skip
    """Write a run chunk's vectors into the matrix and the cache (waiting for their copy to the host), copy those
    of the inputs the chunk before encoded, and copy the vectors of repeated inputs."""
    todo, out, rows, tkeys = run.chunk.todo, run.chunk.out, run.chunk.rows, run.chunk.tkeys
    keys, hit2, first, encoded = run.keys, run.hit2, run.first, run.encoded
    if len(run.copied):  # that chunk is committed by now: its rows hold the vectors the cache holds
        out[rows[todo[run.copied]]] = run.source[run.copied_from]
    vectors = None
    if len(encoded):
        vectors = host_vectors(enc, run.vectors.result(), normalize, run.ids.take(encoded), engine_lock)
        out[rows[todo[encoded]]] = vectors
    if cache is not None:
        aliases = [(tkeys[i], keys[j]) for j, i in enumerate(todo) if hit2[j]]  # found by their input
        if vectors is not None:
            done_keys = [keys[j] for j in encoded]
            finished = set(done_keys)
            aliases += [(tkeys[i], keys[j]) for j, i in enumerate(todo) if not hit2[j] and keys[j] in finished]
            cache.put(done_keys, vectors, aliases)
        elif aliases:
            cache.put_aliases(aliases)
    if not run.complete:
        return
    repeats = np.array([j for j in np.flatnonzero(~hit2) if first[keys[j]] != j], dtype=np.int64)
    if len(repeats):  # repeated inputs: copy the first one's vector
        sources = np.fromiter((first[keys[j]] for j in repeats), dtype=np.int64, count=len(repeats))
        out[rows[todo[repeats]]] = out[rows[todo[sources]]]


def host_vectors(enc: Any, pooled: np.ndarray, normalize: bool, inputs: TokenRows,
                 engine_lock: threading.Lock) -> np.ndarray:  # fmt: skip
    """A chunk's pooled vectors on the host (a text whose vector is not finite at a reduced precision run again at
    fp32, holding the backend's lock), L2-normalised as F.normalize does when asked."""
    if enc.precision != "fp32" and not np.isfinite(pooled).all():
        with engine_lock:
            enc.fp32_reruns += rerun_non_finite(pooled, inputs, enc.pad_id(), enc.engine)
    if normalize:
        pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
    return pooled
