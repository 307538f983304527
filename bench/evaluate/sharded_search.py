"""Retrieval under torchrun with the corpus split over the ranks: each rank encodes and searches its own share.

`bench.encode.sharded.ShardedEncoder` spreads every text list over the ranks and gathers all vectors back to every
rank: right for queries and sentence sets, but for a corpus it leaves each rank holding every document's vector
(FEVER at 384 dimensions: 8.3 GB per rank) and searching all of them. Here instead rank r takes the contiguous
documents [r * n / world, (r + 1) * n / world) (`bench.runtime.distributed.shard_bounds`), reads and encodes only
those (through the wrapped encoder, chunk by chunk, its own rows written to the embedding cache), searches them
for every query (bench.evaluate.search) and keeps its top k, with corpus-wide indices. The ranks' top-k lists
(queries x k each) are gathered and merged by the ranking rule: rank r's indices all precede rank r+1's, so the
merge keeps ties in index order and the result is the single-process ranking. A rank's memory is its share of the
vectors and the gathered top-k lists: it falls as ranks are added.

When the rank read only its share of the corpus file (`read_beir(..., share=True)`, bench.data.corpus_share),
`docs` is that share already and `share` (its `CorpusShard`) places it: rows share.first_row.. of share.total.
No rank then knows every document's id: `gathered_ids` maps the merged top k to ids, each rank naming the
documents of its own share that made the top k, in one all_gather.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.data.lazy_corpus import CorpusShard
from bench.evaluate.search import exact_search, merge_numpy
from bench.runtime import distributed


def corpus_sharded(model: Any) -> bool:
    """Whether `model` is an encoder sharded over several processes (bench.encode.sharded.ShardedEncoder)."""
    return distributed.active() and getattr(model, "inner", None) is not None and callable(getattr(model.inner, "encode", None))


class Window(Sequence):
    """Items lo..hi-1 of a sequence, read only when asked (a slice reads the slice): a rank's share of a corpus that is
    read chunk by chunk from its file."""

    def __init__(self, items: Sequence[Any], lo: int, hi: int):
        self.items, self.lo, self.hi = items, lo, hi

    def __len__(self) -> int:
        return self.hi - self.lo

    def __getitem__(self, index):  # noqa: ANN001, ANN204
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                return [self[i] for i in range(start, stop, step)]
            return self.items[self.lo + start : self.lo + stop]
        if not -len(self) <= index < len(self):
            raise IndexError(index)
        return self.items[self.lo + index % len(self)]


def sharded_search(model: Any, q_emb: np.ndarray, docs: Sequence[str], k: int, desc: str,
                   share: CorpusShard | None = None) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """(scores, indices) of the top k documents per query, as `exact_search` over the whole corpus would give them,
    each rank encoding and searching its share (see the module docstring). Every rank gets the merged result.
    `share`: `docs` is this rank's share of the corpus, placed by it (else `docs` is the whole corpus)."""
    if share is None:
        n = len(docs)
        lo, hi = distributed.shard_bounds(n)
        mine: Sequence[str] = Window(docs, lo, hi)
    else:
        n, lo, hi, mine = share.total, share.first_row, share.first_row + len(docs), docs
    inner = model.inner
    device = getattr(inner, "device_name", "cpu")
    if len(mine):
        d_emb = inner.encode(mine, desc=f"{desc} corpus (documents {lo:,}-{hi:,})")
        scores, indices = exact_search(q_emb, d_emb, k, device=device)
        del d_emb
    else:  # more ranks than documents
        scores, indices = np.zeros((len(q_emb), 0), dtype=np.float32), np.zeros((len(q_emb), 0), dtype=np.int64)
    best_s = np.zeros((len(q_emb), 0), dtype=np.float32)
    best_i = np.zeros((len(q_emb), 0), dtype=np.int64)
    for part_s, part_i, offset in distributed.all_gather_object((scores, indices, lo)):  # in rank order
        best_s, best_i = merge_numpy(best_s, best_i, part_s, part_i + offset, min(k, n))
    return best_s, best_i


@dataclass(frozen=True)
class ShareIds:
    """The ids of a rank's share of a corpus (rows shard.first_row.. of the whole corpus), with the shard."""

    ids: list[str]
    shard: CorpusShard


class GatheredIds:
    """The ids of the corpus-wide rows a merged top k holds (`to_run` reads `names(row of indices)`)."""

    def __init__(self, rows: np.ndarray, ids: list[str]):
        self.rows, self.ids = rows, ids  # rows sorted, ids[i] the id of rows[i]

    def names(self, indices: np.ndarray) -> list[str]:
        positions = np.searchsorted(self.rows, np.maximum(indices, 0))
        return [self.ids[p] for p in positions.tolist()]


def gathered_ids(indices: np.ndarray, share: ShareIds) -> GatheredIds:
    """The ids of the documents in the merged top k (`indices`, corpus-wide rows): each rank names those of its
    own share, and the names are gathered once, in rank order (so sorted)."""
    doc_ids, lo = share.ids, share.shard.first_row
    hi = lo + len(doc_ids)
    rows = np.unique(indices[(indices >= lo) & (indices < hi)])
    rows_all, ids_all = [], []
    for part_rows, part_ids in distributed.all_gather_object((rows, [doc_ids[int(i) - lo] for i in rows.tolist()])):
        rows_all.append(part_rows)
        ids_all += part_ids
    return GatheredIds(np.concatenate(rows_all), ids_all)
