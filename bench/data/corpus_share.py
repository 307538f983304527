"""A BEIR corpus indexed share by share under torchrun: rank r of N indexes only the records whose line starts in
bytes [r * size / N, (r + 1) * size / N) of corpus.jsonl (a line belongs to the range where it starts), so no rank
parses the whole file or holds the ids and byte offsets of every document (`LazyCorpus`, ~150 bytes a document).

What needs the whole corpus is settled with small collectives, so that what every rank sees is what one process
reading the whole file would see:
- Line numbers: each rank first counts the lines of its range (a scan for newlines, no parsing); one all_gather
  gives each rank the number of its first line, so messages and reports name the lines one process names.
- A record the checks refuse: each rank reads to its end or to its first bad record; the first bad record in file
  order (the lowest such rank's) is raised on every rank, with the message one process gives.
- Ids repeated across ranks (BEIR's rule, as `read_beir`: the last record of an id, at its first record's position):
  each rank broadcasts in turn the sorted 64-bit hashes of its ids (one share's hashes in memory at a time); the ids
  whose hash another rank also holds are then gathered by name (only those), and for an id that really repeats,
  the first rank holding it keeps its row and reads the last rank's last record, the later ranks drop it.
- Rows and counts: one all_gather of each rank's number of documents gives its first corpus-wide row (the sum of
  the earlier ranks') and the total; duplicate and blank-document counts are summed and reported once, on rank 0,
  the first few in file order, as one process reports them.
- Judged documents that are not in the corpus: `held(ids)` asks every rank which of the judged ids it holds.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.data.errors import DataError
from bench.data.beir import CorpusRead, read_corpus
from bench.data.lazy_corpus import CorpusIndex, CorpusShard, LazyCorpus
from bench.data.lines import read_jsonl_at
from bench.data.records import _Blank, _Duplicates
from bench.runtime import distributed

log = logging.getLogger(__name__)

BLOCK = 1 << 20
REPORTED = 5  # repeated ids a duplicate warning names (`_Duplicates.report`)


def line_start(fh, pos: int, size: int) -> int:  # noqa: ANN001 - a binary file
    """The first line start at or after byte `pos` (a line starts at 0 and after each newline); `size` if none."""
    if pos <= 0:
        return 0
    if pos >= size:
        return size
    fh.seek(pos - 1)  # a line starts at pos itself when the byte before it ends a line
    at = pos - 1
    while block := fh.read(BLOCK):
        newline = block.find(b"\n")
        if newline >= 0:
            return at + newline + 1
        at += len(block)
    return size


def byte_range(path: Path, rank: int, world: int) -> tuple[int, int]:
    """[start, end) of the bytes whose lines rank `rank` of `world` indexes: the ranks' ranges tile the file."""
    size = path.stat().st_size
    with open(path, "rb") as fh:
        return line_start(fh, size * rank // world, size), line_start(fh, size * (rank + 1) // world, size)


def count_lines(path: Path, start: int, end: int) -> int:
    """Lines starting in [start, end) (`start` a line start)."""
    lines, last = 0, b"\n"
    with open(path, "rb") as fh:
        fh.seek(start)
        left = end - start
        while left > 0 and (block := fh.read(min(BLOCK, left))):
            lines += block.count(b"\n")
            left -= len(block)
            last = block[-1:]
    return lines + (last != b"\n")


def id_hashes(ids: Sequence[str]) -> np.ndarray:
    """A 64-bit hash of each id, the same in every process (Python's `hash` of a str is salted per process)."""
    return np.fromiter(
        (int.from_bytes(hashlib.blake2b(d.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little") for d in ids),
        dtype=np.uint64, count=len(ids),
    )  # fmt: skip


def shared_hashes(keys: np.ndarray) -> np.ndarray:
    """The hashes of `keys` that another rank's ids also have (each rank's sorted hashes broadcast in turn)."""
    rank, own = distributed.rank(), np.unique(keys)
    shared = np.zeros(0, dtype=np.uint64)
    for src in range(distributed.world_size()):
        theirs = distributed.broadcast_from(own if src == rank else None, src)
        if src != rank:
            shared = np.union1d(shared, np.intersect1d(own, theirs, assume_unique=True))
        del theirs
    return shared


def read_index(path: Path, start: int, end: int, rank: int) -> CorpusIndex:
    """This rank's records indexed, numbered as in the whole file; the first bad record in file order is raised on
    every rank (a rank that raised alone would leave the others waiting in the next collective)."""
    lines = distributed.all_gather_object(count_lines(path, start, end))
    index = CorpusIndex(path, lazy=True)
    error = None
    try:
        index.read(read_jsonl_at(path, start, end, first_lineno=1 + sum(lines[:rank])))
    except DataError as exc:
        error = str(exc)
    except OSError as exc:
        error = f"{path}: cannot be read ({exc})"
    errors = [e for e in distributed.all_gather_object(error) if e]
    if errors:
        raise DataError(errors[0])
    return index


@dataclass
class Repeats:
    """The ids this rank holds that an earlier or later rank holds too, with what the rule needs of them."""

    first: dict[str, tuple[int, int]]  # id -> (rank, line) of its first record in the file
    last_offset: dict[str, int]  # id -> byte offset of its last record in the file
    later: dict[str, int]  # ids whose first record is on an earlier rank -> the line of their first record here


def cross_rank_repeats(index: CorpusIndex, rank: int) -> Repeats:
    ids = list(index.rows)
    keys = id_hashes(ids)
    shared = shared_hashes(keys)
    rows = np.flatnonzero(np.isin(keys, shared))
    del keys
    mine = [(ids[r], int(index.first_lines[r]), int(index.offsets[r])) for r in rows.tolist()]
    holders: dict[str, list[tuple[int, int, int]]] = {}  # id -> (rank, first line, last offset) in rank order
    for r, part in enumerate(distributed.all_gather_object(mine)):
        for doc_id, line, offset in part:
            holders.setdefault(doc_id, []).append((r, line, offset))
    held_here = {doc_id for doc_id, _, _ in mine}
    repeated = {d: h for d, h in holders.items() if len(h) > 1 and d in held_here}  # a hash collision is no repeat
    return Repeats(
        first={d: (h[0][0], h[0][1]) for d, h in repeated.items()},
        last_offset={d: h[-1][2] for d, h in repeated.items()},
        later={d: index.first_lines[index.rows[d]] for d, h in repeated.items() if h[0][0] != rank},
    )


def apply_repeats(index: CorpusIndex, repeats: Repeats, rank: int) -> np.ndarray:
    """Keep each id repeated across ranks on the first rank holding it, with its last record: the offsets of the
    rows left, renumbered (index.rows is changed in place)."""
    offsets = np.frombuffer(index.offsets, dtype=np.int64)
    for doc_id, (first_rank, _) in repeats.first.items():
        if first_rank == rank:
            offsets[index.rows[doc_id]] = repeats.last_offset[doc_id]
    if not repeats.later:
        return offsets
    keep = np.ones(len(offsets), dtype=bool)
    for doc_id in repeats.later:
        keep[index.rows.pop(doc_id)] = False
    for row, doc_id in enumerate(index.rows):  # the rows left, in file order
        index.rows[doc_id] = row
    return offsets[keep]


def repeat_report(index: CorpusIndex, repeats: Repeats) -> tuple[int, list[tuple[str, int, int]]]:
    """(repeated records on this rank, the first REPORTED of them in file order) as one process reports them:
    (id, line of its first record in the file, line of the repeat)."""
    first_line = {d: line for d, (_, line) in repeats.first.items()}
    found = [(d, first_line.get(d, a), b) for d, a, b in index.duplicates.repeats]
    found += [(d, first_line[d], line) for d, line in repeats.later.items()]
    return len(found), sorted(found, key=lambda repeat: repeat[2])[:REPORTED]


def read_share(path: Path, name: str, lazy: bool) -> CorpusRead:
    """This rank's share of the corpus in `path` (see the module docstring): `read_beir`'s `corpus_reader` under
    torchrun; a collective (every rank calls it). Without a process group, or for a corpus held in memory (.gz: it
    cannot be read at an offset), the whole file, as `read_corpus` reads it."""
    if not lazy or not distributed.active():
        return read_corpus(path, name, lazy)
    rank, world = distributed.rank(), distributed.world_size()
    start, end = byte_range(path, rank, world)
    index = read_index(path, start, end, rank)
    repeats = cross_rank_repeats(index, rank)
    offsets = apply_repeats(index, repeats, rank)
    n_repeats, shown = repeat_report(index, repeats)
    parts = distributed.all_gather_object((len(index.rows), n_repeats, shown, index.blank.count, index.blank.first))
    counts = [p[0] for p in parts]
    total = sum(counts)
    if not total:
        raise DataError(f"{path}: the corpus of {name!r} is empty; a retrieval dataset needs documents")
    blank = _Blank(path)
    blank.count = sum(p[3] for p in parts)
    blank.first = next((p[4] for p in parts if p[4] is not None), None)
    blank.report(total)
    if distributed.is_main():
        log.info("%s: %s documents indexed over %d ranks, each its own byte range (documents per rank: %s)", path,
                 f"{total:,}", world, ", ".join(f"{n:,}" for n in counts))  # fmt: skip
    duplicates = _Duplicates(path, "document")
    duplicates.repeats = [r for p in parts for r in p[2]][:REPORTED]
    duplicates.more = sum(p[1] for p in parts) - len(duplicates.repeats)
    shard = CorpusShard(rank, world, start, end, first_row=sum(counts[:rank]), total=total)
    docs = LazyCorpus(path, index.rows, offsets, shard)
    return CorpusRead(docs, duplicates.report, blank.count, lambda ids: held_anywhere(docs, ids))


def held_anywhere(docs: LazyCorpus, ids: Sequence[str]) -> list[bool]:
    """Whether any rank's share holds each id (every rank calls it with the same ids)."""
    mine = np.packbits(np.fromiter((d in docs for d in ids), dtype=bool, count=len(ids)))
    anywhere = np.bitwise_or.reduce(np.stack(distributed.all_gather_object(mine)), axis=0)
    return np.unpackbits(anywhere, count=len(ids)).astype(bool).tolist()
