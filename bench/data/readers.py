"""Readers for the on-disk formats: BEIR folders, STS tsv pairs, labelled jsonl texts (plain or .gz)."""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.data.errors import DataError

csv.field_size_limit(1 << 30)


def open_text(path: str | os.PathLike[str]) -> io.TextIOBase:
    p = Path(path)
    if p.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(p, "rb"), encoding="utf-8")
    return open(p, encoding="utf-8", newline="")


def find_file(folder: Path, stem: str) -> Path | None:
    """`stem` or `stem.gz` inside folder."""
    for candidate in (folder / stem, folder / f"{stem}.gz"):
        if candidate.exists():
            return candidate
    return None


def read_jsonl(path: str | os.PathLike[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line; a corrupt line is a DataError naming file and line."""
    with open_text(path) as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}:{lineno}: not valid JSON ({exc.msg}); fix or remove that line") from None
            if not isinstance(obj, dict):
                raise DataError(f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}")
            yield lineno, obj


def _require(obj: dict[str, Any], keys: tuple[str, ...], path: Path | str, lineno: int) -> None:
    missing = [k for k in keys if k not in obj]
    if missing:
        raise DataError(f"{path}:{lineno}: missing field(s) {missing}; expected {list(keys)}")


# --------------------------------------------------------------------------- BEIR
@dataclass
class RetrievalData:
    name: str
    corpus: dict[str, dict[str, str]]  # doc id -> {"title", "text"}
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]  # query id -> {doc id: relevance}
    files: list[str] = field(default_factory=list)

    def doc_text(self, doc_id: str) -> str:
        """BEIR's document string: title + " " + text (just text when there is no title)."""
        doc = self.corpus[doc_id]
        title = (doc.get("title") or "").strip()
        return f"{title} {doc['text']}".strip() if title else doc["text"]


def read_beir(folder: str | os.PathLike[str], split: str = "test", name: str | None = None) -> RetrievalData:
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

    corpus: dict[str, dict[str, str]] = {}
    for lineno, obj in read_jsonl(corpus_path):
        _require(obj, ("_id", "text"), corpus_path, lineno)
        corpus[str(obj["_id"])] = {"title": str(obj.get("title") or ""), "text": str(obj["text"])}
    if not corpus:
        raise DataError(f"{corpus_path}: the corpus of {name!r} is empty; a retrieval dataset needs documents")

    all_queries: dict[str, str] = {}
    for lineno, obj in read_jsonl(queries_path):
        _require(obj, ("_id", "text"), queries_path, lineno)
        all_queries[str(obj["_id"])] = str(obj["text"])

    qrels: dict[str, dict[str, int]] = {}
    with open_text(qrels_path) as fh:
        reader = csv.reader(fh, delimiter="\t")
        for lineno, row in enumerate(reader, 1):
            if not row or (lineno == 1 and row[0] in ("query-id", "query_id", "qid")):
                continue
            if len(row) < 3:
                raise DataError(f"{qrels_path}:{lineno}: expected 'query-id<TAB>corpus-id<TAB>score', got {row!r}")
            qid, did, score = row[0], row[1], row[2]
            if did not in corpus:
                raise DataError(f"{qrels_path}:{lineno}: corpus-id {did!r} is not in {corpus_path.name}")
            if qid not in all_queries:
                raise DataError(f"{qrels_path}:{lineno}: query-id {qid!r} is not in {queries_path.name}")
            try:
                qrels.setdefault(qid, {})[did] = int(float(score))
            except ValueError:
                raise DataError(f"{qrels_path}:{lineno}: score {score!r} is not a number") from None
    if not qrels:
        raise DataError(f"{qrels_path}: no relevance judgements for split {split!r}")
    # Only judged queries are evaluated, as in BEIR.
    queries = {qid: all_queries[qid] for qid in qrels}
    return RetrievalData(name, corpus, queries, qrels, [str(corpus_path), str(queries_path), str(qrels_path)])


# ---------------------------------------------------------------------------- STS
@dataclass
class STSData:
    name: str
    sentences1: list[str]
    sentences2: list[str]
    scores: list[float]
    files: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.scores)


def read_sts(path: str | os.PathLike[str], name: str | None = None, split: str | None = None) -> STSData:
    """tsv with header sentence1, sentence2, score (more columns allowed). `split` filters a 'split' column."""
    p = Path(path)
    name = name or p.stem
    s1: list[str] = []
    s2: list[str] = []
    gold: list[float] = []
    with open_text(p) as fh:
        reader = csv.DictReader(fh, delimiter="\t")
        needed = {"sentence1", "sentence2", "score"}
        if reader.fieldnames is None or not needed <= set(reader.fieldnames):
            raise DataError(f"{p}:1: header must name {sorted(needed)}, got {reader.fieldnames}")
        for lineno, row in enumerate(reader, 2):
            if split is not None and row.get("split") != split:
                continue
            if row["sentence1"] is None or row["sentence2"] is None or row["score"] is None:
                raise DataError(f"{p}:{lineno}: expected sentence1<TAB>sentence2<TAB>score")
            try:
                value = float(row["score"])
            except ValueError:
                raise DataError(f"{p}:{lineno}: score {row['score']!r} is not a number") from None
            s1.append(row["sentence1"])
            s2.append(row["sentence2"])
            gold.append(value)
    if not gold:
        raise DataError(f"{p}: no sentence pairs" + (f" with split == {split!r}" if split else ""))
    return STSData(name, s1, s2, gold, [str(p)])


# ----------------------------------------------------------------- labelled texts
@dataclass
class LabelledData:
    name: str
    texts: list[str]
    labels: list[str]
    files: list[str] = field(default_factory=list)


def read_labelled(path: str | os.PathLike[str], name: str | None = None) -> LabelledData:
    p = Path(path)
    texts: list[str] = []
    labels: list[str] = []
    for lineno, obj in read_jsonl(p):
        _require(obj, ("text", "label"), p, lineno)
        texts.append(str(obj["text"]))
        labels.append(str(obj["label"]))
    if not texts:
        raise DataError(f"{p}: no labelled texts")
    return LabelledData(name or p.name.split(".")[0], texts, labels, [str(p)])
