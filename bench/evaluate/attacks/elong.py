"""`@elong`: the LA(SER)^3 copy-and-concatenate attack (paper §2, SPEC §2-3), variants `elong-M` and `elong-rand`.

`elongate(S, m)` is the paper's operator f(S, m). Models see at most `max_len` tokens, so the token-aware forms
either choose m so that the copies fit (`sample_m`, `max_m`) or cut the elongated text at the last whole token
that fits (`elongate_within`): no attacked input ever exceeds max_len. Within max_len the attack is a no-op for a
text that already fills it (the paper's definition, kept; the attack meter says how often).

Batch form for whole corpora (fast tokenizer, two calls per chunk of texts): `attack_batch` (attacked texts + each
text's m + whether it was cut at max_len; `attack_texts` keeps only the texts). Word-level form for BM25:
`elongate_words` (f(S, m) uncut; 'rand' draws m from the word count, so lengths range as for encoders).
The word shuffle of the positional diagnostic (`shuffle_words`) lives here too: it is the diag suite's.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bench.evaluate.attacks import base
from bench.evaluate.attacks.base import SPECIAL_TOKENS_BERT, Attack, AttackFamily, AttackInput, Text, Tokenizer
from bench.runtime.errors import ConfigError




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


MAX_COPIES = 1000  # copies of a text in one elongation variant (max_len cuts them anyway)
# The one default of `--elong` (bench run, bench eval, the Python API, suites built without one): m = 2 and random m,
# the README's main job. `2,4,8,rand` is the full @elong set of SPEC §3 (about twice the evaluation time); stored rows
# keep the list they recorded in their config, so changing this only changes new commands that omit `--elong`.
DEFAULT_ELONG = "2,rand"


def parse_elong_variants(spec: str | Sequence[str | int] | None) -> list[str]:
    """'2,4,8,rand' -> ['2', '4', '8', 'rand']; validates each entry (a bad one is a ConfigError, a ValueError)."""
    if spec is None:
        spec = DEFAULT_ELONG
    items = spec.split(",") if isinstance(spec, str) else [str(s) for s in spec]
    out = []
    for item in (i.strip() for i in items):
        if item == "rand":
            out.append(item)
            continue
        # ASCII digits only ('²'.isdigit() is True, int('²') fails); more copies than MAX_COPIES only cost memory
        if not (item.isascii() and item.isdigit()) or not 2 <= int(item) <= MAX_COPIES:
            raise ConfigError(f"elongation variant {item!r}: use integers >= 2 (at most {MAX_COPIES}) or 'rand' "
                              "(e.g. --elong 2,4,8,rand)")  # fmt: skip
        out.append(item)
    return out


@dataclass
class Attacked:
    """One elongation variant applied to a list of texts: the attacked texts, each text's m, and whether the
    elongated text was cut at max_len (the model then sees a prefix of f(S, m))."""

    texts: list[str]
    m: np.ndarray  # int32
    truncated: np.ndarray  # bool


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
    for start in range(0, len(texts), base.ATTACK_CHUNK):
        chunk = list(texts[start : start + base.ATTACK_CHUNK])
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


def elongate_words(texts: Sequence[Text], variant: str, max_len: int, rng: random.Random) -> list:
    """BM25's word-level elongation: f(S, m) untruncated; 'rand' draws m ~ U{1..max(1, (max_len - 2) // n_words)}
    (whitespace words stand in for tokens). A (title, text) document is elongated field by field with the same m
    (as f(title + text, m) would)."""

    def m_for(text: str) -> int:
        return sample_m(len(text.split()), max_len, rng) if variant == "rand" else int(variant)

    out: list = []
    for t in texts:
        if isinstance(t, tuple):
            title, body = t
            m = m_for(f"{title} {body}".strip())
            out.append((elongate(title, m) if title else title, elongate(body, m)))
        else:
            out.append(elongate(t, m_for(t)))
    return out


def check_variant(variant: str) -> None:
    if variant != "rand" and (not str(variant).isdigit() or int(variant) < 1):
        raise ValueError(f"elongation variant {variant!r}: use an integer >= 1 or 'rand'")


@dataclass(frozen=True)
class ElongAttack(Attack):
    def apply(self, texts, tokenizer, max_len, rng, where: AttackInput) -> list[str]:  # noqa: ANN001
        return attack_batch(texts, self.param, tokenizer, max_len, rng=rng).texts

    def apply_words(self, texts, max_len, rng, where: AttackInput) -> list:  # noqa: ANN001
        return elongate_words(texts, self.param, max_len, rng)


def make(param: str) -> ElongAttack:
    """'2' -> elong-2 (m = 2), 'rand' -> elong-rand (m drawn per text); m = 1 is allowed (the clean text, cut)."""
    check_variant(param)
    x = None if param == "rand" else float(int(param))
    return ElongAttack(name=f"elong-{param}", family="elong", param=param, x=x, order=x if x is not None else 1e9)


FAMILY = AttackFamily(
    name="elong",
    summary="each text copied m times and joined with a space, cut at max_len (LA(SER)^3); rand: m ~ U{1..max_m}",
    axis="m (length factor)",
    defaults=tuple(DEFAULT_ELONG.split(",")),
    cite=("xiao2023length",),
    make=make,
    order=0,
    param_help="integers >= 2 or 'rand' (e.g. --elong 2,4,8,rand)",
)
