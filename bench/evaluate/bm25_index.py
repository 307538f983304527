"""A Lucene BM25 index of one text field, built chunk by chunk in bounded memory and searched by bm25s.

`bm25s.BM25.index` wants every document's token list at once: Python lists of strings for the whole corpus
(~2.8 KB per short document, measured at 1M documents), i.e. ~15 GB for FEVER's 5.4M. This module owns the
alternative: `FieldIndexBuilder.add` takes the token ids of one chunk of documents (bm25s's own tokenizer, called
per chunk), maps them into a vocabulary kept across chunks and keeps only compact arrays - each document's distinct
terms (int32) and their frequencies (float32), plus its length - so the chunk's token lists can be freed.
`build` computes exactly what bm25s computes (its `_build_idf_array` / `_build_scores_and_indices_for_matrix`
with `method="lucene"`: idf = ln(1 + (N - df + 0.5) / (df + 0.5)) in float32, tfc = tf / (tf + k1 (1 - b + b dl /
avgdl)) in float64, score = idf * tfc stored as float32), lays the scores out as bm25s's CSC matrix (documents x
terms, rows ascending within a column) and hands it to a `bm25s.BM25`, so bm25s's own `get_scores` ranks queries
exactly as an index bm25s built on the whole corpus would. It never tokenises or reads texts itself.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np


class FieldIndexBuilder:
    """Accumulates one field's documents, chunk by chunk, in corpus order; `build` turns them into a bm25s index.

    Memory per document: its distinct (term, frequency) pairs (8 bytes each) and its length (4 bytes); `build`
    peaks at twice the pairs (document-major arrays plus the term-major matrix), then keeps the matrix only."""

    def __init__(self, k1: float, b: float, method: str = "lucene"):
        if method != "lucene":
            # the formulas in `build` are Lucene's; bm25s's other variants (bm25l, bm25+ ...) would need their own
            raise ValueError(f"the streaming BM25 index implements method='lucene' only, got {method!r}")
        self.k1, self.b, self.method = k1, b, method
        self.vocab: dict[str, int] = {}  # token (stem) -> term id, kept across chunks
        self._lengths: list[np.ndarray] = []  # per chunk: each document's token count (int32)
        self._pairs_per_doc: list[np.ndarray] = []  # per chunk: each document's distinct-term count (int32)
        self._terms: list[np.ndarray] = []  # per chunk: term ids, document-major, ascending within a document
        self._freqs: list[np.ndarray] = []  # per chunk: their term frequencies (float32, as bm25s counts them)

    def add(self, token_ids: list[list[int]], chunk_vocab: dict[str, int]) -> None:
        """One chunk of documents as `bm25s.tokenize(..., return_ids=True)` gives them: per document its token ids
        in `chunk_vocab`'s numbering (token -> id, that chunk's own)."""
        n = len(token_ids)
        to_global = np.empty(len(chunk_vocab), dtype=np.int64)
        for token, local_id in chunk_vocab.items():
            to_global[local_id] = self.vocab.setdefault(token, len(self.vocab))
        lengths = np.fromiter(map(len, token_ids), dtype=np.int64, count=n)
        flat = np.fromiter(itertools.chain.from_iterable(token_ids), dtype=np.int64, count=int(lengths.sum()))
        # one key per token: (document in chunk, term id); unique keys sort document-major, term ids ascending
        n_terms = max(1, len(self.vocab))
        keys = np.repeat(np.arange(n, dtype=np.int64), lengths) * n_terms + to_global[flat]
        del flat
        keys, freqs = np.unique(keys, return_counts=True)
        docs, terms = np.divmod(keys, n_terms)
        del keys
        self._lengths.append(lengths.astype(np.int32))
        self._pairs_per_doc.append(np.bincount(docs, minlength=n).astype(np.int32))
        self._terms.append(terms.astype(np.int32))
        self._freqs.append(freqs.astype(np.float32))

    def build(self) -> Any:
        """The bm25s index of everything added (the builder is emptied), or None when no document has a term."""
        import bm25s

        lengths = np.concatenate(self._lengths) if self._lengths else np.empty(0, dtype=np.int32)
        self._lengths = []
        n_docs, n_terms = len(lengths), len(self.vocab)
        if n_docs == 0 or not lengths.any():
            return None
        df = np.zeros(n_terms, dtype=np.int64)
        for terms in self._terms:
            df += np.bincount(terms, minlength=n_terms)
        # bm25s: avg_doc_len = np.array(lengths).mean() (an exact integer sum / N); idf per term from its df
        avg_len = int(lengths.sum(dtype=np.int64)) / n_docs
        idf = np.log(1 + (n_docs - df + 0.5) / (df + 0.5)).astype(np.float32)
        # bm25s's layout: CSC, documents x terms, rows ascending within a column. It is filled chunk by chunk, so the
        # document-major pairs and the matrix coexist once (no concatenated copy of the pairs, no CSR in between)
        indptr = np.zeros(n_terms + 1, dtype=np.int64)
        np.cumsum(df, out=indptr[1:])
        del df
        data = np.empty(indptr[-1], dtype=np.float32)
        rows = np.empty(indptr[-1], dtype=np.int32)
        next_free = indptr[:-1].copy()  # per term: where its next (higher-numbered) document goes
        first_doc = 0
        while self._terms:
            terms, tf, per_doc = self._terms.pop(0), self._freqs.pop(0), self._pairs_per_doc.pop(0)
            first_doc += len(per_doc)
            if not len(terms):  # no document of the chunk has a term in this field (e.g. no titles)
                continue
            chunk_rows = np.repeat(np.arange(first_doc - len(per_doc), first_doc, dtype=np.int32), per_doc)
            doc_len = lengths[chunk_rows]
            # bm25s's _score_tfc_lucene with the same operand order (float64), times idf (float32), stored as float32
            tfc = tf / (self.k1 * ((1 - self.b) + self.b * doc_len / avg_len) + tf)
            scores = (idf[terms] * tfc).astype(np.float32)
            del tf, tfc, doc_len
            # place the chunk's pairs term-major: stable, so documents stay ascending within a term
            order = np.argsort(terms, kind="stable")
            sorted_terms = terms[order]
            group_start = np.flatnonzero(np.r_[True, sorted_terms[1:] != sorted_terms[:-1]])
            group_size = np.diff(np.r_[group_start, len(sorted_terms)])
            rank = np.arange(len(sorted_terms)) - np.repeat(group_start, group_size)
            where = next_free[sorted_terms] + rank
            data[where] = scores[order]
            rows[where] = chunk_rows[order]
            next_free[sorted_terms[group_start]] += group_size
        retriever = bm25s.BM25(method=self.method, k1=self.k1, b=self.b)
        # the attributes `bm25s.BM25.index` (and `BM25.load`) set that `get_scores` reads. Left out: the "" token
        # `index(create_empty_token=True)` adds outside the matrix (bm25s.tokenize never yields "", so a token query
        # never finds it) and `unique_token_ids_set`, which only `retrieve` reads (a set of millions of ints)
        retriever.scores = {"data": data, "indices": rows, "indptr": indptr, "num_docs": n_docs}
        retriever.vocab_dict = self.vocab
        retriever.nonoccurrence_array = None
        self.vocab = {}
        return retriever
