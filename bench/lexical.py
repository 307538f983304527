"""BM25 lexical baseline (`--model bm25`), built on the bm25s package.

Tokenisation is bm25s's own: lowercase, `\\w\\w+` words, bm25s's bundled English stop-word list (no download), no
stemming (PyStemmer is not a dependency; BEIR's Elasticsearch BM25 stems, so figures sit a little below BEIR's).
Scoring: Lucene BM25, k1=1.5, b=0.75 (bm25s defaults). Documents that share no term with a query are not returned.

Elongation for BM25 is word-level: `bench.attacks.elongate` copies the text m times, and nothing is truncated,
because BM25 has no max_len. The 'rand' variant draws m per text as the token-aware attack does,
m ~ U{1..max(1, (max_len - 2) // n_words)}, with whitespace words standing in for tokens, so elongated texts have
comparable length ranges across models.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from typing import Any

import numpy as np

from bench.attacks import elongate, sample_m

STOPWORDS = "en"  # bm25s ships this list; nothing is fetched
logging.getLogger("bm25s").setLevel(logging.WARNING)  # it logs every index build at DEBUG


class BM25Model:
    """Not an encoder: it has no `encode`; the retrieval suite calls `search` instead."""

    name = "bm25"
    tokenizer = None  # attacks are word-level, see `attack_texts`

    def __init__(self, max_len: int = 256, k1: float = 1.5, b: float = 0.75):
        self.max_len = max_len
        self.k1 = k1
        self.b = b

    def describe(self) -> dict[str, Any]:
        import bm25s

        return {
            "model": self.name,
            "pooling": None,
            "max_len": None,  # BM25 reads whole texts; max_len only sets the range of m for 'rand'
            "fingerprint": f"bm25s-{bm25s.__version__}-k1={self.k1}-b={self.b}-stop={STOPWORDS}",
            "device": "cpu",
        }

    @staticmethod
    def _tokenize(texts: Sequence[str]) -> list[list[str]]:
        import bm25s

        return bm25s.tokenize(list(texts), stopwords=STOPWORDS, return_ids=False, show_progress=False)

    def search(self, corpus_texts: Sequence[str], query_texts: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Index the corpus, rank it for every query: (scores, indices), each (n_queries, min(k, n_docs)), best first.

        Documents sharing no term with the query (score 0) get index -1: they were not retrieved.
        """
        import bm25s

        if not corpus_texts:
            raise ValueError("BM25: the corpus is empty")
        k = min(k, len(corpus_texts))
        retriever = bm25s.BM25(k1=self.k1, b=self.b)
        retriever.index(self._tokenize(corpus_texts), show_progress=False)
        indices, scores = retriever.retrieve(self._tokenize(query_texts), k=k, show_progress=False, n_threads=1)
        scores = np.asarray(scores, dtype=np.float32)
        indices = np.asarray(indices, dtype=np.int64)
        indices[scores <= 0] = -1
        return scores, indices

    def attack_texts(self, texts: Sequence[str], variant: str, seed: int = 0) -> list[str]:
        """Word-level elongation: f(S, m) untruncated; 'rand' draws m from the word count (see module doc)."""
        if variant == "rand":
            rng = random.Random(seed)
            return [elongate(t, sample_m(len(t.split()), self.max_len, rng)) for t in texts]
        m = int(variant)
        return [elongate(t, m) for t in texts]
