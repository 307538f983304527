"""A BEIR corpus.jsonl indexed as it is read, and kept on disk as a mapping read on access (`LazyCorpus`)."""

from __future__ import annotations

import io
import json
import threading
from array import array
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.data.errors import DataError
from bench.data.records import _Blank, _Duplicates, _require, text_field
from bench.runtime import stages

if TYPE_CHECKING:  # numpy loads when a lazy corpus is read: `bench --help` and option parsing never need it
    import numpy as np

Document = dict[str, str]  # {"title", "text"}


@dataclass(frozen=True)
class CorpusShard:
    """Where one torchrun rank's share of a corpus sits (bench.data.corpus_share): the documents whose records
    start in bytes [start, end) of the file, rows first_row.. of the whole corpus's `total` documents."""

    rank: int
    world: int
    start: int
    end: int
    first_row: int
    total: int


class CorpusIndex:
    """A corpus.jsonl's records indexed as they are read, in file order: each id's row (the position of its first
    record), the byte offset of its last record (lazy; in memory: the last record's document) and the line of its
    first record, with the duplicate and blank-document checks. One process indexes the whole file; a torchrun
    rank its byte range (bench.data.corpus_share)."""

    def __init__(self, path: Path, lazy: bool):
        self.path, self.lazy = path, lazy
        self.docs: dict[str, Document] = {}
        self.rows: dict[str, int] = {}  # doc id -> row (its first record's position): the one map of every id
        self.offsets = array("q")
        self.first_lines = array("q")  # row -> line of its first record (for the duplicate report)
        self.duplicates = _Duplicates(path, "document")
        self.blank = _Blank(path)

    def read(self, records: Iterator[tuple[int, int, dict[str, Any]]]) -> CorpusIndex:
        path, lazy, rows = self.path, self.lazy, self.rows
        for lineno, offset, obj in records:
            _require(obj, ("_id", "text"), path, lineno)
            doc_id = str(obj["_id"])
            row = rows.get(doc_id)
            title = text_field(obj, "title", path, lineno, optional=True)
            text = text_field(obj, "text", path, lineno)
            if not text.strip() and not title.strip():
                self.blank.see(doc_id, lineno)
            if not lazy:
                self.docs[doc_id] = {"title": title, "text": text}
            if row is not None:  # a repeated id: the last record wins, at the first one's position (as a dict)
                self.duplicates.repeat(doc_id, self.first_lines[row], lineno)
                if lazy:
                    self.offsets[row] = offset
            else:
                rows[doc_id] = len(self.first_lines)
                self.first_lines.append(lineno)
                if lazy:
                    self.offsets.append(offset)
        return self

    def mapping(self, shard: CorpusShard | None = None) -> Mapping[str, Document]:
        """The documents: a LazyCorpus over the file (lazy), else the dict of parsed records."""
        if not self.lazy:
            return self.docs
        import numpy as np

        return LazyCorpus(self.path, self.rows, np.frombuffer(self.offsets, dtype=np.int64), shard)


class LazyCorpus(Mapping[str, Document]):
    """A BEIR corpus.jsonl as a read-only mapping doc id -> {"title", "text"}, read from the file on access.

    Only the ids and each record's byte offset stay in memory (about 150 bytes a document instead of the parsed
    texts, ~800 bytes a short document and far more for long ones): FEVER's 5.4M documents are evaluated chunk by
    chunk without ever holding the corpus as Python strings. Every record was parsed and checked once when the
    mapping was built, in file order; iteration order is that order (first occurrence of an id, as a dict gives).
    `get_many` reads many records in file order (one forward pass over the region). The file must not change
    while it is read: its size and modification time are checked at each batch read.
    """

    def __init__(self, path: Path, rows: dict[str, int], offsets: np.ndarray, shard: CorpusShard | None = None):
        self.path = path
        self.shard = shard  # under torchrun with a sharded read: where these documents sit in the whole corpus
        self._rows = rows  # doc id -> row (the position of its first occurrence)
        self._offsets = offsets  # row -> byte offset of the record kept (the last one, for a repeated id)
        stat = path.stat()
        self._stamp = (stat.st_size, stat.st_mtime_ns)
        self._fh: io.BufferedReader | None = None
        self._lock = threading.Lock()
        self.read_end = 0  # the furthest byte any read reached (what an evaluation has read of the file)

    def __len__(self) -> int:
        return len(self._rows)

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._rows

    def __getitem__(self, doc_id: str) -> Document:
        return self.get_many([doc_id])[0]

    def get_many(self, doc_ids: Sequence[str]) -> list[Document]:
        """The documents of `doc_ids`, in that order (KeyError for an unknown id)."""
        import numpy as np

        with stages.timed("read"):
            return self._get_many(doc_ids)

    def _get_many(self, doc_ids: Sequence[str]) -> list[Document]:
        import numpy as np

        offsets = self._offsets[[self._rows[d] for d in doc_ids]]
        order = np.argsort(offsets, kind="stable")
        out: list[Document] = [{}] * len(doc_ids)
        with self._lock:
            fh = self._open()
            for i in order:
                fh.seek(int(offsets[i]))
                obj = json.loads(fh.readline())
                title = obj.get("title")
                out[i] = {"title": title if isinstance(title, str) else "", "text": obj["text"]}
            if len(order):
                self.read_end = max(self.read_end, fh.tell())
        return out

    def _open(self) -> io.BufferedReader:
        stat = self.path.stat()
        if (stat.st_size, stat.st_mtime_ns) != self._stamp:
            raise DataError(f"{self.path}: the corpus file changed while it was being evaluated; run again")
        if self._fh is None:
            self._fh = open(self.path, "rb")
        return self._fh

    def __getstate__(self) -> dict[str, Any]:  # picklable (subprocess workers): the file handle is reopened there
        state = self.__dict__.copy()
        state["_fh"] = None
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __del__(self) -> None:
        if getattr(self, "_fh", None) is not None:
            self._fh.close()
