"""Applying an attack to a dataset's texts: all at once (`apply_attack`) or chunk by chunk as they are read
(`AttackedTexts`, for corpora too large to hold attacked as a whole). Both give the same texts."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

from bench.evaluate.attacks import base, output_check
from bench.evaluate.attacks.base import Attack, AttackInput, Distractors, Text, Tokenizer


class AttackedTexts(Sequence[str]):
    """An attack's output as a sequence computed chunk by chunk on access: a corpus of millions of documents is
    never held attacked as a whole (the encoder and the attack meter read it chunk by chunk).

    The texts equal `apply_attack`'s: an attack draws its random choices from one `random.Random(seed)` in text order,
    so the generator's state is kept at every chunk boundary reached (a few KB each) and a chunk is computed from the
    state before it; the chunk last computed is kept, so reading in order costs one attack per text.

    `variant` is an elongation parameter ('2', 'rand': the historical form) unless `attack` is given. `where`: where
    the texts sit in their dataset (AttackInput: the first text's item index, or each text's owning item, and the
    distractor pool when the attack pads; default: text i is item i, no pool). `words=True` applies the attack's
    word-level form (BM25: no tokenizer, nothing cut).
    """

    def __init__(self, texts: Sequence[Text], variant: str | None, tokenizer: Tokenizer | None, max_len: int,
                 seed: int = 0, *, attack: Attack | None = None, where: AttackInput | None = None,
                 words: bool = False):  # fmt: skip
        if attack is None:
            from bench.evaluate.attacks.elong import make

            attack = make(str(variant))
        self.texts, self.tokenizer, self.max_len = texts, tokenizer, max_len
        self.attack, self.where, self.words = attack, where or AttackInput(), words
        self.variant = attack.param
        self.chunk = base.ATTACK_CHUNK
        self._states: list[Any] = [random.Random(seed).getstate()]  # rng state at the start of chunk k
        self._last: tuple[int, list] | None = None
        # One seed, one output: checked on a small sample before any text is scored (bench...output_check).
        head = self._where(0, output_check.SAMPLE)
        output_check.check_deterministic(attack, lambda sample, rng: self._attack(sample, rng, head), texts, seed)

    def __len__(self) -> int:
        return len(self.texts)

    def _chunk(self, k: int) -> list:
        if self._last is not None and self._last[0] == k:
            return self._last[1]
        while len(self._states) <= k:  # states of the chunks before k first (each needs its draws)
            self._run(len(self._states) - 1)
        texts = self._run(k)
        self._last = (k, texts)
        return texts

    def _where(self, lo: int, hi: int) -> AttackInput:
        """Where texts lo:hi sit in the dataset."""
        owners = self.where.owners
        return replace(self.where, offset=self.where.offset + lo, owners=None if owners is None else owners[lo:hi])

    def _run(self, k: int) -> list:
        rng = random.Random()
        rng.setstate(self._states[k])
        lo, hi = k * self.chunk, (k + 1) * self.chunk
        out = self._attack(self.texts[lo:hi], rng, self._where(lo, hi))
        if len(self._states) == k + 1:
            self._states.append(rng.getstate())
        return out

    def _attack(self, chunk: Sequence[Text], rng: random.Random, where: AttackInput) -> list:
        if self.words:
            out = self.attack.apply_words(chunk, self.max_len, rng, where)
        else:
            out = self.attack.apply(chunk, self.tokenizer, self.max_len, rng, where)
        return output_check.check_output(self.attack, chunk, out)  # one text per input, of its kind

    def __getitem__(self, index):  # noqa: ANN001, ANN204
        if not isinstance(index, slice):
            i = range(len(self))[index]
            return self._chunk(i // self.chunk)[i % self.chunk]
        start, stop, step = index.indices(len(self))
        if step != 1:
            return [self[i] for i in range(start, stop, step)]
        out: list = []
        if stop <= start:
            return out
        for k in range(start // self.chunk, (stop - 1) // self.chunk + 1):
            lo = max(start - k * self.chunk, 0)
            out += self._chunk(k)[lo : stop - k * self.chunk]
        return out

    def __iter__(self) -> Iterator:
        for k in range(0, -(-len(self) // self.chunk)):
            yield from self._chunk(k)


def apply_attack(attack: Attack, texts: Sequence[Text], tokenizer: Tokenizer | None, max_len: int, seed: int = 0,
                 pool: Distractors | None = None, owners: Sequence[int] | None = None,
                 words: bool = False) -> list:  # fmt: skip
    """Every text attacked (token-aware within max_len, or `words=True`: word-level), random choices drawn from
    `random.Random(seed)` in text order."""
    where = AttackInput(owners=owners, pool=pool)
    return list(AttackedTexts(texts, None, tokenizer, max_len, seed, attack=attack, where=where, words=words))
