"""Texts -> what an encoder reads: token ids with special tokens, cut at max_len, and whether a cut was made.

One batch call of the fast tokenizer's Rust backend (`tokenizers.Tokenizer.encode_batch_fast`) per batch of texts,
on a private copy of the backend with truncation at max_len: it tokenises the texts on the tokenizer's own thread
pool (set `TOKENIZERS_PARALLELISM=false` to keep it on one thread) and releases the GIL while it does, so another
thread can run the model meanwhile (`bench.encode.encoder`). It gives the same ids as calling the transformers
tokenizer with `truncation=True, max_length=max_len`, without that wrapper's per-text Python work. The encoder keys
its cache on these ids, and the attack measurements (`bench.evaluate.attacks`) compare clean and attacked inputs
through them. Slow (Python) tokenizers go through the transformers call.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np


class Tokenizer(Protocol):
    def __call__(self, text, **kwargs): ...  # noqa: ANN001, ANN003, ANN204


@dataclass
class ModelInputs:
    """What a model sees for each text: token ids with special tokens, cut at max_len, and whether a cut was made."""

    ids: list[list[int]]
    truncated: np.ndarray  # bool, one per text


_BACKENDS: "weakref.WeakKeyDictionary[Any, dict[int, Any]]" = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def truncating_backend(tokenizer: Any, max_len: int) -> Any | None:
    """A private copy of a fast tokenizer's Rust backend that truncates at `max_len` (the wrapper's own backend is
    reconfigured on every call, so it is not shared across threads); None for a slow tokenizer."""
    backend = getattr(tokenizer, "backend_tokenizer", None) if getattr(tokenizer, "is_fast", False) else None
    if backend is None or not hasattr(backend, "encode_batch"):
        return None
    with _LOCK:
        try:
            per_len = _BACKENDS.setdefault(tokenizer, {})
        except TypeError:  # not weak-referenceable: a fresh copy each call
            per_len = {}
        if max_len not in per_len:
            from tokenizers import Tokenizer as RustTokenizer

            copy = RustTokenizer.from_str(backend.to_str())
            copy.no_padding()
            copy.enable_truncation(max_len, stride=0, strategy="longest_first",
                                   direction=getattr(tokenizer, "truncation_side", "right"))  # fmt: skip
            per_len[max_len] = copy
        return per_len[max_len]


def model_inputs(texts: Sequence[str], tokenizer: Tokenizer, max_len: int) -> ModelInputs:
    """Tokenise a batch as an encoder does (special tokens, truncation at max_len), in one fast-tokenizer call.

    `truncated[i]` is True when text i had tokens beyond max_len: for a fast tokenizer, read from the tokens the
    truncation moved to the overflow, so no second, untruncated tokenisation is needed.
    """
    texts = list(texts)
    if not texts:
        return ModelInputs([], np.zeros(0, dtype=bool))
    backend = truncating_backend(tokenizer, max_len)
    if backend is not None:
        encode = getattr(backend, "encode_batch_fast", backend.encode_batch)  # _fast: no character offsets
        encodings = encode(texts, add_special_tokens=True)
        ids = [e.ids for e in encodings]
        truncated = np.fromiter((bool(e.overflowing) for e in encodings), dtype=bool, count=len(texts))
        return ModelInputs(ids, truncated)
    ids = tokenizer(texts, truncation=True, max_length=max_len)["input_ids"]
    longer = tokenizer(texts, truncation=True, max_length=max_len + 1)["input_ids"]
    return ModelInputs([list(i) for i in ids], np.array([len(x) > max_len for x in longer], dtype=bool))
