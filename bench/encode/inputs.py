"""Texts -> what an encoder reads: token ids with special tokens, cut at max_len, and whether a cut was made.

One fast-tokenizer call per batch. The encoder keys its cache on these ids, and the attack measurements
(`bench.evaluate.attacks`) compare clean and attacked inputs through them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np


class Tokenizer(Protocol):
    def __call__(self, text, **kwargs): ...  # noqa: ANN001, ANN003, ANN204


@dataclass
class ModelInputs:
    """What a model sees for each text: token ids with special tokens, cut at max_len, and whether a cut was made."""

    ids: list[list[int]]
    truncated: np.ndarray  # bool, one per text


def model_inputs(texts: Sequence[str], tokenizer: Tokenizer, max_len: int) -> ModelInputs:
    """Tokenise a batch as an encoder does (special tokens, truncation at max_len), in one fast-tokenizer call.

    `truncated[i]` is True when text i had tokens beyond max_len: for a fast tokenizer, read from the offsets (text
    left after the last kept token), so no second, untruncated tokenisation is needed.
    """
    texts = list(texts)
    if not texts:
        return ModelInputs([], np.zeros(0, dtype=bool))
    if getattr(tokenizer, "is_fast", False):
        enc = tokenizer(texts, truncation=True, max_length=max_len, return_offsets_mapping=True,
                        return_attention_mask=False, return_token_type_ids=False)  # fmt: skip
        ids = enc["input_ids"]
        truncated = np.fromiter(
            (len(i) >= max_len and bool(t[max(e for _, e in o):].strip()) for t, i, o in zip(texts, ids, enc["offset_mapping"])),
            dtype=bool, count=len(texts),
        )  # fmt: skip
        return ModelInputs([list(i) for i in ids], truncated)
    ids = tokenizer(texts, truncation=True, max_length=max_len)["input_ids"]
    longer = tokenizer(texts, truncation=True, max_length=max_len + 1)["input_ids"]
    return ModelInputs([list(i) for i in ids], np.array([len(x) > max_len for x in longer], dtype=bool))
