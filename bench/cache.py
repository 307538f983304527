"""On-disk embedding cache: one SQLite file per (model fingerprint, pooling, max_len), rows keyed by text hash.

Re-running a suite, or its attacked variant (whose clean texts are the same), never re-encodes a text the same
encoder has already seen. SQLite keeps concurrent readers safe and a crash mid-write loses nothing committed.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np


def default_cache_dir() -> Path:
    env = os.environ.get("LENBENCH_CACHE")
    if env:
        return Path(env).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "lenbench" / "embeddings"


def text_key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:16]


class EmbeddingCache:
    def __init__(self, directory: str | os.PathLike[str], namespace: str):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / f"{hashlib.sha256(namespace.encode()).hexdigest()[:24]}.sqlite"
        self._conn = sqlite3.connect(self.path, timeout=30)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("CREATE TABLE IF NOT EXISTS emb (key BLOB PRIMARY KEY, vec BLOB NOT NULL)")
        self._conn.execute("CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT)")
        self._conn.execute("INSERT OR REPLACE INTO meta VALUES ('namespace', ?)", (namespace,))
        self._conn.commit()

    def get_many(self, texts: Sequence[str]) -> list[np.ndarray | None]:
        keys = [text_key(t) for t in texts]
        found: dict[bytes, np.ndarray] = {}
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), 500):  # SQLite's bound-parameter limit
            chunk = unique[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for key, blob in self._conn.execute(f"SELECT key, vec FROM emb WHERE key IN ({marks})", chunk):
                found[bytes(key)] = np.frombuffer(blob, dtype=np.float32)
        return [found.get(k) for k in keys]

    def put_many(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        rows = [(text_key(t), np.ascontiguousarray(v, dtype=np.float32).tobytes()) for t, v in zip(texts, vectors)]
        self._conn.executemany("INSERT OR REPLACE INTO emb VALUES (?, ?)", rows)
        self._conn.commit()

    def __len__(self) -> int:
        return int(self._conn.execute("SELECT COUNT(*) FROM emb").fetchone()[0])

    def close(self) -> None:
        self._conn.close()
