"""Sentence splits of a whole training corpus: computed once, in parallel over all cores, kept on disk.

The methods that pick sentences (laser3's first sentence, cocodr-pt's rest of the document, crop's chunks) call
`bench.data.sentences.split_sentences` text by text. pysbd costs milliseconds a text, so on a 5,000-document corpus
the first pass of a run spends most of its time splitting. `prepare(texts)` splits every text of the corpus up
front, in a process pool over the cores this process may use (`bench.runtime.pools`: never forked), writes the
splits to `<lenbench cache>/sentences/<key>.txt` and installs them in the splitter's lookup table (`sentences.install`), so
every later `split_sentences` of those texts is a dictionary lookup (in the training loader's workers too: they get
the installed splits with their copy of the batch builder).

The key is the corpus fingerprint (sha256 of its normalised texts, in order) with the splitter's name and version
(`sentences.splitter_id()`): another method, seed or run on the same corpus reads the file instead of splitting
again, and a new pysbd (or the regex fallback) never reuses splits it did not make.

File format: one line per text, in corpus order, the text's sentences joined by U+001E (a normalised text holds no
newline and no U+001E: `str.split()` treats both as whitespace). Written to a temporary name and renamed, so a
killed run leaves no half file; an unreadable or short file is ignored and made again. `bench cache clear` deletes a
file here only when `is_split_file` proves it is one of these (its `STORE`).
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.data import sentences
from bench.runtime import pools
from bench.runtime.paths import cache_dir
from bench.runtime.pools import usable_cores  # noqa: F401 - where callers have long found it
from bench.runtime.stores import FolderStore
from bench.runtime.writes import one_at_a_time


SEP = "\x1e"
FOLDER = "sentences"
FORMAT = 1  # bump when the file layout or the normalisation changes
FILE_NAME = re.compile(r"[0-9a-f]{64}\.txt")
TEMPORARY_NAME = re.compile(r"\.[0-9a-f]{64}\.txt\.\d+-[0-9a-f]{8}\.part")  # atomic_file's name for one in writing


@dataclass(frozen=True)
class Prepared:
    """What `prepare` did: how many texts, whether the splits came from disk, the file, and the seconds it took."""

    texts: int
    cached: bool
    path: Path | None
    seconds: float


def corpus_key(normalised: Sequence[str]) -> str:
    """sha256 over the splitter id, the format and the normalised texts in order (each closed by a newline)."""
    digest = hashlib.sha256(f"{sentences.splitter_id()}|format-{FORMAT}\n".encode())
    for text in normalised:
        digest.update(text.encode("utf-8", "surrogatepass"))
        digest.update(b"\n")
    return digest.hexdigest()


def cache_path(key: str) -> Path:
    return cache_dir() / FOLDER / f"{key}.txt"


def _split_chunk(chunk: list[str]) -> list[tuple[str, ...]]:
    return [sentences.split_normalised(t) for t in chunk]


def parallel_map(fn: Callable[[list[Any]], list[Any]], items: Sequence[Any], workers: int | None = None) -> list[Any]:
    """fn over chunks of `items` in `workers` processes (default: every usable core; 1: in this process), results
    concatenated in order: `bench.runtime.pools.parallel_map` (workers never forked from this process, no wait on
    a stuck one). `fn` must be a module-level function."""
    return pools.parallel_map(fn, items, workers, pool=pools.PoolSetup("sentence-split"))


def split_all(texts: Sequence[str], workers: int | None = None) -> list[tuple[str, ...]]:
    """The sentences of each (normalised) text, in order, split over `workers` processes."""
    return parallel_map(_split_chunk, texts, workers)


def _read(path: Path, n: int) -> list[tuple[str, ...]] | None:
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError):
        return None
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) != n:
        return None
    return [tuple(line.split(SEP)) if line else () for line in lines]


def _write(path: Path, splits: list[tuple[str, ...]]) -> None:
    """Best effort (a read-only cache folder: the splits are simply not kept), and never a partial file; concurrent
    writers write the same content: either one wins."""
    from bench.runtime.writes import atomic_file

    with atomic_file(path, "the sentence-split cache", best_effort=True) as tmp:
        with open(tmp, "w", encoding="utf-8") as fh:
            for parts in splits:
                fh.write(SEP.join(parts))
                fh.write("\n")


def prepare(texts: Sequence[str], workers: int | None = None, use_disk: bool = True) -> Prepared:
    """Split every text of `texts` once (from the disk cache when this corpus was split before) and install the
    splits, so `split_sentences` of any of these texts is a lookup."""
    start = time.monotonic()
    normalised = [" ".join(t.split()) for t in texts]
    key = corpus_key(normalised)
    path = cache_path(key) if use_disk else None
    splits = _read(path, len(normalised)) if path is not None and path.is_file() else None
    if splits is None and path is not None:
        # Runs started side by side on one corpus (a claim's seeds) split it once: the others wait, then read it.
        with one_at_a_time(path.parent, "the sentence splits"):
            splits = _read(path, len(normalised)) if path.is_file() else None
            cached = splits is not None
            if splits is None:
                splits = split_all(normalised, workers)
                _write(path, splits)
    else:
        cached = splits is not None
        if splits is None:
            splits = split_all(normalised, workers)
    sentences.install(dict(zip(normalised, splits)))
    return Prepared(texts=len(normalised), cached=cached, path=path, seconds=time.monotonic() - start)


def is_split_file(path: Path) -> bool:
    """Whether `path` is a file `prepare` wrote (or the temporary file of a write of one that was interrupted): its
    name, and text with no NUL byte that reads as UTF-8 (what `_write` writes)."""
    if TEMPORARY_NAME.fullmatch(path.name):
        return True
    if not FILE_NAME.fullmatch(path.name):
        return False
    try:
        data = path.read_bytes()
        data.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return b"\0" not in data


# The sentence splits as a store (`bench.runtime.stores`): the files of sentences/ that `is_split_file` proves are
# lenbench's.
STORE = FolderStore("sentence split file(s)", FOLDER, is_split_file, "not a sentence split file lenbench wrote",
                    FILE_NAME, kind="sentence-splits")
