"""The embedding cache's second handle (`EmbeddingCache.writer`): the encoder's commit thread writes through its own
connection while the main thread reads, and what its faults taught it comes back with `adopt`."""

import logging
import sqlite3
import threading

import numpy as np

from bench.encode.cache import EmbeddingCache

DIM = 8


def keys(start, n):
    return [i.to_bytes(16, "big") for i in range(start, start + n)]


class FullDisk:
    """A connection whose writes fail as SQLite's do when the disk is full."""

    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.inner.rollback()
        return False

    def executemany(self, *args):
        raise sqlite3.OperationalError("database or disk is full")


def test_a_writer_on_another_thread_writes_what_the_first_handle_reads_and_a_full_disk_stops_both_once(tmp_path, caplog):
    cache = EmbeddingCache(tmp_path, "fp|mean|64")
    writer = cache.writer()
    vectors = np.arange(4 * DIM, dtype=np.float32).reshape(4, DIM)
    thread = threading.Thread(target=writer.put, args=(keys(0, 4), vectors, [(b"t" * 16, keys(0, 1)[0])]))
    thread.start()
    thread.join()
    got, hit = cache.get(keys(0, 4), DIM)
    assert hit.all() and np.array_equal(got, vectors)
    assert cache.aliases([b"t" * 16]) == keys(0, 1)

    writer._conn = FullDisk(writer._conn)
    with caplog.at_level(logging.WARNING):
        thread = threading.Thread(target=writer.put, args=(keys(4, 2), vectors[:2]))
        thread.start()
        thread.join()
        cache.adopt(writer)
        assert not cache.writable  # the handle that reads knows the writes stopped ...
        cache.put(keys(6, 2), vectors[:2])
        again = cache.writer()  # ... and so does the next writer it hands out
        assert not again.writable
        again.put(keys(8, 2), vectors[:2])
        cache.adopt(again)
    assert len([r for r in caplog.records if "the disk is full" in r.getMessage()]) == 1
    assert cache.get(keys(4, 6), DIM)[1].sum() == 0 and len(cache) == 4  # nothing partial; what was there stays


def test_a_file_the_writer_set_aside_and_rebuilt_is_read_after_adopt_and_never_set_aside_twice(tmp_path, caplog):
    cache = EmbeddingCache(tmp_path, "fp|mean|64")
    cache.put(keys(0, 2), np.ones((2, DIM), dtype=np.float32))
    writer = cache.writer()
    with caplog.at_level(logging.WARNING):
        writer._set_aside(sqlite3.DatabaseError("database disk image is malformed"))  # what its _guarded does
        writer._conn = writer._open()
        writer.put(keys(2, 2), np.full((2, DIM), 2.0, dtype=np.float32))
        cache._set_aside(sqlite3.DatabaseError("database disk image is malformed"))  # the reader found it corrupt too
        cache._conn = cache._open()
    assert cache.get(keys(2, 2), DIM)[1].all()  # the rebuilt file was not moved away again
    assert len([r for r in caplog.records if "is corrupt" in r.getMessage()]) == 1
    assert len([p for p in (tmp_path / "corrupt").iterdir() if not p.name.endswith(("-wal", "-shm"))]) == 1

    later = cache.writer()
    later._set_aside(sqlite3.DatabaseError("database disk image is malformed"))
    later._conn = later._open()
    later.put(keys(4, 1), np.full((1, DIM), 3.0, dtype=np.float32))
    cache.adopt(later)  # the reader opens the file the writer rebuilt
    assert cache.get(keys(4, 1), DIM)[1].all() and not cache.get(keys(2, 2), DIM)[1].any()
