"""The token-id cache's files: append-only flat token ids plus a fixed-size index keyed by text digest.

    ids-<24 hex>.tok          header (MAGIC, format, dtype size, max_len, namespace digest), then every stored text's
                              ids back to back (little-endian uint16 for vocabularies up to 65,536, else int32)
    ids-<24 hex>.tok-index    header, then one 32-byte record per stored text: its key (sha256(text)[:16]), where its
                              ids start in .tok (in tokens), how many there are, and whether the text was cut
    ids-<24 hex>.tok-sorted   optional: the index's first `covered` records as (key prefix, record number) sorted by
                              prefix, so a process that opens a large file looks keys up by binary search over a
                              memory map instead of loading the index (rewritten, whole, when a process closes the
                              store having added many records)

Why not one SQLite row per text: at 30 M texts a B-tree keyed by random digests turns every insert into random page
writes and every read into a random lookup. Here a chunk's writes are two appends (its ids, then its index records,
under an exclusive lock so processes sharing the folder interleave whole chunks), and a second model reading a corpus
in the order it was written reads each chunk's ids as one contiguous slice of a memory map.

Commits: a chunk's ids are written before its index records (a killed process's writes are in the OS's hands; no
fsync per chunk: a power cut may lose the last chunks, never mix them up, as a reader checks each record's bounds), and a reader uses a record only when the
ids it points at are inside the data file, so a process killed mid-write leaves at most unreferenced bytes (cut off
by the next writer) or a torn last record (ignored, then overwritten). A write the disk refuses (full, quota) is
undone: the files are cut back to where the chunk began, and the store stops writing for the rest of the process.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import struct
from pathlib import Path

import numpy as np

try:
    import fcntl
except ImportError:  # Windows: no advisory locks here; one process at a time writes a store
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

MAGIC = b"LENBENCH-TOKEN-IDS\x00\x00"  # 20 bytes: the first bytes of each of the three files
FORMAT = 2  # 1 was the SQLite file (ids-<hex>.sqlite)
HEADER = 64
INDEX_SUFFIX = "-index"
SORTED_SUFFIX = "-sorted"
RECORD = np.dtype([("key", "V16"), ("start", "<i8"), ("length", "<u4"), ("cut", "u1"), ("pad", "V3")])
SORT_AFTER = 50_000  # records added by a process beyond the sorted file's cover before it rewrites the sorted file


def header(kind: bytes, itemsize: int, max_len: int, namespace: str) -> bytes:
    """MAGIC, the format, which file (b"D" data, b"I" index, b"S" sorted), dtype size, max_len, namespace digest."""
    digest = hashlib.sha256(namespace.encode()).digest()[:16]
    head = MAGIC + struct.pack("<HcBI", FORMAT, kind, itemsize, max_len) + digest
    return head.ljust(HEADER, b"\x00")


def read_header(path: Path) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            head = fh.read(HEADER)
    except OSError:
        return None
    return head if len(head) == HEADER and head.startswith(MAGIC) else None


class TokenStore:
    """The three files of one (tokenizer, max_len) namespace (see the module docstring). `lookup` then `ids` read,
    `append` writes; every method may raise OSError (the caller stops using the store)."""

    def __init__(self, path: Path, namespace: str, dtype: np.dtype, max_len: int):
        self.path, self.dtype = path, np.dtype(dtype)
        self.index_path = Path(f"{path}{INDEX_SUFFIX}")
        self.sorted_path = Path(f"{path}{SORTED_SUFFIX}")
        self.writable = True
        self._heads = {k: header(k, self.dtype.itemsize, max_len, namespace) for k in (b"D", b"I", b"S")}
        path.parent.mkdir(parents=True, exist_ok=True)
        self._data = self._open(path, b"D")
        self._index = self._open(self.index_path, b"I")
        self._base_keys, self._base_recs, covered = self._load_sorted()
        self._runs: list[tuple[np.ndarray, np.ndarray]] = []  # (key prefixes sorted, record numbers) past the cover
        self._loaded = covered  # index records seen so far (the sorted file's, then the runs')
        self._records: np.ndarray = np.zeros(0, dtype=RECORD)
        self._data_tokens = 0
        self._data_map: np.ndarray = np.zeros(0, dtype=self.dtype)
        self.added = 0
        self._refresh()

    # ------------------------------------------------------------------------------------------ files
    def _open(self, path: Path, kind: bytes) -> int:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_BINARY", 0), 0o644)
        try:
            lock(fd)
            try:
                head = read_at(fd, HEADER, 0)
                if not head:
                    write_all(fd, self._heads[kind], 0)
                elif head != self._heads[kind]:
                    raise OSError(errno.EINVAL, f"{path} is not this namespace's token-id file (header differs)")
            finally:
                unlock(fd)
        except OSError:
            os.close(fd)
            raise
        return fd

    def _load_sorted(self) -> tuple[np.ndarray, np.ndarray, int]:
        """The sorted file's (key prefixes, record numbers) as memory maps, and how many records it covers."""
        empty = (np.zeros(0, dtype="<u8"), np.zeros(0, dtype="<i8"), 0)
        head = read_header(self.sorted_path)
        if head is None or head[: HEADER - 8] != self._heads[b"S"][: HEADER - 8]:
            return empty
        covered = int.from_bytes(head[HEADER - 8 :], "little")
        if self.sorted_path.stat().st_size != HEADER + 16 * covered or covered == 0:
            return empty
        keys = np.memmap(self.sorted_path, dtype="<u8", mode="r", offset=HEADER, shape=(covered,))
        recs = np.memmap(self.sorted_path, dtype="<i8", mode="r", offset=HEADER + 8 * covered, shape=(covered,))
        return keys, recs, covered

    def _refresh(self) -> None:
        """Take in what was appended since (by this or another process): new index records into the runs, and a
        fresh map of the data file."""
        size = os.fstat(self._index).st_size
        count = max(0, (size - HEADER) // RECORD.itemsize)
        if count > len(self._records):
            self._records = np.memmap(self.index_path, dtype=RECORD, mode="r", offset=HEADER, shape=(count,))
        data_tokens = max(0, (os.fstat(self._data).st_size - HEADER) // self.dtype.itemsize)
        if data_tokens != self._data_tokens:
            self._data_tokens = data_tokens
            self._data_map = np.memmap(self.path, dtype=self.dtype, mode="r", offset=HEADER, shape=(data_tokens,)) \
                if data_tokens else np.zeros(0, dtype=self.dtype)  # fmt: skip
        if count > self._loaded:
            fresh = np.arange(self._loaded, count, dtype=np.int64)
            self._add_run(prefixes(self._records["key"][self._loaded : count]), fresh)
            self._loaded = count

    def _add_run(self, keys: np.ndarray, recs: np.ndarray) -> None:
        order = np.argsort(keys, kind="stable")
        self._runs.append((keys[order], recs[order]))
        while len(self._runs) > 1 and len(self._runs[-2][0]) <= 2 * len(self._runs[-1][0]):
            (k1, r1), (k2, r2) = self._runs[-2], self._runs.pop()
            keys, recs = np.concatenate([k1, k2]), np.concatenate([r1, r2])
            order = np.argsort(keys, kind="stable")
            self._runs[-1] = (keys[order], recs[order])

    # ------------------------------------------------------------------------------------------ reads
    def lookup(self, digests: list[bytes]) -> np.ndarray:
        """Record number of each digest (-1: not stored); records whose ids are not all in the data file are not
        used (a write still under way in another process)."""
        self._refresh()
        want = np.frombuffer(b"".join(digests), dtype="V16") if digests else np.zeros(0, dtype="V16")
        found = np.full(len(digests), -1, dtype=np.int64)
        if not len(digests):
            return found
        k = prefixes(want)
        for keys, recs in [(self._base_keys, self._base_recs), *self._runs]:
            if not len(keys):
                continue
            pos = np.minimum(np.searchsorted(keys, k), len(keys) - 1)
            hit = (keys[pos] == k) & (found < 0)
            found[hit] = recs[pos[hit]]
        some = found >= 0
        if some.any():
            rec = self._records[found[some]]
            ok = (rec["key"] == want[some]) & (rec["start"] + rec["length"] <= self._data_tokens)
            found[np.flatnonzero(some)[~ok]] = -1
        return found

    def ids(self, recs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(flat ids as stored, offsets, cut flags) of these records, in their order: one slice of the data map where
        they follow each other in the file (a corpus read in the order it was written), else one gather."""
        rec = self._records[recs]
        starts, lengths = rec["start"].astype(np.int64), rec["length"].astype(np.int64)
        offsets = np.zeros(len(recs) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        if len(recs) and np.array_equal(starts[1:], starts[:-1] + lengths[:-1]):
            flat = np.array(self._data_map[starts[0] : starts[0] + offsets[-1]])
        else:
            flat = self._data_map[np.repeat(starts - offsets[:-1], lengths) + np.arange(offsets[-1])]
        return flat, offsets, rec["cut"].astype(bool)

    # ------------------------------------------------------------------------------------------ writes
    def append(self, digests: list[bytes], flat: np.ndarray, offsets: np.ndarray, cut: np.ndarray) -> None:
        """Store texts (their digests, ids as one flat array with offsets, cut flags) as one committed chunk."""
        if not self.writable or not digests:
            return
        data = np.ascontiguousarray(flat, dtype=self.dtype).tobytes()
        lock(self._index)
        try:
            index_size = os.fstat(self._index).st_size
            index_end = HEADER + (index_size - HEADER) // RECORD.itemsize * RECORD.itemsize  # a torn record dropped
            data_size = os.fstat(self._data).st_size
            data_end = HEADER + (data_size - HEADER) // self.dtype.itemsize * self.dtype.itemsize
            records = np.zeros(len(digests), dtype=RECORD)
            records["key"] = np.frombuffer(b"".join(digests), dtype="V16")
            records["start"] = (data_end - HEADER) // self.dtype.itemsize + offsets[:-1]
            records["length"] = np.diff(offsets)
            records["cut"] = cut
            try:
                write_all(self._data, data, data_end)  # the ids are in the file before any record points at them
                write_all(self._index, records.tobytes(), index_end)
            except OSError:
                os.ftruncate(self._data, data_end)  # nothing partial: the chunk is not stored at all
                os.ftruncate(self._index, index_end)
                self.writable = False
                raise
        finally:
            unlock(self._index)
        self.added += len(digests)

    def write_sorted(self) -> None:
        """Rewrite the sorted file to cover every record this process has seen, when it added many (atomic)."""
        self._refresh()
        if self.added < SORT_AFTER and len(self._base_keys) >= self._loaded - SORT_AFTER:
            return
        keys = np.concatenate([self._base_keys, *[k for k, _ in self._runs]])
        recs = np.concatenate([self._base_recs, *[r for _, r in self._runs]])
        order = np.argsort(keys, kind="stable")
        tmp = self.sorted_path.with_name(f".{self.sorted_path.name}.{os.getpid()}.tmp")
        try:
            with open(tmp, "wb") as fh:
                fh.write(self._heads[b"S"][: HEADER - 8] + int(len(keys)).to_bytes(8, "little"))
                fh.write(keys[order].astype("<u8").tobytes())
                fh.write(recs[order].astype("<i8").tobytes())
            os.replace(tmp, self.sorted_path)
        finally:
            tmp.unlink(missing_ok=True)

    def close(self) -> None:
        for fd in (self._data, self._index):
            try:
                os.close(fd)
            except OSError:
                pass
        self._data = self._index = -1


def prefixes(keys: np.ndarray) -> np.ndarray:
    """The first 8 bytes of each 16-byte key as an integer: what the sorted runs are ordered and searched by (a
    full-key check follows every match)."""
    return np.frombuffer(np.ascontiguousarray(keys).tobytes(), dtype="<u8")[::2].copy()


def lock(fd: int) -> None:
    """An exclusive advisory lock on the file (processes sharing the folder append whole chunks in turn)."""
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_EX)


def unlock(fd: int) -> None:
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_UN)


def read_at(fd: int, size: int, offset: int) -> bytes:
    if hasattr(os, "pread"):
        return os.pread(fd, size, offset)
    os.lseek(fd, offset, os.SEEK_SET)  # Windows: no pread (the caller holds the lock)
    return os.read(fd, size)


def write_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        if hasattr(os, "pwrite"):
            n = os.pwrite(fd, view, offset)
        else:  # Windows: no pwrite (the caller holds the lock)
            os.lseek(fd, offset, os.SEEK_SET)
            n = os.write(fd, view)
        view, offset = view[n:], offset + n
