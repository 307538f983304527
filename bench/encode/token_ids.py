"""Token ids of evaluation texts, computed once per tokenizer and kept on disk: tokenisation off the critical path.

An encoder reads each text as its token ids with special tokens, cut at max_len (`bench.encode.inputs`). Those ids
depend on the tokenizer and max_len only, not on the model's weights, its pooling or its precision. So
`TokenIdCache(tokenizer, max_len).model_inputs(texts)` keeps them in one store per (tokenizer fingerprint, max_len),
keyed by each text's digest (sha256(text)[:16]), so the same text in two corpora is tokenised once:

    <lenbench cache>/tokens/ids-<sha256(tokenizer fingerprint | max_len)>.tok (+ .tok-index, .tok-sorted)
        the ids as little-endian uint16 (vocabularies up to 65,536) or int32, back to back, and per text its digest,
        where its ids are and whether it was cut (`bench.encode.token_store`: append-only flat files, made for
        tens of millions of texts; the SQLite file of format 1, one row per text, is no longer read)

Every model with the same tokenizer (a trained checkpoint and its backbone, the nine methods of a paper table),
every re-run at another precision or with the embedding cache off, and every attack variant that meets a text again
reads its ids instead of tokenising it. The fingerprint is that of the training pipeline's token cache
(`bench.data.token_cache.tokenizer_id`: the serialised fast tokenizer). A tokenizer without a serialised form (a
slow Python one) is never cached on disk. A cache that cannot be opened or written only costs the tokenisation.

Cold texts are tokenised in parallel over all cores: by the fast tokenizer's own thread pool (one batch call, GIL
released) and, for `PROCESS_TEXTS` texts or more on a machine with more than two cores, by a process pool whose
workers each run a copy of the tokenizer (`bench.runtime.pools`: started by the forkserver, never forked from this
process, whose tokenizer threads have run; a stalled pool is ended and its chunks tokenised here), so the per-text
Python work of turning encodings into arrays runs on every core as well. The pool is kept between calls (an encoder hands its texts over chunk by chunk) and serves every
encoder with the same tokenizer.

`bench cache clear` deletes a file here only when `is_token_id_file` proves it is one of these: the name
(`ids-<24 hex>.tok`) and its header (lenbench's magic bytes), with its companions (`token_id_companions`); or a
format-1 file (`ids-<24 hex>.sqlite` holding exactly the one table `ids` of IDS_TABLE_SQL).
"""

from __future__ import annotations

import atexit
import errno
import hashlib
import logging
import re
import sqlite3
import threading
import weakref
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from bench.data.token_cache import FOLDER, tokenizer_id
from bench.encode import token_store
from bench.encode.cache import text_key
from bench.encode.inputs import ModelInputs, TokenRows, model_inputs, truncating_backend
from bench.encode.token_store import TokenStore
from bench.runtime import pools, stages
from bench.runtime.paths import cache_dir
from bench.runtime.stores import COMPANIONS, Cleared, Kept, Listing, StoreFile, clear_files, describe_files
from bench.runtime.stores import named_as, orphans, plain_files, set_aside

log = logging.getLogger(__name__)

PROCESS_TEXTS = 4_096  # cold texts from which a process pool tokenises (below it, the tokenizer's threads do)
PROCESS_CHUNK = 1_024  # texts per process-pool task at most
FILE_NAME = re.compile(r"ids-[0-9a-f]{24}\.tok")
OLD_FILE_NAME = re.compile(r"ids-[0-9a-f]{24}\.sqlite")  # format 1 (SQLite): recognised for `bench cache clear` only
TOK_COMPANIONS = (token_store.INDEX_SUFFIX, token_store.SORTED_SUFFIX)  # the files beside an ids-<hex>.tok
IDS_TABLE_SQL = "CREATE TABLE ids (text BLOB PRIMARY KEY, ids BLOB NOT NULL, cut INTEGER NOT NULL)"


