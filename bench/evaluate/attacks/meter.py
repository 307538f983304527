"""What an attack changed (`AttackMeter`, `attack_effect`): the share of texts whose model input (token ids cut at
max_len, or the whole text for BM25) differs from the clean text's, and of clean texts already cut at max_len,
recorded in Score.info of every attacked variant. An attack that leaves a text's model input as it was (elongation
or end padding of a text that already fills max_len) is a no-op, and counted as one."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bench.encode.inputs import model_inputs
from bench.evaluate.attacks import base
from bench.evaluate.attacks.base import Tokenizer


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
    return [tuple(i) for i in inputs.ids.tolist()], [bool(t) for t in inputs.truncated]


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
    for start in range(0, len(texts), base.ATTACK_CHUNK):
        yield list(texts[start : start + base.ATTACK_CHUNK])
