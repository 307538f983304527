"""`heldout`: a CONSTRUCTED known-item retrieval task from training-corpus documents that were held out of training.

For the offline default (no labelled data on the machine): each held-out wiki-offline article gives one query (its
first sentence) whose only relevant document is the rest of that article; the corpus is the rests of all held-out
articles. Scores: nDCG@10 (main), MRR@10, recall@10, exact cosine search. `@elong` elongates the documents
(m in the run's variants, truncated at max_len), as the retrieval suites do. It is not a published benchmark:
results are labelled `heldout` and must not be compared with BEIR figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.attacks import attack_texts
from bench.suites.base import CLEAN, EvalContext, SuiteError
from results_db import ItemValues, ScoreRecord

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


def rank_of_relevant(q: np.ndarray, d: np.ndarray) -> np.ndarray:
    """1-based rank of document i for query i under cosine (normalised embeddings), ties counted pessimistically."""
    sims = q @ d.T
    own = np.diag(sims)
    return (sims >= own[:, None]).sum(axis=1)


@dataclass
class HeldoutSuite:
    name: str = "heldout"

    def datasets(self) -> list[str]:
        return [DATASET]

    def evaluate(self, model: Any, dataset: str, ctx: EvalContext) -> list[ScoreRecord]:
        from bench.train.corpus import wiki_offline_file

        ids, queries, docs = known_item_pairs(ctx.limit)
        if len(ids) < 2:
            raise SuiteError("heldout: fewer than 2 held-out documents; nothing to rank")
        ctx.files_read.add(str(wiki_offline_file()))
        q = model.encode(queries, desc="heldout queries")
        records = []
        for variant in ctx.variants():
            texts = docs
            if variant != CLEAN:
                elong = variant.split("-", 1)[1]
                seed = ctx.rng(f"{dataset}|{variant}").getrandbits(32)
                texts = attack_texts(docs, elong, model.tokenizer, model.max_len, seed=seed)
            ranks = rank_of_relevant(q, model.encode(texts, desc=f"heldout {variant}"))
            ndcg = np.where(ranks <= 10, 1.0 / np.log2(ranks + 1), 0.0)
            mrr = np.where(ranks <= 10, 1.0 / ranks, 0.0)
            recall = (ranks <= 10).astype(float)
            for metric, values in (("ndcg@10", ndcg), ("mrr@10", mrr), ("recall@10", recall)):
                records.append(
                    ScoreRecord(
                        suite=self.name, dataset=dataset, variant=variant, metric=metric,
                        value=float(values.mean()), n=len(ids),
                        items=ItemValues("mean", ids, values.tolist()) if metric == "ndcg@10" else None,
                    )
                )
        return records


def make_suite(arg: str | None) -> HeldoutSuite:
    if arg and arg != DATASET:
        raise SuiteError(f"heldout has one dataset, {DATASET!r}; got {arg!r}")
    return HeldoutSuite()
