"""What an attack is: a named perturbation of a batch of texts (`Attack`), grouped in families (`AttackFamily`).

An attack changes texts before a model reads them, token-aware (`apply`: never past the model's max_len, special
tokens counted) and, for lexical models that read whole texts (BM25), word-level (`apply_words`: whitespace words
stand in for tokens, nothing is cut). It draws every random choice from the generator it is given, text by text in
order, so a corpus attacked chunk by chunk (`bench.evaluate.attacks.lazy.AttackedTexts`) gets the same texts as one
attacked whole. What the reports need comes with it: its family, its position on the family's axis (`x`, e.g. the
length factor m; None = shown apart, like random m) and a display order.

Attacks that insert unrelated text (distractor padding) take it from a `Distractors` pool: sentences of other items
of the same dataset, each tagged with the item it came from, so an item is never padded with its own sentences.

This module (and the whole attacks package) imports neither pandas nor SQLAlchemy: it is read by the encoder's
callers, the report and the leaderboard.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from bench.runtime.errors import ConfigError

CLEAN = "clean"  # the variant name of unattacked texts (the one definition; suites, report, leaderboard read it)
SPECIAL_TOKENS_BERT = 2  # [CLS] ... [SEP]
ATTACK_CHUNK = 4096  # texts tokenised per call: bounds the memory of token ids and offsets
POOL_ITEMS = 2000  # items whose sentences form a distractor pool (a random draw of them on a large corpus)


class Tokenizer(Protocol):
    def __call__(self, text, **kwargs): ...  # noqa: ANN001, ANN003, ANN204


Text = Any  # a string, or a (title, body) pair for BM25's multifield documents

# Sentence boundaries: after . ! ? and whitespace, before a capital, digit or opening quote (bench.data.sentences's
# regex fallback; pysbd would cost seconds per thousand documents and attacks must stay cheap).
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")


def split_sentences(text: str) -> list[str]:
    """The text's sentences (stripped, in order); [] for an empty text."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def body_of(text: Text) -> str:
    return text[1] if isinstance(text, tuple) else text


def with_body(text: Text, body: str) -> Text:
    return (text[0], body) if isinstance(text, tuple) else body


def word_count(text: Text) -> int:
    return len(f"{text[0]} {text[1]}".split()) if isinstance(text, tuple) else len(text.split())


def cut_at_budget(texts: Sequence[str], tokenizer: Tokenizer, budget: int) -> tuple[list[str], np.ndarray]:
    """Each text cut after its `budget`-th token (special tokens not counted), on a token boundary, in one
    fast-tokenizer call: (texts, whether each was cut)."""
    out: list[str] = []
    cut = np.zeros(len(texts), dtype=bool)
    if not texts:
        return out, cut
    enc = tokenizer(list(texts), add_special_tokens=False, truncation=True, max_length=budget + 1,
                    return_offsets_mapping=True, return_attention_mask=False,
                    return_token_type_ids=False)["offset_mapping"]  # fmt: skip
    for j, (text, offsets) in enumerate(zip(texts, enc)):
        if len(offsets) > budget:
            cut[j] = True
            text = text[: offsets[budget - 1][1]] if budget > 0 else ""
        out.append(text)
    return out, cut


def cut_each(texts: Sequence[str], limits: Sequence[int], tokenizer: Tokenizer, budget: int) -> list[str]:
    """Text j cut after its `limits[j]`-th token (each limit <= budget), in one fast-tokenizer call."""
    if not texts:
        return []
    enc = tokenizer(list(texts), add_special_tokens=False, truncation=True, max_length=budget + 1,
                    return_offsets_mapping=True, return_attention_mask=False,
                    return_token_type_ids=False)["offset_mapping"]  # fmt: skip
    out = []
    for text, limit, offsets in zip(texts, limits, enc):
        if limit <= 0:
            out.append("")
        elif len(offsets) > limit:
            out.append(text[: offsets[limit - 1][1]])
        else:
            out.append(text)
    return out


def token_counts(texts: Sequence[str], tokenizer: Tokenizer, cap: int) -> list[int]:
    """Tokens of each text without special tokens, counted up to `cap` (a longer text counts `cap`)."""
    if not texts:
        return []
    ids = tokenizer(list(texts), add_special_tokens=False, truncation=True, max_length=cap,
                    return_attention_mask=False, return_token_type_ids=False)["input_ids"]  # fmt: skip
    return [len(i) for i in ids]


