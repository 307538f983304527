"""`heldout`: a CONSTRUCTED known-item retrieval task from training-corpus documents that were held out of training.

For offline checks without labelled data (name it: `--suite heldout@elong`; `bench run` never falls back to it): each
held-out wiki-offline article gives one query, its LAST sentence, whose only relevant document is the rest of that
article; the corpus is the rests of all held-out articles (448). The first sentence would name the article's
subject and make the task trivial (all-MiniLM-L6-v2: nDCG@10 95.6, recall@100 100); the last sentence rarely
does (nDCG@10 84.7). Scored as the BEIR suites (bench.evaluate.suites.retrieval: exact cosine search or BM25, through
pytrec_eval, x100) on nDCG@10 (main) and MRR@10; recall@100 is not reported, since one relevant document among
448 sits in every top 100 (99.6). `@elong` elongates the documents (m in the run's variants, within max_len), as
the retrieval suites do; `@pad` pads them with sentences of the articles that are not held out (every held-out
document is some query's answer). It is not a published benchmark: results are labelled `heldout` and must not be
compared with BEIR figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bench.evaluate.suites.base import EvalContext, SuiteError
from results_db.records import ScoreRecord

DATASET = "wiki-offline-heldout"


METRICS = ("ndcg_at_10", "mrr_at_10")  # recall@100 is at its ceiling on 448 documents


def known_item_pairs(limit: int | None = None) -> tuple[list[str], list[str], list[str]]:
    """(query ids, queries = last sentences, documents = the sentences before) of held-out articles with >= 2."""
    from bench.data.corpus import is_heldout, wiki_offline_articles
    from bench.data.sentences import split_sentences

    ids, queries, docs = [], [], []
    for article in wiki_offline_articles():
        if not is_heldout(article.title):
            continue
        sentences = split_sentences(article.text)
        if len(sentences) >= 2:
            ids.append(article.title)
            queries.append(sentences[-1])
            docs.append(" ".join(sentences[:-1]))
        if limit and len(ids) >= limit:
            break
    return ids, queries, docs


def training_article_pool(seed: int):  # noqa: ANN201 - a Distractors
    """`@pad`'s distractors: every held-out document is some query's answer, so padding draws from the wiki-offline
    articles that are not held out (the training part) instead."""
    from bench.data.corpus import is_heldout, wiki_offline_articles
    from bench.evaluate.attacks import Distractors

    return Distractors.build([a.text for a in wiki_offline_articles() if not is_heldout(a.title)], seed)


@dataclass
class HeldoutSuite:
    name: str = "heldout"
    lexical_ok: bool = True  # scored by the retrieval code, so BM25 works here too

    def datasets(self) -> list[str]:
        return [DATASET]

    def evaluate(self, model: Any, dataset: str, ctx: EvalContext) -> list[ScoreRecord]:
        from bench.data.corpus import wiki_offline_file

        from bench.data.beir import RetrievalData
        from bench.evaluate.suites.retrieval import score_retrieval

        ids, queries, docs = known_item_pairs()
        subset = ctx.subset(dataset, len(ids), "held-out articles")
        if subset:
            ids, queries, docs = subset.take(ids), subset.take(queries), subset.take(docs)
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
        return score_retrieval(model, data, dataset, ctx, self.name, metrics=METRICS, pool=training_article_pool)


def make_suite(arg: str | None) -> HeldoutSuite:
    if arg and arg != DATASET:
        raise SuiteError(f"heldout has one dataset, {DATASET!r}; got {arg!r}")
    return HeldoutSuite()
