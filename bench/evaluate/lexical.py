"""BM25 lexical baseline (`--model bm25`), built on the bm25s package, set up as BEIR reports BM25.

Tokenisation: bm25s's own (lowercase, `\\w\\w+` words), its bundled English stop-word list (no download) and the
Snowball English stemmer (PyStemmer), as bm25s's BEIR benchmark (examples/evaluate_on_beir.py) does; BEIR's BM25
column comes from Elasticsearch's English analyser, which also stems and drops stop words. Scoring: Lucene BM25 with
k1=1.2, b=0.75 (Elasticsearch's defaults, and bm25s's BEIR settings). Fields: BEIR's BM25 scores a document's
title and text as separate fields (Pyserini's BEIR "multifield" runs reproduce the published column): each field
has its own index and the scores add up (`fields="multifield"`, the default; "flat" joins title + " " + text).
Measured on SciFact (nDCG@10): multifield 66.1, flat 67.9; BEIR publishes 66.5. Documents that share no term
with a query are not returned. `settings()` is recorded in every run row.

Indexing streams: the corpus is read, tokenised (bm25s's tokenizer) and indexed chunk by chunk
(`bench.evaluate.bm25_index` builds the same score matrix bm25s would and hands it to bm25s for scoring), so memory is the
index itself, not the whole corpus's token lists (issue 10: FEVER's 5.4M documents within 12 GB).

Attacks on BM25 are word-level (each attack's `apply_words`, chosen by `bench.evaluate.suites.variants` for a model
without a tokenizer): whitespace words stand in for tokens and nothing is truncated, because BM25 has no max_len.
Elongation copies the text m times; its 'rand' variant draws m per text as the token-aware attack does,
m ~ U{1..max(1, (max_len - 2) // n_words)}, so elongated texts have comparable length ranges across models;
padding inserts (m - 1) x n_words words of other documents' sentences into the text field.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from typing import Any

import numpy as np

from bench.encode.options import ENCODER_DEFAULTS
from bench.evaluate.attacks import AttackedTexts, elongate_words
from bench.evaluate.bm25_index import FieldIndexBuilder

STOPWORDS = "en"  # bm25s ships this list; nothing is fetched
STEMMER = "english"  # PyStemmer's Snowball English stemmer
METHOD = "lucene"
K1 = 1.2
B = 0.75
# Title and text scored as two fields and summed: what BEIR's published BM25 column is (Pyserini's BEIR runs call
# it "multifield"; SciFact nDCG@10 66.5, against 67.9 for the title and text joined into one text, "flat").
FIELDS = "multifield"
# documents tokenised and indexed at a time: their token lists are the only per-text Python objects that exist
CHUNK_DOCS = 20_000
logging.getLogger("bm25s").setLevel(logging.WARNING)  # it logs every index build at DEBUG


class BM25Model:
    """Not an encoder: it has no `encode`; the retrieval suite calls `search` instead."""

    name = "bm25"
    tokenizer = None  # attacks are word-level (see the module doc)

    def __init__(self, max_len: int = ENCODER_DEFAULTS.max_len, k1: float = K1, b: float = B, method: str = METHOD,
                 stemmer: str | None = STEMMER, stopwords: str | None = STOPWORDS, fields: str = FIELDS, chunk_docs: int = CHUNK_DOCS):  # fmt: skip
        if fields not in ("multifield", "flat"):
            raise ValueError(f"BM25 fields must be 'multifield' or 'flat', got {fields!r}")
        if chunk_docs < 1:
            raise ValueError(f"BM25 chunk_docs must be a positive number of documents, got {chunk_docs!r}")
        self.chunk_docs = chunk_docs  # memory only: scores do not depend on it
        self.fields = fields
        self.max_len = max_len
        self.k1 = k1
        self.b = b
        self.method = method
        self.stemmer = stemmer
        self.stopwords = stopwords

    def settings(self) -> dict[str, Any]:
        """Everything that decides BM25's scores (recorded in the run's config)."""
        import bm25s

        # scores equal bm25s's own index (tests/test_lexical.py), the name says which code built it
        return {"implementation": f"bm25s {bm25s.__version__} tokenizer + lenbench streaming index",
                "method": self.method, "k1": self.k1, "b": self.b,
                "stemmer": f"PyStemmer {self.stemmer}" if self.stemmer else None, "stopwords": self.stopwords,
                "fields": self.fields}  # fmt: skip

    def describe(self) -> dict[str, Any]:
        s = self.settings()
        return {
            "model": self.name,
            "pooling": None,
            "max_len": None,  # BM25 reads whole texts; max_len only sets the range of m for 'rand'
            "fingerprint": "-".join(f"{k}={v}" for k, v in s.items()).replace(" ", ""),
            "device": "cpu",
            "bm25": s,
        }

    def _stemmer(self) -> Any:
        if not self.stemmer:
            return None
        import Stemmer

        return Stemmer.Stemmer(self.stemmer)

    def _tokenize(self, texts: Sequence[str], return_ids: bool = False) -> Any:
        """bm25s's tokenizer with this model's stop words and stemmer: token lists, or (with `return_ids`) bm25s's
        `Tokenized(ids, vocab)` numbered for these texts alone."""
        import bm25s

        return bm25s.tokenize(list(texts), stopwords=self.stopwords, stemmer=self._stemmer(), return_ids=return_ids,
                              show_progress=False)  # fmt: skip

    def search(self, corpus: Sequence[str | tuple[str, str]], query_texts: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Index the corpus, rank it for every query: (scores, indices), each (n_queries, min(k, n_docs)), best first.

        `corpus`: texts, or (title, text) pairs, as any Sequence: it is read only by slices of `chunk_docs` documents
        (a lazily read corpus stays on disk). With `fields="multifield"` each field of a pair gets its own BM25
        index and a document's score is the sum of its fields' scores; with "flat" a pair is joined into one text.
        Documents sharing no term with the query (score 0) get index -1: they were not retrieved.
        """
        n_docs = len(corpus)
        if n_docs == 0:
            raise ValueError("BM25: the corpus is empty")
        k = min(k, n_docs)
        retrievers = [r for r in self._index(corpus) if r is not None]
        queries = self._tokenize(query_texts)
        scores = np.zeros((len(queries), k), dtype=np.float32)
        indices = np.full((len(queries), k), -1, dtype=np.int64)
        for qi, query in enumerate(queries):
            if not query or not retrievers:
                continue
            total = np.sum([r.get_scores(query) for r in retrievers], axis=0)
            top = np.argpartition(-total, k - 1)[:k] if k < len(total) else np.arange(len(total))
            top = top[np.lexsort((top, -total[top]))]  # score desc, then corpus order (stable ties)
            scores[qi] = total[top]
            indices[qi] = np.where(total[top] > 0, top, -1)
        return scores, indices

    def _index(self, corpus: Sequence[str | tuple[str, str]]) -> list[Any]:
        """One bm25s index per field (None for a field where no document has a term, e.g. a corpus without titles),
        built chunk by chunk: only one chunk's texts and token lists exist at a time (bench.evaluate.bm25_index)."""
        n_fields = 1 if self.fields == "flat" else 2
        builders = [FieldIndexBuilder(self.k1, self.b, self.method) for _ in range(n_fields)]
        for start in range(0, len(corpus), self.chunk_docs):
            pairs = [d if isinstance(d, tuple) else ("", d) for d in corpus[start : start + self.chunk_docs]]
            if self.fields == "flat":
                fields = [[f"{t} {x}".strip() for t, x in pairs]]
            else:
                fields = [[t for t, _ in pairs], [x for _, x in pairs]]
            for builder, texts in zip(builders, fields):
                builder.add(*self._tokenize(texts, return_ids=True))  # bm25s's Tokenized(ids, vocab)
        logging.getLogger("bm25s").setLevel(logging.WARNING)  # bm25s resets it on import; it logs at DEBUG
        return [builder.build() for builder in builders]

    def attack_texts(self, texts: Sequence[str | tuple[str, str]], variant: str, seed: int = 0) -> Sequence:
        """Word-level elongation: f(S, m) untruncated; 'rand' draws m from the word count (see module doc). A
        (title, text) document is elongated field by field with the same m (as f(title + text, m) would). A corpus
        of more than `chunk_docs` documents comes back lazy (`WordAttackedTexts`: the same texts, computed chunk by
        chunk as `search` reads them), so it is never held elongated as a whole (m times the corpus)."""
        if len(texts) > self.chunk_docs:
            return WordAttackedTexts(texts, variant, self.max_len, seed=seed)
        return elongate_words(texts, variant, self.max_len, random.Random(seed))


class WordAttackedTexts(AttackedTexts):
    """BM25's word-level elongation, computed chunk by chunk on access as `AttackedTexts` computes the token-level one
    (the random generator's state is kept at chunk boundaries, so the texts equal `elongate_words` on the whole)."""

    def __init__(self, texts: Sequence[str | tuple[str, str]], variant: str, max_len: int, seed: int = 0):
        super().__init__(texts, variant, tokenizer=None, max_len=max_len, seed=seed, words=True)