class TokenIdCache:
    """text -> the model input ids of one tokenizer at one max_len, on disk (see the module docstring).

    Counters: `hits` (texts whose ids were read), `tokenized` (texts tokenised here)."""

    def __init__(self, tokenizer: Any, max_len: int, directory: str | Path | None = None, use_disk: bool = True):
        self.tokenizer, self.max_len = tokenizer, int(max_len)
        self.hits = self.tokenized = 0
        self.path: Path | None = None
        self._store: TokenStore | None = None
        self._namespace = ""
        self._lock = threading.Lock()  # the encoder's prefetch thread and its caller may both tokenise
        ident = tokenizer_id(tokenizer) if use_disk else None
        if ident is not None:
            self._namespace = f"ids-{token_store.FORMAT}|{ident}|{self.max_len}"
            name = hashlib.sha256(self._namespace.encode()).hexdigest()[:24]
            self.path = Path(directory if directory is not None else cache_dir()) / FOLDER / f"ids-{name}.tok"
        try:
            vocab = len(tokenizer)  # added tokens included
        except TypeError:
            vocab = 1 << 31
        self._dtype = np.dtype("<u2") if vocab <= 65536 else np.dtype("<i4")

    @property
    def on_disk(self) -> bool:
        return self.path is not None

    def model_inputs(self, texts: Sequence[str]) -> ModelInputs:
        """What the model reads of each text (as `bench.encode.inputs.model_inputs`): from the disk where this
        tokenizer already tokenised the text at this max_len, else tokenised now (in parallel) and stored."""
        with self._lock:
            return self._model_inputs(list(texts))

    def _model_inputs(self, texts: list[str]) -> ModelInputs:
        store = self._opened()
        if store is None:
            self.tokenized += len(texts)
            with stages.timed("tokenise"):
                return tokenize_parallel(texts, self.tokenizer, self.max_len)
        digests = [text_key(t) for t in texts]
        with stages.timed("cache reads"):
            found = self._guard("read", lambda: store.lookup(digests), None)
        if found is None:
            return self._model_inputs(texts)  # the store was dropped: tokenise
        missing = np.flatnonzero(found < 0)
        self.hits += len(texts) - len(missing)
        parts: list[tuple[np.ndarray, TokenRows, np.ndarray]] = []  # (positions, ids, cut) of hits, then of fresh
        if len(missing) < len(texts):
            hit = np.flatnonzero(found >= 0)
            with stages.timed("cache reads"):
                flat, offsets, cut = store.ids(found[hit])
            parts.append((hit, TokenRows(flat, offsets), cut))
        if len(missing):
            with stages.timed("tokenise"):
                fresh = tokenize_parallel([texts[i] for i in missing], self.tokenizer, self.max_len)
            self.tokenized += len(missing)
            new = _distinct(missing, [digests[i] for i in missing])  # a text twice in one chunk is stored once
            with stages.timed("cache writes"):
                rows = fresh.ids.take(new) if len(new) < len(missing) else fresh.ids
                cut = fresh.truncated[new] if len(new) < len(missing) else fresh.truncated
                self._guard("write", lambda: store.append([digests[missing[j]] for j in new], rows.flat, rows.offsets, cut), None)
            parts.append((missing, fresh.ids, fresh.truncated))
        return _in_order(parts, len(texts), self._dtype)

    # ------------------------------------------------------------------------------------------- storage
    def _opened(self) -> TokenStore | None:
        if self.path is None or self._store is not None:
            return self._store
        for attempt in (0, 1):
            try:
                self._store = TokenStore(self.path, self._namespace, self._dtype, self.max_len)
                break
            except OSError as exc:
                if attempt == 0 and exc.errno == errno.EINVAL and not is_token_id_file(self.path):
                    # not this namespace's header: damaged (random bytes, cut short) or another file under its name
                    where = set_aside(self.path, self.path.parent.parent, TOK_COMPANIONS)
                    log.warning("token-id cache %s is not usable (%s); moved it to %s and rebuilding it", self.path,
                                exc.strerror or exc, where)  # fmt: skip
                    continue
                log.info("token ids not cached on disk (%s: %s)", self.path, exc)
                self.path = None
                return None
        ref = weakref.ref(self)  # the sorted index is written when the process ends (close() does it sooner)
        atexit.register(lambda: (cache := ref()) is not None and cache.close())
        return self._store

    def _guard(self, what: str, op: Any, fallback: Any) -> Any:
        """op() on the store; a fault of the file (unreadable, disk full, another format) only costs the caching:
        a failed read drops the store for this process, a failed write stops the writes (said once)."""
        try:
            return op()
        except (OSError, ValueError) as exc:
            if what == "read":
                log.info("token-id cache %s unreadable (%s); tokenising", self.path, exc)
                self.close()
                self.path = None
            else:
                log.warning("token ids not written to %s (%s); this run goes on without storing them", self.path,
                            "the disk is full" if getattr(exc, "errno", None) in (errno.ENOSPC, errno.EDQUOT) else exc)
            return fallback

    def close(self) -> None:
        if self._store is not None:
            try:
                self._store.write_sorted()
            except OSError as exc:
                log.info("token-id index of %s not sorted on disk (%s)", self.path, exc)
            self._store.close()
            self._store = None


