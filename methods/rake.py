"""RAKE keyword extraction (Rose et al. 2010) for one sentence, as PaSeR §3.1.1 uses it.

Candidate phrases are the maximal runs of content words between stop words and punctuation. Word score =
deg(w) / freq(w), where freq(w) counts w's occurrences in candidate phrases and deg(w) is the sum of the lengths
of the candidate phrases it occurs in (its co-occurrence degree, itself included). Phrase score = sum of its word
scores. Words are compared lowercased.

Stop words: NLTK's English list (the 179 words of nltk_data's stopwords corpus, which the common `rake-nltk`
implementation uses by default), written out below so nothing is downloaded. The paper's own examples (Table 7)
need such a function-word list: "At least 89 dead in china earthquakes" masks "least 89 dead" and "There are two
options for you" masks "two options"; scikit-learn's ENGLISH_STOP_WORDS (earlier used here) holds "least" and
"two", and content words such as "fire", "interest", "system" or "bill", and would split those phrases.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

NLTK_ENGLISH_STOP_WORDS = """
i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself yourselves he him his himself
she she's her hers herself it it's its itself they them their theirs themselves what which who whom this that that'll
these those am is are was were be been being have has had having do does did doing a an the and but if or because as
until while of at by for with about against between into through during before after above below to from up down in
out on off over under again further then once here there when where why how all any both each few more most other
some such no nor not only own same so than too very s t can will just don don't should should've now d ll m o re ve y
ain aren aren't couldn couldn't didn didn't doesn doesn't hadn hadn't hasn hasn't haven haven't isn isn't ma mightn
mightn't mustn mustn't needn needn't shan shan't shouldn shouldn't wasn wasn't weren weren't won won't wouldn wouldn't
""".split()

STOP_WORDS: frozenset[str] = frozenset(NLTK_ENGLISH_STOP_WORDS)

# Words (letters/digits, with inner apostrophes or hyphens) or single punctuation marks.
_TOKEN_RE = re.compile(r"[^\W_]+(?:['\-][^\W_]+)*|[^\w\s]|_")


def split_words(text: str) -> list[str]:
    """The word/punctuation tokens RAKE and the masking work on (punctuation marks are their own tokens)."""
    return _TOKEN_RE.findall(text)


def is_content_word(token: str, stop_words: frozenset[str] = STOP_WORDS) -> bool:
    return bool(re.search(r"[^\W_]", token)) and token.lower() not in stop_words


@dataclass(frozen=True)
class Phrase:
    words: tuple[str, ...]  # lowercased
    score: float
    spans: tuple[tuple[int, int], ...]  # [start, end) word-index spans of every occurrence, in order

    @property
    def text(self) -> str:
        return " ".join(self.words)


def candidate_spans(words: list[str], stop_words: frozenset[str] = STOP_WORDS) -> list[tuple[int, int]]:
    """Maximal runs of content words: stop words and punctuation delimit phrases."""
    spans, start = [], None
    for i, w in enumerate(words):
        if is_content_word(w, stop_words):
            if start is None:
                start = i
        elif start is not None:
            spans.append((start, i))
            start = None
    if start is not None:
        spans.append((start, len(words)))
    return spans


def rake(words: list[str], stop_words: frozenset[str] = STOP_WORDS) -> list[Phrase]:
    """Distinct candidate phrases of `words`, best first (ties: earlier first occurrence first)."""
    spans = candidate_spans(words, stop_words)
    freq: dict[str, int] = defaultdict(int)
    degree: dict[str, int] = defaultdict(int)
    for s, e in spans:
        for w in words[s:e]:
            freq[w.lower()] += 1
            degree[w.lower()] += e - s
    word_score = {w: degree[w] / freq[w] for w in freq}
    by_phrase: dict[tuple[str, ...], list[tuple[int, int]]] = {}
    for s, e in spans:
        by_phrase.setdefault(tuple(w.lower() for w in words[s:e]), []).append((s, e))
    phrases = [
        Phrase(words=key, score=sum(word_score[w] for w in key), spans=tuple(occ)) for key, occ in by_phrase.items()
    ]
    # sorted() is stable and by_phrase keeps first-occurrence order, so ties keep sentence order.
    return sorted(phrases, key=lambda p: -p.score)
