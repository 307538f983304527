"""Sentence splitting without network data: pysbd's rule-based English segmenter, a regex when it is missing.

Which sentence is "first" and which sentences a crop may use is what makes laser3 / cocodr-pt / crop those
methods, so every adapter splits with this one function. Results are cached: a text is split once per process, and a whole
training corpus can be split up front (in parallel, kept on disk: bench.data.sentence_cache) and `install`ed here,
which makes `split_sentences` of its texts a dictionary lookup.
"""

from __future__ import annotations

import re
from functools import lru_cache

_REGEX = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")


@lru_cache(maxsize=1)
def _segmenter():
    try:
        import pysbd
    except ImportError:  # pragma: no cover - pysbd is a dependency; the regex keeps the harness usable without it
        return None
    return pysbd.Segmenter(language="en", clean=False)


def regex_split(text: str) -> list[str]:
    """Split after . ! ? followed by whitespace and a capital/digit (abbreviations may over-split)."""
    return [s.strip() for s in _REGEX.split(text) if s and s.strip()]


def splitter_id() -> str:
    """Name and version of the splitter in use: a cache of splits is valid for this splitter only."""
    seg = _segmenter()
    if seg is None:
        return "regex-1"
    import pysbd

    return f"pysbd-{getattr(pysbd, '__version__', '?')}-en"


def split_normalised(text: str) -> tuple[str, ...]:
    """The sentences of an already normalised text (whitespace runs as single spaces), uncached."""
    if not text:
        return ()
    seg = _segmenter()
    parts = seg.segment(text) if seg is not None else regex_split(text)
    return tuple(p.strip() for p in parts if p and p.strip())


_KNOWN: dict[str, tuple[str, ...]] = {}  # normalised text -> sentences, for the corpora `install`ed


def install(splits: dict[str, tuple[str, ...]]) -> None:
    """Make these (normalised text -> sentences) splits the answer of `split_sentences` for those texts."""
    _KNOWN.update(splits)


def installed() -> dict[str, tuple[str, ...]]:
    """A copy of the installed splits (what a worker process is handed to install in its turn)."""
    return dict(_KNOWN)


def forget() -> None:
    """Drop the installed splits (tests, and a process done with a corpus)."""
    _KNOWN.clear()


@lru_cache(maxsize=65536)
def _split_cached(text: str) -> tuple[str, ...]:
    return split_normalised(text)


def split_sentences(text: str) -> list[str]:
    """The text's sentences, stripped, in order; [] for an empty text."""
    text = " ".join(text.split())
    known = _KNOWN.get(text)
    if known is not None:
        return list(known)
    return list(_split_cached(text)) if text else []


def first_and_rest(text: str) -> tuple[str, str]:
    """(first sentence, the rest of the text joined with spaces); rest is '' for a one-sentence text."""
    sentences = split_sentences(text)
    if not sentences:
        return "", ""
    return sentences[0], " ".join(sentences[1:])
