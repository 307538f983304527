"""On-disk embedding cache: one SQLite file per encoder namespace (model fingerprint, pooling, max_len, raw or
normalised), rows keyed by **what the model sees**: the truncated token ids.

Two tables:
    emb    (key = sha256 of the token ids, 16 bytes) -> float32 vector bytes
    alias  (key = sha256 of the raw text, 16 bytes)  -> token-id key
An elongated document that is longer than max_len after truncation is the same model input as the clean
document cut at max_len: it hits the `emb` row its clean text wrote, and is never encoded again. The `alias` table
lets a warm run skip tokenisation (and loading the tokenizer) for every text it has seen: text -> ids is a pure
function of the tokenizer, which belongs to the namespace's model.

Writes commit in chunks (the encoder commits every chunk it finishes, and what it has on an exception), so a run
killed after hours keeps everything but the chunk in flight. SQLite (WAL) keeps concurrent readers and writers
(several ranks or runs) safe. Within a process, the encoder writes through a second handle on the same file
(`EmbeddingCache.writer`: its own connection, used by the commit thread) while its main thread reads through the
first: WAL readers never wait for the writer.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import re
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.runtime import stages
from bench.runtime.paths import cache_dir
from bench.runtime.stores import SET_ASIDE, Cleared, Kept, Listing, StoreFile, clear_files, companions, describe_files
from bench.runtime.stores import named_as, orphans, plain_files, set_aside

# Bumped when the meaning of a key changes: a new file name, so old files (keyed by text) are never misread.
KEY_VERSION = "ids-v1"
SQLITE_VARS = 500  # bound parameters per statement (SQLite's historical limit is 999)
# Written into every cache file's meta table: `bench cache clear` deletes only files that carry it (or, for files
# written before it existed, lenbench's exact schema under the name derived from their namespace).
FORMAT_MARKER = "lenbench-embedding-cache"
TABLES_SQL = {
    "emb": "CREATE TABLE emb (key BLOB PRIMARY KEY, vec BLOB NOT NULL)",
    "alias": "CREATE TABLE alias (text BLOB PRIMARY KEY, key BLOB NOT NULL)",
    "meta": "CREATE TABLE meta (k TEXT PRIMARY KEY, v TEXT)",
}
FILE_NAME = re.compile(r"[0-9a-f]{24}\.sqlite")  # the names `cache_file_name` gives

log = logging.getLogger(__name__)


def default_cache_dir() -> Path:
    return cache_dir()


def text_key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:16]


def ids_key(ids: Sequence[int] | np.ndarray) -> bytes:
    """The cache key of one model input: its token ids (special tokens included, after truncation)."""
    return hashlib.sha256(np.asarray(ids, dtype=np.int32).tobytes()).digest()[:16]


def cache_file_name(namespace: str, key_version: str | None = KEY_VERSION) -> str:
    """The file of a namespace (key_version None: the name of the first lenbench caches, keyed by text)."""
    seed = namespace if key_version is None else f"{namespace}|{key_version}"
    return f"{hashlib.sha256(seed.encode()).hexdigest()[:24]}.sqlite"


def is_corruption(exc: BaseException) -> bool:
    """An SQLite error that says the file's content is unusable (as opposed to locked, full or unreachable)."""
    said = str(exc).lower()
    return isinstance(exc, sqlite3.DatabaseError) and any(
        s in said for s in ("not a database", "malformed", "file is encrypted", "disk image", "no such table", "no such column")
    )


def is_disk_full(exc: BaseException) -> bool:
    said = str(exc).lower()
    return ("disk is full" in said or "no space left" in said or "disk quota" in said
            or isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG))  # fmt: skip


