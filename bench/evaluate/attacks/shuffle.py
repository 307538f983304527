"""`@shuffle`: the item's sentences in a seeded random order (variant `shuffle`), cut at max_len.

Length stays as it was; what moves is where each sentence sits, so a model that reads only a prefix sees other
sentences. A permutation that happens to leave the order as it was is rotated by one, so every text of two or more
sentences changes; a one-sentence text is unchanged (and the attack meter counts it so). Word-level form (BM25):
the same permutation of the text field, nothing cut (a bag of words barely moves: the control).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from bench.evaluate.attacks.base import (
    SPECIAL_TOKENS_BERT, Attack, AttackFamily, AttackInput, body_of, cut_at_budget, split_sentences, with_body,
)  # fmt: skip
from bench.runtime.errors import ConfigError


def shuffle_sentences(text: str, rng: random.Random) -> str:
    sentences = split_sentences(text)
    if len(sentences) < 2:
        return text
    order = list(range(len(sentences)))
    rng.shuffle(order)
    if order == sorted(order):
        order = order[1:] + order[:1]
    return " ".join(sentences[i] for i in order)


@dataclass(frozen=True)
class ShuffleAttack(Attack):
    def apply(self, texts, tokenizer, max_len, rng, where: AttackInput) -> list[str]:  # noqa: ANN001
        shuffled = [shuffle_sentences(t, rng) for t in texts]
        return cut_at_budget(shuffled, tokenizer, max_len - SPECIAL_TOKENS_BERT)[0]

    def apply_words(self, texts, max_len, rng, where: AttackInput) -> list:  # noqa: ANN001
        return [with_body(t, shuffle_sentences(body_of(t), rng)) for t in texts]


def make(param: str) -> ShuffleAttack:
    if param not in ("", "sentences"):
        raise ConfigError(f"shuffle variant {param!r}: the shuffle family has one variant, 'shuffle'")
    return ShuffleAttack(name="shuffle", family="shuffle", param="", x=None, order=0)


FAMILY = AttackFamily(
    name="shuffle",
    summary="the item's sentences in a seeded random order, cut at max_len",
    axis="sentence order",
    defaults=("",),
    cite=("lenbench",),
    make=make,
    order=20,
    ordered=False,  # one variant: nothing to join
)
