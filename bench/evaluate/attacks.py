"""Elongation attacks (LA(SER)^3 §2, SPEC §2-3) and the word shuffle of the positional diagnostic.

`elongate(S, m)` is the paper's copy-and-concatenate operator f(S, m). Models see at most `max_len` tokens, so
the token-aware forms either choose m so that the copies fit (`sample_m`, `max_m`) or cut the elongated text at
the last whole token that fits (`elongate_within`): no attacked input ever exceeds max_len.

Batch forms for whole corpora (fast tokenizer, a few calls per chunk of texts instead of 2-3 per text):
`attack_batch` (attacked texts + each text's m + whether it was cut at max_len; `attack_texts` keeps only the texts)
and `model_input_ids` (what a model reads of each text, via `bench.encode.inputs.model_inputs`).

What an attack changed (`AttackMeter`, `attack_effect`): the share of texts whose model input differs from the
clean text's, and of clean texts already cut at max_len, recorded in Score.info of every attacked variant.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.encode.inputs import Tokenizer, model_inputs
from bench.runtime.errors import ConfigError


SPECIAL_TOKENS_BERT = 2  # [CLS] ... [SEP]


def elongate(text: str, m: int) -> str:
    """f(S, m): S copied m times, joined with a space."""
    if m < 1:
        raise ValueError(f"elongation factor m must be >= 1, got {m}")
    return " ".join([text] * m)


def count_tokens(text: str, tokenizer: Tokenizer) -> int:
    """Token count without special tokens (the paper's n)."""
    return len(tokenizer(text, add_special_tokens=False, truncation=False)["input_ids"])


def max_m(n_tokens: int, max_len: int, special_tokens: int = SPECIAL_TOKENS_BERT) -> int:
    """The largest m whose copies fit: max(1, floor((max_len - specials) / n))."""
    return max(1, (max_len - special_tokens) // max(1, n_tokens))


def sample_m(n_tokens: int, max_len: int, rng: random.Random, special_tokens: int = SPECIAL_TOKENS_BERT) -> int:
    """m drawn uniformly from {1, ..., max_m(n, max_len)} (10 tokens at 256 -> 1..25; 50 -> 1..5)."""
    return rng.randint(1, max_m(n_tokens, max_len, special_tokens))


def truncate_to_tokens(text: str, tokenizer: Tokenizer, max_tokens: int) -> str:
    """Cut `text` after its `max_tokens`-th token (special tokens not counted), on a token boundary."""
    enc = tokenizer(text, add_special_tokens=False, truncation=False, return_offsets_mapping=True)
    offsets = enc["offset_mapping"]
    if len(offsets) <= max_tokens:
        return text
    if max_tokens <= 0:
        return ""
    return text[: offsets[max_tokens - 1][1]]


def elongate_within(
    text: str, m: int, tokenizer: Tokenizer, max_len: int, special_tokens: int = SPECIAL_TOKENS_BERT
) -> str:
    """f(S, m) cut so that, with special tokens, it is at most max_len tokens (the SPEC's 'truncated at max len').

    Only as many copies as can contribute are built, so elongating a long document by 8 never tokenizes 8 copies.
    """
    budget = max_len - special_tokens
    n = count_tokens(text, tokenizer)
    copies = min(m, budget // max(1, n) + 1)
    return truncate_to_tokens(elongate(text, copies), tokenizer, budget)


def elongate_random(
    text: str,
    tokenizer: Tokenizer,
    max_len: int,
    rng: random.Random,
    special_tokens: int = SPECIAL_TOKENS_BERT,
) -> tuple[str, int]:
    """The LA(SER)^3 training augmentation: m ~ U{1..max_m}, copies that fit whole. Returns (text, m)."""
    n = count_tokens(text, tokenizer)
    m = sample_m(n, max_len, rng, special_tokens)
    return elongate_within(text, m, tokenizer, max_len, special_tokens), m


def shuffle_words(text: str, rng: random.Random) -> str:
    """Random permutation of whitespace-separated words (positional-invariance diagnostic)."""
    words = text.split()
    rng.shuffle(words)
    return " ".join(words)


def parse_elong_variants(spec: str | Sequence[str | int] | None) -> list[str]:
    """'2,4,8,rand' -> ['2', '4', '8', 'rand']; validates each entry (a bad one is a ConfigError, a ValueError)."""
    if spec is None:
        spec = "2,4,8,rand"
    items = spec.split(",") if isinstance(spec, str) else [str(s) for s in spec]
    out = []
    for item in (i.strip() for i in items):
        if item == "rand":
            out.append(item)
            continue
        if not item.isdigit() or int(item) < 2:
            raise ConfigError(f"elongation variant {item!r}: use integers >= 2 or 'rand' (e.g. --elong 2,4,8,rand)")
        out.append(item)
    return out


@dataclass
class Attacked:
    """One elongation variant applied to a list of texts: the attacked texts, each text's m, and whether the
    elongated text was cut at max_len (the model then sees a prefix of f(S, m))."""

    texts: list[str]
    m: np.ndarray  # int32
    truncated: np.ndarray  # bool


ATTACK_CHUNK = 4096  # texts tokenised per call: bounds the memory of token ids and offsets


def attack_batch(
    texts: Sequence[str], variant: str, tokenizer: Tokenizer, max_len: int, seed: int = 0,
    special_tokens: int = SPECIAL_TOKENS_BERT, rng: random.Random | None = None,
) -> Attacked:  # fmt: skip
    """`attack_texts` with its bookkeeping, tokenised in batches (two fast-tokenizer calls per chunk of texts).

    Exactly `elongate_within` / `elongate_random` text by text (same m draws from one `random.Random(seed)`, in
    order): n only matters up to the budget (a text longer than max_len - 2 tokens gets one copy and m_max = 1), so
    the count is taken on the text cut at budget + 1 tokens, and the cut of f(S, m) reads the offsets of its first
    budget + 1 tokens. `rng` (instead of `seed`): a generator to draw from and leave advanced (`AttackedTexts`).
    """
    budget = max_len - special_tokens
    if variant != "rand":
        rng = None
    elif rng is None:
        rng = random.Random(seed)
    fixed_m = None if variant == "rand" else int(variant)
    out: list[str] = []
    ms = np.zeros(len(texts), dtype=np.int32)
    cut = np.zeros(len(texts), dtype=bool)
    for start in range(0, len(texts), ATTACK_CHUNK):
        chunk = list(texts[start : start + ATTACK_CHUNK])
        counts = tokenizer(chunk, add_special_tokens=False, truncation=True, max_length=budget + 1,
                           return_attention_mask=False, return_token_type_ids=False)["input_ids"]  # fmt: skip
        elongated = []
        for j, (text, ids) in enumerate(zip(chunk, counts)):
            n = len(ids)
            m = fixed_m if rng is None else sample_m(n, max_len, rng, special_tokens)
            ms[start + j] = m
            elongated.append(elongate(text, min(m, budget // max(1, n) + 1)))
        enc = tokenizer(elongated, add_special_tokens=False, truncation=True, max_length=budget + 1,
                        return_offsets_mapping=True, return_attention_mask=False,
                        return_token_type_ids=False)["offset_mapping"]  # fmt: skip
        for j, (text, offsets) in enumerate(zip(elongated, enc)):
            if len(offsets) > budget:
                cut[start + j] = True
                text = text[: offsets[budget - 1][1]] if budget > 0 else ""
            out.append(text)
    return Attacked(out, ms, cut)


def attack_texts(
    texts: Sequence[str], variant: str, tokenizer: Tokenizer, max_len: int, seed: int = 0
) -> list[str]:
    """Apply one elongation variant ('2', '4', '8', 'rand') to every text, within max_len."""
    if variant != "rand" and (not str(variant).isdigit() or int(variant) < 1):
        raise ValueError(f"elongation variant {variant!r}: use an integer >= 1 or 'rand'")
    return attack_batch(texts, variant, tokenizer, max_len, seed=seed).texts


class AttackedTexts(Sequence[str]):
    """`attack_texts(texts, ...)` as a sequence computed chunk by chunk on access: a corpus of millions of documents
    is never held attacked as a whole (the encoder and the attack meter read it chunk by chunk).

    The texts are exactly `attack_texts`'s: 'rand' draws m from one `random.Random(seed)` in text order, so the
    generator's state is kept at every chunk boundary reached (a few KB each) and a chunk is computed from the state
    before it; the chunk last computed is kept, so reading in order costs one attack per text.
    """

    def __init__(self, texts: Sequence[str], variant: str, tokenizer: Tokenizer, max_len: int, seed: int = 0):
        if variant != "rand" and (not str(variant).isdigit() or int(variant) < 1):
            raise ValueError(f"elongation variant {variant!r}: use an integer >= 1 or 'rand'")
        self.texts, self.variant, self.tokenizer, self.max_len = texts, variant, tokenizer, max_len
        self._states: list[Any] = [random.Random(seed).getstate()]  # rng state at the start of chunk k
        self._last: tuple[int, list[str]] | None = None

    def __len__(self) -> int:
        return len(self.texts)

    def _chunk(self, k: int) -> list[str]:
        if self._last is not None and self._last[0] == k:
            return self._last[1]
        while len(self._states) <= k:  # states of the chunks before k first (each needs its m draws)
            self._run(len(self._states) - 1)
        texts = self._run(k)
        self._last = (k, texts)
        return texts

    def _run(self, k: int) -> list[str]:
        rng = random.Random()
        rng.setstate(self._states[k])
        out = self._attack(self.texts[k * ATTACK_CHUNK : (k + 1) * ATTACK_CHUNK], rng)
        if len(self._states) == k + 1:
            self._states.append(rng.getstate())
        return out

    def _attack(self, chunk: Sequence[str], rng: random.Random) -> list[str]:
        """One chunk attacked, drawing 'rand' m's from `rng` in text order (BM25's word-level attack overrides it)."""
        return attack_batch(chunk, self.variant, self.tokenizer, self.max_len, rng=rng).texts

    def __getitem__(self, index):  # noqa: ANN001, ANN204
        if not isinstance(index, slice):
            i = range(len(self))[index]
            return self._chunk(i // ATTACK_CHUNK)[i % ATTACK_CHUNK]
        start, stop, step = index.indices(len(self))
        if step != 1:
            return [self[i] for i in range(start, stop, step)]
        out: list[str] = []
        if stop <= start:
            return out
        for k in range(start // ATTACK_CHUNK, (stop - 1) // ATTACK_CHUNK + 1):
            lo = max(start - k * ATTACK_CHUNK, 0)
            out += self._chunk(k)[lo : stop - k * ATTACK_CHUNK]
        return out

    def __iter__(self) -> Iterator[str]:
        for k in range(0, -(-len(self) // ATTACK_CHUNK)):
            yield from self._chunk(k)


# ------------------------------------------------------------------------------------ what an attack changed
@dataclass(frozen=True)
class AttackEffect:
    """How much of a dataset an attack really touched. An elongation is a no-op for a text that already fills
    max_len (the paper truncates at max_len), so 'attacked' can mostly mean 'clean'; these fractions say so."""

    changed_frac: float  # texts whose model input (token ids cut at max_len) differs from the clean text's
    truncated_frac: float  # clean texts longer than max_len (cut by the model, so copies of them add nothing)
    n_texts: int

    def info(self) -> dict[str, float]:
        """Score.info keys of an attacked variant's scores."""
        return {"changed_frac": self.changed_frac, "truncated_frac": self.truncated_frac}


def model_input_ids(
    texts: Sequence[str], tokenizer: Tokenizer | None, max_len: int
) -> tuple[list[tuple[int, ...]] | list[str], list[bool]]:
    """(what the model reads of each text, whether the text was cut at max_len).

    With a tokenizer: the token ids an encoder sees (`model_inputs`: special tokens, cut at max_len). Without one
    (BM25 reads whole texts): the texts themselves, never cut.
    """
    if tokenizer is None:
        return list(texts), [False] * len(texts)
    inputs = model_inputs(texts, tokenizer, max_len)
    return [tuple(i) for i in inputs.ids], [bool(t) for t in inputs.truncated]


def input_keys(inputs: Sequence) -> np.ndarray:
    """A 64-bit hash of each model input (token-id tuples, or texts for BM25): 8 bytes a text, compared as arrays."""
    return np.fromiter((hash(i) for i in inputs), dtype=np.int64, count=len(inputs))


def attack_effect(clean_inputs: Sequence, attacked_inputs: Sequence, clean_truncated: Sequence[bool]) -> AttackEffect:
    """Fractions from the model inputs of the clean and attacked texts (same order), e.g. `model_input_ids`'s, or
    from their `input_keys` (what `AttackMeter` keeps)."""
    n = len(clean_inputs)
    if n != len(attacked_inputs) or n != len(clean_truncated):
        raise ValueError(f"attack_effect: {n} clean inputs, {len(attacked_inputs)} attacked, {len(clean_truncated)} flags")
    if n == 0:
        return AttackEffect(0.0, 0.0, 0)
    keys = [x if isinstance(x, np.ndarray) and x.dtype == np.int64 else input_keys(x) for x in (clean_inputs, attacked_inputs)]
    changed = int(np.count_nonzero(keys[0] != keys[1]))
    return AttackEffect(changed / n, int(np.count_nonzero(clean_truncated)) / n, n)


class AttackMeter:
    """Measures every attacked variant of one dataset against its clean texts. The clean texts are tokenised once,
    chunk by chunk, and only a hash of each one's model input is kept (8 bytes a text), so a large corpus is never
    held as token ids."""

    def __init__(self, clean_texts: Sequence[str], tokenizer: Tokenizer | None, max_len: int):
        self.tokenizer, self.max_len = tokenizer, max_len
        self.clean_keys, self.clean_truncated = self._keys(clean_texts)

    def _keys(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(input_keys, whether cut at max_len) of the texts, tokenised chunk by chunk."""
        keys: list[np.ndarray] = [np.zeros(0, dtype=np.int64)]
        truncated: list[bool] = []
        for chunk in _chunks(texts):
            inputs, cut = model_input_ids(chunk, self.tokenizer, self.max_len)
            keys.append(input_keys(inputs))
            truncated += cut
        return np.concatenate(keys), np.asarray(truncated, dtype=bool)

    @property
    def truncated_frac(self) -> float:
        return float(self.clean_truncated.mean()) if len(self.clean_truncated) else 0.0

    def clean_info(self) -> dict[str, float]:
        return {"truncated_frac": self.truncated_frac}

    def measure(self, attacked_texts: Sequence[str]) -> AttackEffect:
        return attack_effect(self.clean_keys, self._keys(attacked_texts)[0], self.clean_truncated)


def _chunks(texts: Sequence[str]):  # noqa: ANN202 - a generator of lists
    for start in range(0, len(texts), ATTACK_CHUNK):
        yield list(texts[start : start + ATTACK_CHUNK])
