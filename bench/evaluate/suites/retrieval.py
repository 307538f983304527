"""Retrieval suites `beir:NAME[,NAME]` and `beir14`: exact cosine search, metrics computed by pytrec_eval.

Scores are stored x100 (like the STS suite and the tables in DATA.md): nDCG@10 0.6451 is stored as 64.51.
Metrics (all through `pytrec_eval.RelevanceEvaluator`, i.e. trec_eval's definitions, as BEIR and mteb use):
    ndcg_at_10   trec_eval `ndcg_cut.10` (graded gains = qrels relevance)
    recall_at_100  trec_eval `recall.100`
    mrr_at_10    trec_eval `recip_rank` over each query's top 10 only. mteb computes MRR@k itself as the reciprocal
                 rank of the first relevant document (relevance > 0) within the top k, ties broken by document id
                 descending, which is what trec_eval does; cutting the run at 10 and asking for `recip_rank` gives
                 exactly that number.
Each query's top `TOP_K` (1000, as BEIR and mteb) documents form the run. Queries without any positive judgement
are dropped (mteb does the same). Identical query/document ids are removed from the run for the datasets whose
mteb task definitions ask for it (ArguAna, Quora, FiQA, FEVER), so published MTEB figures are reproduced.

Attacked variants (`@elong`, `@pad`, `@shuffle`, through `bench.evaluate.suites.variants`): documents are attacked
(token-aware within the model's max_len; BM25 gets the word-level form), queries stay clean. `@pad` draws its
distractor sentences from documents no query judges relevant, so padding never inserts an answer.

`--limit N` scores a seeded random sample of N judged queries (bench.evaluate.subsets) against the whole corpus, so
the score estimates the full set's: only the queries are sampled, each kept with its judgements. `--limit-mode first`
keeps the slice lenbench scored before the sample: the first N judged queries (in qrels-file order) and a corpus of
every document judged for them plus the first `LIMIT_DISTRACTORS_PER_QUERY * N` other documents in corpus-file order
(distractors), a far easier search than the full corpus.

cqadupstack (in beir14) is evaluated forum by forum (`cqadupstack-android`, ...) and written both per forum and as
dataset "cqadupstack" = the unweighted mean of the 12 forums (how BEIR and MTEB report it). The mean rows carry no
per-item values (a paired bootstrap over pooled queries would weight forums by size, which the mean does not).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pytrec_eval

from bench.data import BEIR14, get_info, read_beir
from bench.data.catalog import CQADUPSTACK_FORUMS, ignores_identical_ids
from bench.data.corpus_share import read_share
from bench.data.errors import DataError
from bench.data.beir import RetrievalData
from bench.evaluate.attacks import Distractors
from bench.evaluate.corpus_progress import CorpusProgress
from bench.evaluate.search import exact_search
from bench.evaluate.sharded_search import GatheredIds, ShareIds, corpus_sharded, gathered_ids, sharded_search
from bench.evaluate.subsets import FIRST, Subset
from bench.evaluate.suites.base import EvalContext, NamedDatasets, SuiteError, load_dataset
from bench.evaluate.suites.variants import variant_loop
from bench.runtime import stages
from results_db.records import ItemValues, ScoreRecord

TOP_K = 1000
NDCG_K = 10
RECALL_K = 100
MRR_K = 10
METRICS = ("ndcg_at_10", "recall_at_100", "mrr_at_10")
LIMIT_DISTRACTORS_PER_QUERY = 10
ITER_CHUNK = 10_000  # documents read per pass when a corpus is iterated whole

Run = dict[str, dict[str, float]]  # query id -> {doc id: score}


# ----------------------------------------------------------------------------- metrics
def retrieval_metrics(qrels: dict[str, dict[str, int]], run: Run) -> dict[str, dict[str, float]]:
    """Per-query nDCG@10, recall@100 and MRR@10 (x100) for every query of `qrels`, by pytrec_eval.

    A query absent from the run (nothing retrieved) scores 0 on every metric, as trec_eval -c would count it.
    """
    main = pytrec_eval.RelevanceEvaluator(qrels, {f"ndcg_cut.{NDCG_K}", f"recall.{RECALL_K}"}).evaluate(run)
    # MRR@10: recip_rank over the top 10 of each query, ranked as trec_eval ranks (score desc, then doc id desc).
    top10 = {qid: dict(sorted(docs.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)[:MRR_K]) for qid, docs in run.items()}
    rr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(top10)
    out: dict[str, dict[str, float]] = {}
    for qid in qrels:
        m = main.get(qid, {})
        out[qid] = {
            "ndcg_at_10": 100.0 * m.get(f"ndcg_cut_{NDCG_K}", 0.0),
            "recall_at_100": 100.0 * m.get(f"recall_{RECALL_K}", 0.0),
            "mrr_at_10": 100.0 * rr.get(qid, {}).get("recip_rank", 0.0),
        }
    return out


# ------------------------------------------------------------------------------ search
def to_run(query_ids: list[str], doc_ids: Sequence[str] | GatheredIds, scores: np.ndarray, indices: np.ndarray,
           ignore_identical_ids: bool, k: int) -> Run:  # fmt: skip
    """`doc_ids`: every document's id by row, or (a rank that read only its share) the ids of the rows retrieved."""
    run: Run = {}
    names = getattr(doc_ids, "names", None)
    for row, qid in enumerate(query_ids):
        hits: dict[str, float] = {}
        row_ids = names(indices[row]) if names is not None else doc_ids
        for pos, (s, j) in enumerate(zip(scores[row], indices[row])):
            if j < 0:  # not retrieved (a lexical model marks documents sharing no term this way)
                continue
            did = row_ids[pos] if names is not None else doc_ids[int(j)]
            if ignore_identical_ids and did == qid:
                continue
            hits[did] = float(s)
            if len(hits) == k:
                break
        run[qid] = hits
    return run