def truncated(path: Path) -> bool:
    """An SQLite file shorter than its header says, or not a whole number of pages: cut short (a copy, a crash)."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            header = fh.read(100)
    except OSError:
        return False
    if size == 0 or not header.startswith(b"SQLite format 3\x00"):
        return False
    if len(header) < 100:
        return True
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    return size % page_size != 0 or (header[24:28] == header[92:96] and size < pages * page_size)


@dataclass(frozen=True)
class CacheFileInfo:
    """What `bench cache` can prove about one *.sqlite file: whose it is, and whether it may be deleted."""

    path: Path
    namespace: str | None  # None: not provably a lenbench embedding cache (never deleted)
    why: str  # how it was recognised, or why not


def inspect_cache_file(path: Path) -> CacheFileInfo:
    """Read-only: a lenbench embedding cache is a file whose tables are exactly lenbench's (emb, meta and, since
    token-id keys, alias; the same CREATE statements) and that carries the format marker, or, for files written
    before the marker, whose name is the one lenbench derives from the namespace it stores. Anything else (a
    results database, another program's file, an unreadable file) is not one."""
    from results_db.location import NotSQLiteFile, read_only_sqlite

    try:
        with read_only_sqlite(path) as conn:
            tables = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall())
            meta = dict(conn.execute("SELECT k, v FROM meta").fetchall()) if "meta" in tables else {}
    except NotSQLiteFile:
        return CacheFileInfo(path, None, "not an SQLite file")
    except (OSError, sqlite3.Error) as exc:
        return CacheFileInfo(path, None, f"unreadable ({exc})")
    expected = {name: TABLES_SQL[name] for name in tables if name in TABLES_SQL}
    if set(tables) not in ({"emb", "meta"}, {"emb", "alias", "meta"}) or any(
        " ".join(str(tables[name]).split()) != sql for name, sql in expected.items()
    ):
        return CacheFileInfo(path, None, f"other tables ({', '.join(sorted(tables)) or 'none'})")
    namespace = meta.get("namespace")
    if not isinstance(namespace, str):
        return CacheFileInfo(path, None, "no namespace recorded")
    if meta.get("format") == FORMAT_MARKER:
        return CacheFileInfo(path, namespace, "format marker")
    if path.name in (cache_file_name(namespace), cache_file_name(namespace, None)):
        return CacheFileInfo(path, namespace, "lenbench's schema and file name (written before the format marker)")
    return CacheFileInfo(path, None, "lenbench-like tables under a name lenbench does not give")


class CacheUnavailable(RuntimeError):
    """The cache cannot be opened (disk full, folder not writable...): the caller runs without it."""