# ---------------------------------------------------------------------------------------------- distractors
@dataclass
class Distractors:
    """Sentences to pad with: those of up to POOL_ITEMS items of a dataset, each with the index of its item.

    `exclude`: items never used (for retrieval, every document judged relevant to any query, so padding never
    inserts an answer). Which items are drawn depends only on `seed`.
    """

    sentences: list[str]
    owners: np.ndarray  # int64: the item each sentence came from
    _counts: dict[Any, np.ndarray] = field(default_factory=dict, repr=False)

    @classmethod
    def build(cls, texts: Sequence[Text], seed: int, owners: Sequence[int] | None = None,
              exclude: set[int] | frozenset[int] = frozenset(), max_items: int = POOL_ITEMS) -> Distractors:  # fmt: skip
        """From `texts` (item i's text, or with `owners` the item each text belongs to)."""
        eligible = [i for i in range(len(texts)) if (owners[i] if owners is not None else i) not in exclude]
        rng = random.Random(seed)
        chosen = sorted(rng.sample(eligible, max_items)) if len(eligible) > max_items else eligible
        sentences: list[str] = []
        owner: list[int] = []
        for i in chosen:
            for s in split_sentences(body_of(texts[i])):
                sentences.append(s)
                owner.append(owners[i] if owners is not None else i)
        return cls(sentences, np.asarray(owner, dtype=np.int64))

    def counts(self, tokenizer: Tokenizer | None) -> np.ndarray:
        """Length of each sentence: tokens without special tokens, or whitespace words without a tokenizer."""
        key = id(tokenizer) if tokenizer is not None else None
        if key not in self._counts:
            if tokenizer is None:
                counts = [len(s.split()) for s in self.sentences]
            else:
                counts = []
                for start in range(0, len(self.sentences), ATTACK_CHUNK):
                    counts += token_counts(self.sentences[start : start + ATTACK_CHUNK], tokenizer, 1 << 20)
            self._counts[key] = np.asarray(counts, dtype=np.int64)
        return self._counts[key]

    def draw(self, need: int, owner: int | None, rng: random.Random, counts: np.ndarray) -> str:
        """Random sentences of other items, joined, until they hold at least `need` tokens (or words); '' when the
        pool has none to give. Draws with replacement, so a small pool still fills a long text."""
        if need <= 0 or not self.sentences:
            return ""
        picked: list[str] = []
        total, tries = 0, 0
        limit = 4 * need + 100  # a pool made only of this item's own sentences gives up instead of looping
        while total < need and tries < limit:
            tries += 1
            i = rng.randrange(len(self.sentences))
            if owner is not None and self.owners[i] == owner:
                continue
            picked.append(self.sentences[i])
            total += max(1, int(counts[i]))
        return " ".join(picked)


@dataclass(frozen=True)
class AttackInput:
    """Where a chunk of texts sits in its dataset: item index of its first text (`offset`; or explicit `owners`),
    and the distractor pool when the attack pads."""

    offset: int = 0
    owners: Sequence[int] | None = None
    pool: Distractors | None = None

    def owner(self, j: int) -> int:
        return self.owners[j] if self.owners is not None else self.offset + j


# ---------------------------------------------------------------------------------------------------- attacks
@dataclass(frozen=True)
class Attack:
    """One attacked variant. Subclasses implement `apply` (token-aware) and `apply_words` (word-level)."""

    name: str  # the variant name stored with every score ('elong-2', 'pad-start-4', 'shuffle')
    family: str
    param: str  # what the family made it from ('2', 'rand', 'start-4', '')
    x: float | None  # position on the family's axis; None: shown apart (random m)
    order: float  # display order within the family
    needs_pool: bool = False  # pads with sentences of other items (`Distractors`)

    def apply(self, texts: Sequence[str], tokenizer: Tokenizer, max_len: int, rng: random.Random,
              where: AttackInput) -> list[str]:  # fmt: skip
        raise NotImplementedError

    def apply_words(self, texts: Sequence[Text], max_len: int, rng: random.Random, where: AttackInput) -> list:
        raise NotImplementedError(f"attack {self.name!r} has no word-level form")

    @property
    def x_label(self) -> str:
        return self.param if self.x is None else f"{self.x:g}"


def whole_number(param: str, low: int, high: int, problem: str) -> int:
    """A variant's parameter as a whole number from `low` to `high`; ConfigError(`problem`) when it is not one."""
    if not (param.isascii() and param.isdigit()) or not low <= int(param) <= high:
        raise ConfigError(problem)
    return int(param)


@dataclass(frozen=True)
class AttackFamily:
    """A suite suffix (`@elong`, `@pad`): how to make its attacks from parameters, and how reports show them.

    `make(param)` builds one attack ('2' -> elong-2) and raises ConfigError on a bad parameter; `defaults` are the
    parameters a suffix runs when the user names none. `selectable=False`: a family of variant names only (the
    needle suite's context lengths), never a suite suffix. `ordered`: how reports plot the variants: True, points
    on an ordered axis joined by a line (elong's m, needle's context length; a variant with no `x`, random m, is a
    point apart); False, categories side by side, never joined (pad's positions, shuffle).
    """

    name: str
    summary: str
    axis: str  # the report's x axis, e.g. "m (length factor)"
    defaults: tuple[str, ...]
    make: Callable[[str], Attack]
    order: int = 100  # families in reports: lower first
    selectable: bool = True
    param_help: str = ""
    ordered: bool = True
    cite: tuple[str, ...] = ()  # keys of bench/report/references.bib or whole BibTeX entries (bench.report.citations)

    def attacks(self, params: Sequence[str] | None = None) -> list[Attack]:
        out = [self.make(str(p).strip()) for p in (self.defaults if params is None else params)]
        return sorted(out, key=lambda a: a.order)

    def parse_variant(self, variant: str) -> Attack | None:
        """The attack a stored variant name stands for, if it is one of this family's."""
        if variant == self.name:
            param = ""
        elif variant.startswith(self.name + "-"):
            param = variant[len(self.name) + 1 :]
        else:
            return None
        try:
            attack = self.make(param)
        except (ConfigError, ValueError):
            return None
        return attack if attack.name == variant else None