class CorpusTexts(Sequence):
    """The documents' strings (title + " " + text), or with `fields=True` their (title, text) pairs, built on access
    slice by slice: the encoder (and BM25's index) read a corpus chunk by chunk, so a large corpus is never held as
    Python strings (with a `LazyCorpus` it stays on disk until a chunk is read)."""

    def __init__(self, data: RetrievalData, doc_ids: list[str], fields: bool = False, progress: Any = None):
        self.data = data
        self.doc_ids = doc_ids
        self.fields = fields
        self.progress = progress  # a CorpusProgress told how far the file has been read (bench.evaluate.corpus_progress)

    def __len__(self) -> int:
        return len(self.doc_ids)

    def _build(self, doc_ids: list[str]) -> list:
        if not self.fields:
            out = self.data.doc_texts(doc_ids)
        else:
            out = [((d.get("title") or "").strip(), d["text"]) for d in self.data.documents(doc_ids)]
        if self.progress is not None:
            self.progress.read_up_to(getattr(self.data.corpus, "read_end", 0))
        return out

    def __getitem__(self, index):  # noqa: ANN001, ANN204
        if isinstance(index, slice):
            return self._build(self.doc_ids[index])
        return self._build([self.doc_ids[index]])[0]

    def __iter__(self):  # noqa: ANN204 - chunk by chunk, not one file seek per document
        for start in range(0, len(self.doc_ids), ITER_CHUNK):
            yield from self[start : start + ITER_CHUNK]


def is_lexical(model: Any) -> bool:
    return callable(getattr(model, "search", None)) and not callable(getattr(model, "encode", None))


def search_run(model: Any, queries: list[str], docs: Sequence[str], query_ids: list[str], doc_ids: list[str] | ShareIds,
               *, ignore_identical_ids: bool, desc: str, q_emb: np.ndarray | None = None) -> Run:  # fmt: skip
    """Rank the documents for every query with the model: exact cosine for encoders, the model's own search for BM25.
    `q_emb`: the queries' embeddings when the caller has them (queries are the same in every attacked variant).
    `doc_ids` a `ShareIds`: `docs` is this rank's share of the corpus (a sharded read, bench.data.corpus_share)."""
    k = TOP_K + (1 if ignore_identical_ids else 0)  # one spare: the query itself may be dropped
    if is_lexical(model):
        scores, indices = model.search(docs, queries, k)
    else:
        if q_emb is None:
            q_emb = model.encode(queries, desc=f"{desc} queries")
        if corpus_sharded(model):  # under torchrun: each rank encodes and searches its share of the corpus
            share = doc_ids.shard if isinstance(doc_ids, ShareIds) else None
            scores, indices = sharded_search(model, q_emb, docs, k, desc, share)
            if isinstance(doc_ids, ShareIds):
                doc_ids = gathered_ids(indices, doc_ids)
        else:
            d_emb = model.encode(docs, desc=f"{desc} corpus")
            device = getattr(model, "device_name", "cpu")
            with stages.timed("search"):
                scores, indices = exact_search(q_emb, d_emb, k, device=device)
    return to_run(query_ids, doc_ids, scores, indices, ignore_identical_ids, TOP_K)