def _distinct(positions: np.ndarray, digests: list[bytes]) -> np.ndarray:
    """Indices into `positions` of the first occurrence of each digest."""
    first: dict[bytes, int] = {}
    for j, d in enumerate(digests):
        first.setdefault(d, j)
    return np.fromiter(first.values(), dtype=np.int64, count=len(first))


def _in_order(parts: list[tuple[np.ndarray, TokenRows, np.ndarray]], n: int, dtype: np.dtype) -> ModelInputs:
    """One ModelInputs of n texts from pieces that each cover some positions (their ids in position order)."""
    if len(parts) == 1 and len(parts[0][0]) == n:
        _, rows, cut = parts[0]
        return ModelInputs(TokenRows(rows.flat.astype(dtype, copy=False), rows.offsets), np.asarray(cut, dtype=bool))
    positions = np.concatenate([p for p, _, _ in parts])
    rows = TokenRows.concat([TokenRows(r.flat.astype(dtype, copy=False), r.offsets) for _, r, _ in parts])
    cut = np.concatenate([np.asarray(c, dtype=bool) for _, _, c in parts])
    order = np.empty(n, dtype=np.int64)
    order[positions] = np.arange(n)
    return ModelInputs(rows.take(order), cut[order])


def is_token_id_file(path: Path) -> bool:
    """Read-only: whether `path` is a file `TokenIdCache` wrote: its name and lenbench's header (the magic bytes,
    read without changing the file); or a format-1 SQLite file, by its name and exactly its one table with the same
    CREATE statement (opened through SQLite's read-only mode, so a file another process holds open is read as it is).
    Anything unreadable is not one."""
    if FILE_NAME.fullmatch(path.name):
        return token_store.read_header(path) is not None
    if not OLD_FILE_NAME.fullmatch(path.name):
        return False
    from results_db.location import NotSQLiteFile, read_only_sqlite

    try:
        with read_only_sqlite(path) as conn:
            tables = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall()
    except (NotSQLiteFile, OSError, sqlite3.Error):
        return False
    return [(name, " ".join(str(sql).split())) for name, sql in tables] == [("ids", IDS_TABLE_SQL)]


def token_id_companions(path: Path) -> list[Path]:
    """The files that belong with a token-id file (its index and sorted index; a format-1 file's -wal and -shm),
    where they exist and carry lenbench's header (or, for SQLite's, sit beside their file)."""
    if FILE_NAME.fullmatch(path.name):
        near = [Path(f"{path}{token_store.INDEX_SUFFIX}"), Path(f"{path}{token_store.SORTED_SUFFIX}")]
        return [p for p in near if p.is_file() and token_store.read_header(p) is not None]
    return [p for p in (Path(f"{path}-wal"), Path(f"{path}-shm")) if p.is_file()]


class TokenIdStore:
    """The evaluation token ids as a store (`bench.runtime.stores`): the files of tokens/ that `is_token_id_file`
    proves are lenbench's, each with its companions (`token_id_companions`), and the companions left without their
    file (a format-1 file's -wal/-shm; an -index or -sorted file with lenbench's header). A damaged file a run met
    is set aside in corrupt/, which the embedding cache's store lists."""

    title = "token-id file(s)"
    kind = "token-ids"

    def files(self, root: Path) -> Listing:
        listing = Listing(root)
        found = plain_files(root / FOLDER)
        for path in found:
            if is_token_id_file(path):
                listing.ours.append(StoreFile(path, companions=tuple(token_id_companions(path))))
        left = orphans(found, OLD_FILE_NAME) + [p for p in orphans(found, FILE_NAME, TOK_COMPANIONS)
                                                 if token_store.read_header(p) is not None]  # fmt: skip
        listing.ours.extend(StoreFile(p, "left by a token-id file that is gone") for p in left)
        theirs = {p for f in listing.ours for p in f.paths}
        listing.kept.extend(Kept(p, "not a token-id file lenbench wrote", _named(p)) for p in found if p not in theirs)
        return listing

    def describe(self, listing: Listing) -> list[str]:
        return describe_files(self.title, listing)

    def clear(self, listing: Listing) -> Cleared:
        return clear_files(listing, [listing.root / FOLDER])


