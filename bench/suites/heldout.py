"""`heldout`: a CONSTRUCTED known-item retrieval task from training-corpus documents that were held out of training.

For the offline default (no labelled data on the machine): each held-out wiki-offline article gives one query (its
first sentence) whose only relevant document is the rest of that article; the corpus is the rests of all held-out
articles. Scored exactly as the BEIR suites (bench.suites.retrieval: exact cosine search or BM25, nDCG@10 main,
recall@100, MRR@10 through pytrec_eval, x100); `@elong` elongates the documents (m in the run's variants, within
max_len), as the retrieval suites do. It is not a published benchmark:
results are labelled `heldout` and must not be compared with BEIR figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bench.suites.base import EvalContext, SuiteError
from results_db import ScoreRecord

DATASET = "wiki-offline-heldout"


def known_item_pairs(limit: int | None = None) -> tuple[list[str], list[str], list[str]]:
    """(query ids, queries = first sentences, documents = the rest) of held-out articles with >= 2 sentences."""
    from bench.train.corpus import is_heldout, wiki_offline_articles
    from bench.train.sentences import first_and_rest

    ids, queries, docs = [], [], []
    for article in wiki_offline_articles():
        if not is_heldout(article.title):
            continue
        first, rest = first_and_rest(article.text)
        if first and rest:
            ids.append(article.title)
            queries.append(first)
            docs.append(rest)
        if limit and len(ids) >= limit:
            break
    return ids, queries, docs


@dataclass
class HeldoutSuite:
    name: str = "heldout"
    lexical_ok: bool = True  # scored by the retrieval code, so BM25 works here too

    def datasets(self) -> list[str]:
        return [DATASET]

    def evaluate(self, model: Any, dataset: str, ctx: EvalContext) -> list[ScoreRecord]:
        from bench.train.corpus import wiki_offline_file

        from bench.data.readers import RetrievalData
        from bench.suites.retrieval import score_retrieval

        ids, queries, docs = known_item_pairs(ctx.limit)
        if len(ids) < 2:
            raise SuiteError("heldout: fewer than 2 held-out documents; nothing to rank")
        files = [str(wiki_offline_file())]
        ctx.files_read.update(files)
        doc_ids = [f"{i}#rest" for i in ids]
        data = RetrievalData(
            dataset,
            corpus={d: {"text": text} for d, text in zip(doc_ids, docs)},
            queries=dict(zip(ids, queries)),
            qrels={q: {d: 1} for q, d in zip(ids, doc_ids)},
            files=files,
        )
        return score_retrieval(model, data, dataset, ctx, self.name)


def make_suite(arg: str | None) -> HeldoutSuite:
    if arg and arg != DATASET:
        raise SuiteError(f"heldout has one dataset, {DATASET!r}; got {arg!r}")
    return HeldoutSuite()
