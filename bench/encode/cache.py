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
(several ranks or runs) safe.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

# Bumped when the meaning of a key changes: a new file name, so old files (keyed by text) are never misread.
KEY_VERSION = "ids-v1"
SQLITE_VARS = 500  # bound parameters per statement (SQLite's historical limit is 999)


def default_cache_dir() -> Path:
    env = os.environ.get("LENBENCH_CACHE")
    if env:
        return Path(env).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "lenbench" / "embeddings"


def text_key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:16]


def ids_key(ids: Sequence[int] | np.ndarray) -> bytes:
    """The cache key of one model input: its token ids (special tokens included, after truncation)."""
    return hashlib.sha256(np.asarray(ids, dtype=np.int32).tobytes()).digest()[:16]


class EmbeddingCache:
    """Vectors by token-id key, plus the text -> key aliases. All methods take lists of 16-byte keys."""

    def __init__(self, directory: str | os.PathLike[str], namespace: str):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.namespace = namespace
        self.path = self.directory / f"{hashlib.sha256(f'{namespace}|{KEY_VERSION}'.encode()).hexdigest()[:24]}.sqlite"
        self._conn = sqlite3.connect(self.path, timeout=60)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: a commit survives a crash of the process
        self._conn.execute("CREATE TABLE IF NOT EXISTS emb (key BLOB PRIMARY KEY, vec BLOB NOT NULL)")
        self._conn.execute("CREATE TABLE IF NOT EXISTS alias (text BLOB PRIMARY KEY, key BLOB NOT NULL)")
        self._conn.execute("CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT)")
        self._conn.execute("INSERT OR REPLACE INTO meta VALUES ('namespace', ?)", (namespace,))
        self._conn.commit()

    # ------------------------------------------------------------------ reads
    def _select(self, table: str, column: str, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        found: dict[bytes, bytes] = {}
        unique = list(dict.fromkeys(keys))
        key_col = "text" if table == "alias" else "key"
        for start in range(0, len(unique), SQLITE_VARS):
            part = unique[start : start + SQLITE_VARS]
            marks = ",".join("?" * len(part))
            for k, v in self._conn.execute(f"SELECT {key_col}, {column} FROM {table} WHERE {key_col} IN ({marks})", part):
                found[bytes(k)] = bytes(v) if table == "alias" else v
        return found

    def aliases(self, text_keys: Sequence[bytes]) -> list[bytes | None]:
        """The token-id key recorded for each text key (None: this text was never tokenised into the cache)."""
        found = self._select("alias", "key", text_keys)
        return [found.get(k) for k in text_keys]

    def fill(self, keys: Sequence[bytes | None], out: np.ndarray, rows: Sequence[int] | None = None) -> np.ndarray:
        """Write the cached vector of keys[i] into out[rows[i]] (any float dtype); returns a bool mask of hits.

        Vectors go straight from SQLite's bytes into `out`: no per-row array is kept.
        """
        rows = range(len(keys)) if rows is None else rows
        found = self._select("emb", "vec", [k for k in keys if k is not None])
        hit = np.zeros(len(keys), dtype=bool)
        for i, (key, row) in enumerate(zip(keys, rows)):
            blob = found.get(key) if key is not None else None
            if blob is not None:
                out[row] = np.frombuffer(blob, dtype=np.float32)
                hit[i] = True
        return hit

    def get(self, keys: Sequence[bytes], dim: int) -> tuple[np.ndarray, np.ndarray]:
        """(vectors (len(keys), dim) float32, hit mask): convenience for small lookups."""
        out = np.zeros((len(keys), dim), dtype=np.float32)
        return out, self.fill(keys, out)

    # ----------------------------------------------------------------- writes
    def put(self, keys: Sequence[bytes], vectors: np.ndarray, aliases: Iterable[tuple[bytes, bytes]] = ()) -> None:
        """Store vectors by token-id key (and text -> key aliases) in one committed transaction."""
        with self._conn:
            self._conn.executemany(
                "INSERT OR REPLACE INTO emb VALUES (?, ?)",
                ((k, np.ascontiguousarray(v, dtype=np.float32).tobytes()) for k, v in zip(keys, vectors)),
            )
            self.put_aliases(aliases, commit=False)

    def put_aliases(self, aliases: Iterable[tuple[bytes, bytes]], commit: bool = True) -> None:
        self._conn.executemany("INSERT OR REPLACE INTO alias VALUES (?, ?)", aliases)
        if commit:
            self._conn.commit()

    def __len__(self) -> int:
        return int(self._conn.execute("SELECT COUNT(*) FROM emb").fetchone()[0])

    def close(self) -> None:
        self._conn.close()