class EmbeddingCache:
    """Vectors by token-id key, plus the text -> key aliases. All methods take lists of 16-byte keys.

    The cache only ever saves work, so its faults never fail a run: a corrupt file (random bytes, truncated, a
    vector of the wrong size) is named in a warning, moved to the `corrupt/` sub-folder and rebuilt; a disk that
    fills up, or a write that cannot get the lock, stops the writes (with one warning) and the run goes on.
    """

    def __init__(self, directory: str | os.PathLike[str], namespace: str, any_thread: bool = False):
        self.directory = Path(directory)
        self.namespace = namespace
        self.path = self.directory / cache_file_name(namespace)
        self.writable = True
        self.readable = True
        self._warned_bad_rows = False
        self._any_thread = any_thread  # the connection may be used by another thread than its maker's (one at a time)
        self._file_id: tuple[int, int] | None = None  # (device, inode) of the file the connection opened
        try:
            self._conn = self._open()
        except (sqlite3.DatabaseError, CacheUnavailable) as exc:
            if not (is_corruption(exc) or truncated(self.path)):
                raise CacheUnavailable(f"embedding cache {self.path}: {exc}") from exc
            self._set_aside(exc if is_corruption(exc) else f"truncated: {exc}")
            self._conn = self._open()

    def _open(self) -> sqlite3.Connection:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=60, check_same_thread=not self._any_thread)
        except (OSError, sqlite3.Error) as exc:
            raise CacheUnavailable(f"embedding cache {self.path}: {exc}") from exc
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: a commit survives a crash of the process
            tables = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall())
            if set(tables) - set(TABLES_SQL) or any(" ".join(str(tables[n]).split()) != TABLES_SQL[n] for n in tables):
                raise sqlite3.DatabaseError(f"malformed: tables {sorted(tables)} are not lenbench's embedding cache's")
            for sql in TABLES_SQL.values():
                conn.execute(sql.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS", 1))
            stored = dict(conn.execute("SELECT k, v FROM meta").fetchall())
            if stored.get("namespace", self.namespace) != self.namespace:
                raise sqlite3.DatabaseError(f"malformed: it holds namespace {stored['namespace']!r}, not {self.namespace!r}")
            if stored.get("namespace") != self.namespace or stored.get("format") != FORMAT_MARKER:
                conn.execute("INSERT OR REPLACE INTO meta VALUES ('namespace', ?)", (self.namespace,))
                conn.execute("INSERT OR REPLACE INTO meta VALUES ('format', ?)", (FORMAT_MARKER,))
                conn.commit()
        except sqlite3.Error as exc:
            conn.close()
            if is_disk_full(exc) or not (is_corruption(exc) or truncated(self.path)):
                raise CacheUnavailable(f"embedding cache {self.path}: {exc}") from exc
            raise
        self._file_id = self._current_file()
        return conn

    def _current_file(self) -> tuple[int, int] | None:
        try:
            stat = self.path.stat()
        except OSError:
            return None
        return stat.st_dev, stat.st_ino

    def _set_aside(self, exc: BaseException) -> None:
        """Move a corrupt cache file (and its -wal/-shm) out of the way, keeping it for inspection; unless another
        handle (the commit thread's writer, another run) already did and rebuilt it: that new file is not touched."""
        conn = getattr(self, "_conn", None)
        if conn is not None:
            conn.close()
        if self._file_id is not None and self._current_file() != self._file_id:
            return  # the corrupt file this connection read was moved away already: the caller opens the new one
        target = set_aside(self.path, self.directory)
        log.warning("embedding cache file %s is corrupt (%s); moved it to %s and rebuilding it (those texts are encoded again)",
                    self.path, " ".join(str(exc).split()), target)  # fmt: skip

    def _stop(self, what: str, exc: BaseException, reads_too: bool) -> None:
        if self.writable:
            reason = "the disk is full" if is_disk_full(exc) else " ".join(str(exc).split())
            log.warning("embedding cache %s: cannot %s (%s); this run goes on without %s the cache", self.path, what, reason,
                        "using" if reads_too else "writing to")  # fmt: skip
        self.writable = False
        self.readable = self.readable and not reads_too
        try:
            self._conn.rollback()
        except sqlite3.Error:
            pass

    def _guarded(self, what: str, op: Callable[[], Any], fallback: Callable[[], Any], write: bool) -> Any:
        """op() on the open file. A corrupt file is set aside and op retried on a fresh one; any other SQLite or OS
        fault (locked past the timeout, disk full, I/O error) stops the cache for this run: fallback()."""
        if not (self.writable if write else self.readable):
            return fallback()
        for attempt in (0, 1):
            try:
                return op()
            except sqlite3.DatabaseError as exc:
                if attempt == 0 and is_corruption(exc):
                    self._set_aside(exc)
                    try:
                        self._conn = self._open()
                    except (CacheUnavailable, sqlite3.Error) as again:
                        self._stop(what, again, reads_too=True)
                        return fallback()
                    continue
                self._stop(what, exc, reads_too=not write)
                return fallback()
            except OSError as exc:
                self._stop(what, exc, reads_too=not write)
                return fallback()
        return fallback()

    # ------------------------------------------------------------------ reads
    def _select(self, table: str, column: str, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        def op() -> dict[bytes, bytes]:
            found: dict[bytes, bytes] = {}
            unique = list(dict.fromkeys(keys))
            key_col = "text" if table == "alias" else "key"
            for start in range(0, len(unique), SQLITE_VARS):
                part = unique[start : start + SQLITE_VARS]
                marks = ",".join("?" * len(part))
                for k, v in self._conn.execute(f"SELECT {key_col}, {column} FROM {table} WHERE {key_col} IN ({marks})", part):
                    found[bytes(k)] = bytes(v) if table == "alias" else v
            return found

        with stages.timed("cache reads"):
            return self._guarded("read", op, dict, write=False)

    def aliases(self, text_keys: Sequence[bytes]) -> list[bytes | None]:
        """The token-id key recorded for each text key (None: this text was never tokenised into the cache)."""
        found = self._select("alias", "key", text_keys)
        return [found.get(k) if isinstance(found.get(k), bytes) and len(found[k]) == 16 else None for k in text_keys]

    def fill(self, keys: Sequence[bytes | None], out: np.ndarray, rows: Sequence[int] | None = None) -> np.ndarray:
        """Write the cached vector of keys[i] into out[rows[i]] (any float dtype); returns a bool mask of hits.

        Vectors go straight from SQLite's bytes into `out`: no per-row array is kept. A stored vector of the wrong
        size or with a non-finite value is a miss (encoded again and overwritten), with one warning.
        """
        rows = range(len(keys)) if rows is None else rows
        found = self._select("emb", "vec", [k for k in keys if k is not None])
        hit = np.zeros(len(keys), dtype=bool)
        width = out.shape[1] * 4
        bad = 0
        for i, (key, row) in enumerate(zip(keys, rows)):
            blob = found.get(key) if key is not None else None
            if blob is None:
                continue
            if not isinstance(blob, bytes) or len(blob) != width:
                bad += 1
                continue
            vec = np.frombuffer(blob, dtype=np.float32)
            if not np.isfinite(vec).all():
                bad += 1
                continue
            out[row] = vec
            hit[i] = True
        if bad and not self._warned_bad_rows:
            self._warned_bad_rows = True
            log.warning("embedding cache %s: %d stored vector(s) are not %d float32 values (corrupt, or written by "
                        "another model); they are encoded again and replaced", self.path, bad, out.shape[1])  # fmt: skip
        return hit

    def get(self, keys: Sequence[bytes], dim: int) -> tuple[np.ndarray, np.ndarray]:
        """(vectors (len(keys), dim) float32, hit mask): convenience for small lookups."""
        out = np.zeros((len(keys), dim), dtype=np.float32)
        return out, self.fill(keys, out)

    # ----------------------------------------------------------------- writes
    def put(self, keys: Sequence[bytes], vectors: np.ndarray, aliases: Iterable[tuple[bytes, bytes]] = ()) -> None:
        """Store vectors by token-id key (and text -> key aliases) in one committed transaction."""
        aliases = list(aliases)

        def op() -> None:
            with self._conn:
                self._conn.executemany(
                    "INSERT OR REPLACE INTO emb VALUES (?, ?)",
                    ((k, np.ascontiguousarray(v, dtype=np.float32).tobytes()) for k, v in zip(keys, vectors)),
                )
                self._conn.executemany("INSERT OR REPLACE INTO alias VALUES (?, ?)", aliases)

        with stages.timed("cache writes"):
            self._guarded("write", op, lambda: None, write=True)

    def put_aliases(self, aliases: Iterable[tuple[bytes, bytes]], commit: bool = True) -> None:
        aliases = list(aliases)

        def op() -> None:
            with self._conn:
                self._conn.executemany("INSERT OR REPLACE INTO alias VALUES (?, ?)", aliases)

        with stages.timed("cache writes"):
            self._guarded("write", op, lambda: None, write=True)

    # ------------------------------------------------------- a second thread
    def writer(self) -> "EmbeddingCache":
        """A second handle on this file, with its own connection, for one other thread to write through while this
        handle reads (WAL: the reads never wait for the writes). It writes only while this handle may (a disk
        that filled stopped both, with one warning); hand it back to `adopt` once its thread is done."""
        handle = EmbeddingCache(self.directory, self.namespace, any_thread=True)
        handle.writable = self.writable
        return handle

    def adopt(self, handle: "EmbeddingCache") -> None:
        """Close a `writer` handle whose thread is done and keep what it learnt: writes it stopped stay stopped
        here, and a file it set aside and rebuilt is the one this handle reads from now on."""
        handle.close()
        self.writable = self.writable and handle.writable
        if handle._file_id != self._file_id and self.readable:
            self._conn.close()
            try:
                self._conn = self._open()
            except (CacheUnavailable, sqlite3.Error) as exc:
                self._stop("open the rebuilt file", exc, reads_too=True)

    def __len__(self) -> int:
        return int(self._guarded("read", lambda: self._conn.execute("SELECT COUNT(*) FROM emb").fetchone()[0], lambda: 0, write=False))

    def close(self) -> None:
        self._conn.close()


class EmbeddingStore:
    """The embedding cache as a store (`bench.runtime.stores`): the *.sqlite files of the cache folder that
    `inspect_cache_file` proves are lenbench's, with their -wal/-shm (and those left without their database); the
    damaged cache files set aside in corrupt/ (the embedding cache's, and the token-id files')."""

    title = "encoder file(s)"
    kind = "embeddings"

    def files(self, root: Path) -> Listing:
        listing = Listing(root)
        found = plain_files(root)
        for path in found:
            if path.suffix != ".sqlite":
                continue
            info = inspect_cache_file(path)
            if info.namespace is not None:
                listing.ours.append(StoreFile(path, info.namespace, companions(path)))
            else:
                listing.kept.append(Kept(path, info.why, named_as(path, FILE_NAME)))
        listing.ours.extend(StoreFile(p, "left by a cache file that is gone") for p in orphans(found, FILE_NAME))
        listing.aside.extend(plain_files(root / SET_ASIDE))
        return listing

    def describe(self, listing: Listing) -> list[str]:
        return describe_files(self.title, listing)

    def clear(self, listing: Listing) -> Cleared:
        return clear_files(listing, [listing.root / SET_ASIDE])


STORE = EmbeddingStore()