# ------------------------------------------------------------------------------- data
def load_retrieval(dataset: str, ctx: EvalContext, share: bool = False) -> RetrievalData:
    """`share`: under torchrun, this rank reads only its byte range of the corpus (bench.data.corpus_share)."""
    reader = read_share if share else None
    with stages.timed("read"):
        data = load_dataset(dataset, ctx, "beir", "a retrieval (BEIR) dataset",
                            lambda located: read_beir(located.path, name=dataset, corpus_reader=reader))  # fmt: skip
    data = keep_positive_queries(data)
    subset = ctx.subset(dataset, len(data.qrels), "judged queries")
    if subset:
        data = limit_slice(data, subset)
    return data


def reads_share(model: Any, ctx: EvalContext) -> bool:
    """Whether each rank reads only its byte range of a corpus file: under torchrun, for an encoder searching its share
    (bench.evaluate.sharded_search), in a clean run without --limit. Attacks draw their random choices in corpus
    order and pad from documents anywhere in it, and --limit-mode first picks documents anywhere in it (a --limit
    sample is kept to one reader too, for now): those read it whole."""
    return corpus_sharded(model) and not ctx.limit and not ctx.attacks()


def keep_positive_queries(data: RetrievalData) -> RetrievalData:
    """Drop queries whose judgements are all non-positive: no metric is defined for them (mteb drops them too)."""
    qrels = {q: rels for q, rels in data.qrels.items() if any(r > 0 for r in rels.values())}
    if not qrels:
        raise DataError(f"{data.name}: no query has a positive relevance judgement (every qrels score is <= 0)")
    return replace(data, queries={q: data.queries[q] for q in qrels}, qrels=qrels)


def limit_slice(data: RetrievalData, subset: Subset | int,
                distractors_per_query: int = LIMIT_DISTRACTORS_PER_QUERY) -> RetrievalData:  # fmt: skip
    """The queries of `subset` (positions among the judged queries; an int N: the first N), each with its qrels. A
    sample keeps the whole corpus: its queries face the search the full set's do, so the score estimates the full
    set's. The first N (`--limit-mode first`) keep lenbench's earlier slice: their judged documents and the first
    `distractors_per_query` other documents per query in corpus-file order."""
    if isinstance(subset, int):
        if subset < 1:
            raise DataError(f"--limit must be a positive number of queries, got {subset}")
        subset = Subset(tuple(range(min(subset, len(data.qrels)))), len(data.qrels), FIRST, 0)
    qids = subset.take(list(data.qrels))
    qrels = {q: data.qrels[q] for q in qids}
    queries = {q: data.queries[q] for q in qids}
    if subset.mode != FIRST:
        return replace(data, queries=queries, qrels=qrels)
    judged = {d for rels in qrels.values() for d in rels}
    keep = set(judged)
    budget = distractors_per_query * len(qids)
    for did in data.corpus:
        if budget <= 0:
            break
        if did not in keep:
            keep.add(did)
            budget -= 1
    kept = [did for did in data.corpus if did in keep]  # corpus-file order kept
    corpus = dict(zip(kept, data.documents(kept)))
    return replace(data, corpus=corpus, queries=queries, qrels=qrels)


def retrieval_pool(data: RetrievalData, docs: Sequence):  # noqa: ANN201 - a pool factory
    """Distractor sentences for `@pad`: from documents that no query judges relevant (relevance > 0)."""
    relevant = {d for rels in data.qrels.values() for d, r in rels.items() if r > 0}
    doc_ids = list(data.corpus)
    exclude = {i for i, d in enumerate(doc_ids) if d in relevant}
    return lambda seed: Distractors.build(docs, seed, exclude=exclude)


