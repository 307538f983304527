"""Elongation attacks (LA(SER)^3 §2, SPEC §2-3) and the word shuffle of the positional diagnostic.

`elongate(S, m)` is the paper's copy-and-concatenate operator f(S, m). Models see at most `max_len` tokens, so
the token-aware forms either choose m so that the copies fit (`sample_m`, `max_m`) or cut the elongated text at
the last whole token that fits (`elongate_within`): no attacked input ever exceeds max_len.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Protocol

from bench.errors import ConfigError


class Tokenizer(Protocol):
    def __call__(self, text, **kwargs): ...  # noqa: ANN001, ANN003, ANN204


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


def attack_texts(
    texts: Sequence[str], variant: str, tokenizer: Tokenizer, max_len: int, seed: int = 0
) -> list[str]:
    """Apply one elongation variant ('2', '4', '8', 'rand') to every text, within max_len."""
    if variant == "rand":
        rng = random.Random(seed)
        return [elongate_random(t, tokenizer, max_len, rng)[0] for t in texts]
    m = int(variant)
    return [elongate_within(t, m, tokenizer, max_len) for t in texts]
