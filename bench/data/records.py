"""Checks of the records a reader parses: required fields, text fields, non-blank texts, and the counts of what
is kept though odd (repeated ids, judgements of unknown documents, empty documents), each reported once.

Duplicate BEIR ids follow BEIR's GenericDataLoader (the last record of an id wins; mteb keeps every row and its
scores end up keyed by id the same way), with a warning naming the ids and lines and a count in
`RetrievalData.duplicates` that the retrieval suite records with the scores.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from bench.data.errors import DataError
from bench.runtime import distributed

log = logging.getLogger(__name__)


def _require(obj: dict[str, Any], keys: tuple[str, ...], path: Path | str, lineno: int) -> None:
    missing = [k for k in keys if k not in obj]
    if missing:
        raise DataError(f"{path}:{lineno}: missing field(s) {missing}; expected {list(keys)}")


def text_field(obj: dict[str, Any], key: str, path: Path | str, lineno: int, optional: bool = False) -> str:
    """A text field: a string; null is an error (BEIR would index it as "None"), or "" where it is optional."""
    value = obj.get(key)
    if value is None:
        if optional:
            return ""
        raise DataError(f"{path}:{lineno}: {key!r} is null; give it a text (or remove that record)")
    if not isinstance(value, str):
        raise DataError(f"{path}:{lineno}: {key!r} must be a string, got {type(value).__name__} {value!r:.40}")
    return value


def nonblank(text: str, what: str, path: Path | str, lineno: int) -> str:
    """A text a score rests on (an STS sentence, a query, a kNN text) must have content: an empty or blank one would
    be encoded as the special tokens alone and scored as if it were data."""
    if not text.strip():
        raise DataError(f"{path}:{lineno}: {what} is empty{' (only white space)' if text else ''}; "
                        "a model cannot be scored on it: fix or remove that record")  # fmt: skip
    return text


class _Duplicates:
    """Ids seen twice in one file: BEIR keeps the last record, and so do we; counted and reported once."""

    def __init__(self, path: Path | str, kind: str):
        self.path, self.kind = path, kind
        self.first_line: dict[str, int] = {}
        self.repeats: list[tuple[str, int, int]] = []  # id, first line, repeated line
        self.more = 0  # repeats counted but not kept (a torchrun rank's report keeps the first few)

    def see(self, key: str, lineno: int) -> None:
        first = self.first_line.setdefault(key, lineno)
        if first != lineno:
            self.repeats.append((key, first, lineno))

    def repeat(self, key: str, first: int, lineno: int) -> None:
        """A repeat the caller found itself (a corpus keeps its ids' rows: no second map of every id here)."""
        self.repeats.append((key, first, lineno))

    def report(self) -> int:
        n = len(self.repeats) + self.more
        if n and distributed.is_main():  # under torchrun every rank reads the same counts: one warning
            shown = "; ".join(f"{k!r} at lines {a} and {b}" for k, a, b in self.repeats[:5])
            more = f" and {n - 5} more" if n > 5 else ""
            log.warning(
                "%s: %d duplicate %s id(s): %s%s. As BEIR's GenericDataLoader does, the last record of each id is "
                "used; the count is recorded with the scores (Score.info)", self.path, n, self.kind, shown, more,
            )
        return n


class _UnknownDocs:
    """Judgements naming a document the corpus does not have: kept (BEIR and mteb score them as relevant documents
    no search returns), counted and reported once."""

    def __init__(self, qrels_path: Path, corpus_path: Path):
        self.qrels_path, self.corpus_path = qrels_path, corpus_path
        self.count = 0
        self.shown: list[tuple[str, int]] = []  # the first three

    def see(self, doc_id: str, lineno: int) -> None:
        self.count += 1
        if len(self.shown) < 3:
            self.shown.append((doc_id, lineno))

    def report(self) -> int:
        if self.count and distributed.is_main():
            shown = ", ".join(f"{d!r} (line {n})" for d, n in self.shown)
            log.warning("%s: %d judgement(s) name documents that are not in %s (%s%s); they are kept as relevant "
                        "documents no search can return, as BEIR scores them (recall and nDCG count them as missed); "
                        "the count is recorded with the scores (Score.info)", self.qrels_path, self.count,
                        self.corpus_path.name, shown, " ..." if self.count > 3 else "")  # fmt: skip
        return self.count


class _Blank:
    """Documents with neither title nor text: kept (a search may still rank them: they are encoded as the special
    tokens alone), counted and reported once; a corpus of nothing but such documents is refused."""

    def __init__(self, path: Path):
        self.path = path
        self.count = 0
        self.first: tuple[str, int] | None = None

    def see(self, doc_id: str, lineno: int) -> None:
        self.count += 1
        self.first = self.first or (doc_id, lineno)

    def report(self, total: int) -> None:
        if not self.count or self.first is None:
            return
        if self.count >= total:
            raise DataError(f"{self.path}: none of its {total} documents has a title or a text; a retrieval dataset "
                            "needs documents with content (check the 'text' field of each line)")  # fmt: skip
        if distributed.is_main():
            log.warning("%s: %d of %d documents have neither title nor text (first: %r at line %d); they are kept "
                        "and encoded as empty texts; the count is recorded with the scores (Score.info)", self.path,
                        self.count, total, *self.first)  # fmt: skip