# ------------------------------------------------------------------------------ suite
def score_retrieval(model: Any, data: RetrievalData, dataset: str, ctx: EvalContext, suite: str,
                    metrics: tuple[str, ...] = METRICS, pool: Any = None) -> list[ScoreRecord]:  # fmt: skip
    """All variants of one retrieval dataset: records for `metrics` (default all three), with per-query values.
    `pool(seed)`: the distractor sentences of `@pad` (default: the documents no query judges relevant)."""
    query_ids = list(data.qrels)
    queries = [data.queries[q] for q in query_ids]
    doc_ids = list(data.corpus)  # a rank that read only its share: its documents' ids (rows share.first_row..)
    share = getattr(data.corpus, "shard", None)
    run_ids = doc_ids if share is None else ShareIds(doc_ids, share)
    progress = corpus_progress(model, data)
    # BM25 scores title and text as fields of their own (bench.evaluate.lexical); encoders read title + " " + text
    clean_docs = CorpusTexts(data, doc_ids, fields=is_lexical(model), progress=progress)
    ignore_identical = ignores_identical_ids(dataset)  # its catalog entry (mteb's flag)
    q_emb = None if is_lexical(model) else model.encode(queries, desc=f"{dataset} queries")  # once: never attacked
    records = []
    # documents are what an attack changes (queries stay clean); BM25 reads whole texts (no tokenizer, no cut)
    loop = variant_loop(model, ctx, measured=clean_docs, pool=pool or retrieval_pool(data, clean_docs), dataset=dataset)
    for v in loop:
        variant = v.name
        docs = v.texts(clean_docs, salt=f"{dataset}|{variant}|docs")
        info = v.info(docs)
        run = search_run(model, queries, docs, query_ids, run_ids, ignore_identical_ids=ignore_identical,
                         desc=f"{dataset} {variant}", q_emb=q_emb)  # fmt: skip
        with stages.timed("scoring"):
            per_query = retrieval_metrics(data.qrels, run)
        for metric in metrics:
            values = [per_query[q][metric] for q in query_ids]
            records.append(
                ScoreRecord(
                    suite=suite,
                    dataset=dataset,
                    variant=variant,
                    metric=metric,
                    value=float(np.mean(values)),
                    n=len(values),
                    items=ItemValues("mean", list(query_ids), values),
                    info={**(info or {}), **({"duplicate_ids": dict(data.duplicates)} if data.duplicates else {}),
                          **data.anomalies} or None,
                )
            )
    if progress is not None:
        progress.finish()
    return records


def corpus_progress(model: Any, data: RetrievalData) -> CorpusProgress | None:
    """The progress note of an encoder with a cache scoring a corpus read from its file (a killed evaluation resumes
    from the cache: the note refuses a file that changed since); checked now. None where nothing resumes."""
    path = getattr(data.corpus, "path", None)
    folder = getattr(model, "cache_dir", None)
    if path is None or folder is None or not getattr(model, "use_cache", False) or is_lexical(model):
        return None
    who = f"{getattr(model, 'name', '')}|{getattr(model, 'max_len', '')}"
    share = getattr(data.corpus, "shard", None)
    if share is not None:  # a rank that reads its byte range keeps a note of that range (a note per rank)
        return _checked(CorpusProgress(path, f"{who}|bytes {share.start}-{share.end}", folder, start=share.start))
    return _checked(CorpusProgress(path, who, folder))


def _checked(progress: CorpusProgress) -> CorpusProgress:
    progress.check()
    return progress


@dataclass
class RetrievalSuite(NamedDatasets):
    names: tuple[str, ...]
    name: str = "beir"
    data_kind: str = "beir"  # datasets are catalog entries or local files of this kind
    lexical_ok: bool = True  # BM25 (`--model bm25`) scores retrieval through its own `search`

    def evaluate(self, model: Any, dataset: str, ctx: EvalContext) -> list[ScoreRecord]:
        if dataset == "cqadupstack":
            return self._cqadupstack(model, ctx)
        return score_retrieval(model, load_retrieval(dataset, ctx, reads_share(model, ctx)), dataset, ctx, self.name)

    def _cqadupstack(self, model: Any, ctx: EvalContext) -> list[ScoreRecord]:
        forum_records: list[ScoreRecord] = []
        for forum in CQADUPSTACK_FORUMS:
            name = f"cqadupstack-{forum}"
            forum_records += score_retrieval(model, load_retrieval(name, ctx, reads_share(model, ctx)), name, ctx, self.name)
        means = []
        for variant in ctx.variants():
            for metric in METRICS:
                vals = [r.value for r in forum_records if r.variant == variant and r.metric == metric]
                n = sum(r.n for r in forum_records if r.variant == variant and r.metric == metric)
                means.append(ScoreRecord(self.name, "cqadupstack", metric, float(np.mean(vals)), n=n, variant=variant))
        return forum_records + means


def _check_names(names: tuple[str, ...]) -> None:
    for n in names:
        if n == "cqadupstack":
            continue
        try:
            info = get_info(n, kind="beir")  # a name outside the catalog is a local beir/NAME/ folder
        except DataError as exc:
            raise SuiteError(str(exc)) from None
        if info.kind != "beir":
            raise SuiteError(f"{n!r} is not a retrieval (BEIR) dataset; e.g. beir:scifact")


def make_suite(arg: str | None) -> RetrievalSuite:
    """`beir:scifact[,nfcorpus]`; plain `beir` means the 14 BEIR sets (the named set of bench.data.catalog)."""
    if not arg:
        return RetrievalSuite(tuple(BEIR14))
    names = tuple(n.strip() for n in arg.split(",") if n.strip())
    if not names:
        raise SuiteError("beir: name at least one dataset, e.g. beir:scifact")
    _check_names(names)
    return RetrievalSuite(names)