def _named(path: Path) -> bool:
    """Whether `path` has a name this cache gives (a token-id file's, or one of its companions')."""
    return named_as(path, FILE_NAME, TOK_COMPANIONS) or named_as(path, OLD_FILE_NAME, COMPANIONS)


STORE = TokenIdStore()


# ---------------------------------------------------------------------------------- parallel tokenisation
def tokenize_parallel(texts: list[str], tokenizer: Any, max_len: int, workers: int | None = None) -> ModelInputs:
    """`model_inputs` of many texts over every core: a process pool of tokenizer copies for PROCESS_TEXTS texts or
    more on more than two cores (a fast tokenizer only; LENBENCH_POOLS=on: wherever it can, off: never), else the
    fast tokenizer's own threads."""
    n = pools.pool_workers(workers, len(texts), PROCESS_TEXTS)
    if pools.mode() == "auto" and n <= 2:
        n = 0
    backend = truncating_backend(tokenizer, max_len) if n else None
    if backend is None:
        return model_inputs(texts, tokenizer, max_len)
    # Chunks small enough that every worker gets several (long and short texts spread out), large enough to amortise
    # the hand-over; results come back in order as flat arrays.
    size = max(1, min(PROCESS_CHUNK, -(-len(texts) // (n * 4))))
    chunks = [texts[s : s + size] for s in range(0, len(texts), size)]
    parts: list[TokenRows] = []
    cut: list[np.ndarray] = []
    local = partial(_tokenize_with, backend)  # a stalled pool's chunks: here, with the same truncating copy
    for flat, offsets, truncated in _POOLS.get(backend, n).map(_tokenize_chunk, chunks, local=local):
        parts.append(TokenRows(flat, offsets))
        cut.append(truncated)
    return ModelInputs(TokenRows.concat(parts), np.concatenate(cut) if cut else np.zeros(0, dtype=bool))


class _TokenizerPools:
    """One process pool of tokenizer copies, kept between calls (a corpus comes in chunks, and starting the workers
    costs more than tokenising a small chunk) and replaced when another tokenizer or max_len needs one; shut down
    when the interpreter exits."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._key: tuple[str, int] | None = None
        self._pool: Any = None
        atexit.register(self.shutdown)

    def get(self, backend: Any, workers: int) -> pools.WorkerPool:
        serialised = backend.to_str()  # truncation at max_len is part of the serialised copy
        key = (hashlib.sha256(serialised.encode()).hexdigest(), workers)
        with self._lock:
            if self._pool is None or self._key != key or not self._pool.alive:
                self.shutdown()
                # Never forked (bench.runtime.pools): this process has run the tokenizer's threads. Each worker
                # tokenises with its own copy of the tokenizer, on one thread, and never touches CUDA.
                self._pool = pools.WorkerPool(workers, "token-ids", _start_worker, (serialised,))
                self._key = key
            return self._pool

    def shutdown(self) -> None:
        pool, self._pool, self._key = self._pool, None, None
        if pool is not None:
            pool.close()


_POOLS = _TokenizerPools()


_WORKER_BACKEND: Any = None


def _start_worker(serialised: str) -> None:
    import os

    global _WORKER_BACKEND
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # one thread per process: the pool is the parallelism
    from tokenizers import Tokenizer

    _WORKER_BACKEND = Tokenizer.from_str(serialised)  # truncation at max_len is part of the serialised copy


def _tokenize_chunk(texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(flat int32 ids, offsets, cut flags) of one chunk: compact to send back."""
    return _tokenize_with(_WORKER_BACKEND, texts)


def _tokenize_with(backend: Any, texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    encode = getattr(backend, "encode_batch_fast", backend.encode_batch)
    encodings = encode(texts, add_special_tokens=True)
    offsets = np.zeros(len(encodings) + 1, dtype=np.int64)
    np.cumsum([len(e.ids) for e in encodings], out=offsets[1:])
    flat = np.fromiter((i for e in encodings for i in e.ids), dtype=np.int32, count=int(offsets[-1]))
    return flat, offsets, np.fromiter((bool(e.overflowing) for e in encodings), dtype=bool, count=len(encodings))
