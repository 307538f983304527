"""Token ids of evaluation texts, computed once per tokenizer and kept on disk: tokenisation off the critical path.

An encoder reads each text as its token ids with special tokens, cut at max_len (`bench.encode.inputs`). Those ids
depend on the tokenizer and max_len only, not on the model's weights, its pooling or its precision. So
`TokenIdCache(tokenizer, max_len).model_inputs(texts)` keeps them in one SQLite file per (tokenizer fingerprint,
max_len), keyed by each text's digest:

    <lenbench cache>/tokens/ids-<sha256(tokenizer fingerprint | max_len)>.sqlite
        ids (text = sha256(text)[:16]) -> the ids as little-endian uint16 (vocabularies up to 65,536) or int32,
                                          and whether the text was cut

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
(`ids-<24 hex>.sqlite`) and, read-only, exactly the one table `ids` with the schema below.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import re
import sqlite3
import threading
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from bench.data.token_cache import FOLDER, tokenizer_id
from bench.encode.cache import text_key
from bench.encode.inputs import ModelInputs, TokenRows, model_inputs, truncating_backend
from bench.runtime import pools
from bench.runtime.paths import cache_dir
from bench.runtime.stores import Cleared, Kept, Listing, StoreFile, clear_files, companions, describe_files, plain_files

log = logging.getLogger(__name__)

FORMAT = 1
SQLITE_VARS = 500  # bound parameters per statement
PROCESS_TEXTS = 4_096  # cold texts from which a process pool tokenises (below it, the tokenizer's threads do)
PROCESS_CHUNK = 1_024  # texts per process-pool task at most
FILE_NAME = re.compile(r"ids-[0-9a-f]{24}\.sqlite")
IDS_TABLE_SQL = "CREATE TABLE ids (text BLOB PRIMARY KEY, ids BLOB NOT NULL, cut INTEGER NOT NULL)"


class TokenIdCache:
    """text -> the model input ids of one tokenizer at one max_len, on disk (see the module docstring).

    Counters: `hits` (texts whose ids were read), `tokenized` (texts tokenised here)."""

    def __init__(self, tokenizer: Any, max_len: int, directory: str | Path | None = None, use_disk: bool = True):
        self.tokenizer, self.max_len = tokenizer, int(max_len)
        self.hits = self.tokenized = 0
        self.path: Path | None = None
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()  # the encoder's prefetch thread and its caller may both tokenise
        ident = tokenizer_id(tokenizer) if use_disk else None
        if ident is not None:
            name = hashlib.sha256(f"ids-{FORMAT}|{ident}|{self.max_len}".encode()).hexdigest()[:24]
            self.path = Path(directory if directory is not None else cache_dir()) / FOLDER / f"ids-{name}.sqlite"
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
        conn = self._connection()
        if conn is None:
            self.tokenized += len(texts)
            return tokenize_parallel(texts, self.tokenizer, self.max_len)
        digests = [text_key(t) for t in texts]
        found = self._read(conn, digests)
        rows = [found.get(d) for d in digests]
        missing = [i for i, row in enumerate(rows) if row is None]
        self.hits += len(texts) - len(missing)
        if missing:
            fresh = tokenize_parallel([texts[i] for i in missing], self.tokenizer, self.max_len)
            self.tokenized += len(missing)
            data, size = fresh.ids.flat.astype(self._dtype).tobytes(), self._dtype.itemsize
            bounds = (fresh.ids.offsets * size).tolist()  # byte slices of plain ints: no numpy scalar per text
            for i, start, stop, cut in zip(missing, bounds[:-1], bounds[1:], fresh.truncated.tolist()):
                rows[i] = (data[start:stop], int(cut))
            self._write(conn, [(digests[i], *rows[i]) for i in missing])  # type: ignore[misc]
        # One array of every text's ids, in the texts' order, with no Python integer per token: the blobs are
        # joined and viewed as the stored dtype (a Python list per text costs as much as tokenising a tenth of them).
        blobs = [row[0] for row in rows]  # type: ignore[index]
        offsets = np.zeros(len(texts) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, blobs), dtype=np.int64, count=len(blobs)) // self._dtype.itemsize, out=offsets[1:])
        ids = TokenRows(np.frombuffer(b"".join(blobs), dtype=self._dtype), offsets)
        cut = np.fromiter((row[1] for row in rows), dtype=bool, count=len(rows))  # type: ignore[index]
        return ModelInputs(ids, cut)

    # ------------------------------------------------------------------------------------------- storage
    def _connection(self) -> sqlite3.Connection | None:
        if self.path is None or self._conn is not None:
            return self._conn
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=60, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(IDS_TABLE_SQL.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS", 1))
            conn.commit()
        except (OSError, sqlite3.Error) as exc:
            log.info("token ids not cached on disk (%s: %s)", self.path, exc)
            self.path = None
            return None
        self._conn = conn
        return conn

    def _read(self, conn: sqlite3.Connection, digests: list[bytes]) -> dict[bytes, tuple[bytes, int]]:
        out: dict[bytes, tuple[bytes, int]] = {}
        try:
            for s in range(0, len(digests), SQLITE_VARS):
                part = digests[s : s + SQLITE_VARS]
                sql = f"SELECT text, ids, cut FROM ids WHERE text IN ({','.join('?' * len(part))})"
                out.update((t, (b, c)) for t, b, c in conn.execute(sql, part))  # BLOBs come back as bytes
        except sqlite3.Error as exc:  # unreadable: tokenise instead (and stop using the file)
            log.info("token-id cache %s unreadable (%s); tokenising", self.path, exc)
            self.path, self._conn = None, None
            return {}
        return out

    def _write(self, conn: sqlite3.Connection, rows: list[tuple[bytes, bytes, bool]]) -> None:
        """Store (text digest, ids as the stored dtype's bytes, cut) rows."""
        try:
            conn.executemany("INSERT OR IGNORE INTO ids (text, ids, cut) VALUES (?, ?, ?)",
                             [(d, x, int(c)) for d, x, c in rows])  # fmt: skip
            conn.commit()
        except (OSError, sqlite3.Error) as exc:  # full disk, read-only folder: the ids are only not kept
            log.info("token ids not written to %s (%s)", self.path, exc)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def is_token_id_file(path: Path) -> bool:
    """Read-only: whether `path` is a file `TokenIdCache` wrote (its name, and exactly its one table with the same
    CREATE statement). Opened through SQLite's read-only mode, so a cache another process holds open (in WAL mode,
    readers never wait for a writer) is read as it is and never changed; anything unreadable is not one."""
    from results_db.location import NotSQLiteFile, read_only_sqlite

    if not FILE_NAME.fullmatch(path.name):
        return False
    try:
        with read_only_sqlite(path) as conn:
            tables = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall()
    except (NotSQLiteFile, OSError, sqlite3.Error):
        return False
    return [(name, " ".join(str(sql).split())) for name, sql in tables] == [("ids", IDS_TABLE_SQL)]


class TokenIdStore:
    """The evaluation token ids as a store (`bench.runtime.stores`): the files of tokens/ that `is_token_id_file`
    proves are lenbench's, each with its -wal/-shm."""

    title = "token-id file(s)"

    def files(self, root: Path) -> Listing:
        listing = Listing(root)
        found = plain_files(root / FOLDER)
        for path in found:
            if is_token_id_file(path):
                listing.ours.append(StoreFile(path, companions=companions(path)))
        theirs = {p for f in listing.ours for p in f.paths}
        listing.kept.extend(Kept(p, "not a token-id file lenbench wrote", bool(FILE_NAME.fullmatch(p.name)))
                            for p in found if p not in theirs)  # fmt: skip
        return listing

    def describe(self, listing: Listing) -> list[str]:
        return describe_files(self.title, listing)

    def clear(self, listing: Listing) -> Cleared:
        return clear_files(listing, [listing.root / FOLDER])


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
