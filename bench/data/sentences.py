"""Sentence splitting without network data: pysbd's rule-based English segmenter, a regex when it is missing.

Which sentence is "first" and which sentences a crop may use is what makes laser3 / cocodr-pt / crop those
methods, so every adapter splits with this one function. Results are cached: a text is split once per process.
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


@lru_cache(maxsize=65536)
def _split_cached(text: str) -> tuple[str, ...]:
    seg = _segmenter()
    parts = seg.segment(text) if seg is not None else regex_split(text)
    return tuple(p.strip() for p in parts if p and p.strip())


def split_sentences(text: str) -> list[str]:
    """The text's sentences, stripped, in order; [] for an empty text."""
    text = " ".join(text.split())
    return list(_split_cached(text)) if text else []


def first_and_rest(text: str) -> tuple[str, str]:
    """(first sentence, the rest of the text joined with spaces); rest is '' for a one-sentence text."""
    sentences = split_sentences(text)
    if not sentences:
        return "", ""
    return sentences[0], " ".join(sentences[1:])
