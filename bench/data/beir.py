"""The BEIR folder format (corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv; each plain or .gz) as `RetrievalData`."""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.data.errors import DataError
from bench.data.lazy_corpus import CorpusIndex, Document
from bench.data.lines import find_file, open_text, read_jsonl, read_jsonl_at
from bench.data.records import _Duplicates, _require, _UnknownDocs, nonblank, text_field


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
