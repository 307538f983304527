"""Texts -> what an encoder reads: token ids with special tokens, cut at max_len, and whether a cut was made.

One batch call of the fast tokenizer's Rust backend (`tokenizers.Tokenizer.encode_batch_fast`) per batch of texts,
on a private copy of the backend with truncation at max_len: it tokenises the texts on the tokenizer's own thread
pool (set `TOKENIZERS_PARALLELISM=false` to keep it on one thread) and releases the GIL while it does, so another
thread can run the model meanwhile (`bench.encode.encoder`). It gives the same ids as calling the transformers
tokenizer with `truncation=True, max_length=max_len`, without that wrapper's per-text Python work. The encoder keys
its cache on these ids, and the attack measurements (`bench.evaluate.attacks`) compare clean and attacked inputs
through them. Slow (Python) tokenizers go through the transformers call.

The ids of many texts are one `TokenRows`: a flat int32 array of every text's ids and the offsets where each text
starts (the layout text-embeddings-inference and varlen attention use). Row i is a numpy view, a batch is one gather
(`take`) and one scatter into the padded array (`bench.encode.batching.pad_batch`), and ids read from disk
(`bench.encode.token_ids`) become rows without a Python integer per token.
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


class TokenRows(Sequence):
    """The token ids of n texts as one flat int32 array and n + 1 offsets: row i is `flat[offsets[i]:offsets[i + 1]]`
    (a read-only numpy view). Iterates, indexes, slices, `len`s and compares (==) as a list of rows would."""

    __slots__ = ("flat", "offsets")
    __hash__ = None  # type: ignore[assignment]  # compared by value, like the list it stands for

    def __init__(self, flat: np.ndarray, offsets: np.ndarray):
        self.flat = np.ascontiguousarray(flat, dtype=np.int32)
        self.offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        self.flat.flags.writeable = False
        if self.offsets.ndim != 1 or len(self.offsets) < 1 or self.offsets[0] != 0 or self.offsets[-1] != len(self.flat):
            raise ValueError(f"TokenRows: offsets must run from 0 to {len(self.flat)}")

    @classmethod
    def from_lists(cls, rows: Sequence[Sequence[int]]) -> "TokenRows":
        import itertools

        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, rows), dtype=np.int64, count=len(rows)), out=offsets[1:])
        flat = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int32, count=int(offsets[-1]))
        return cls(flat, offsets)

    @classmethod
    def concat(cls, parts: Sequence["TokenRows"]) -> "TokenRows":
        """The rows of several parts, in order."""
        if not parts:
            return cls(np.zeros(0, dtype=np.int32), np.zeros(1, dtype=np.int64))
        shifts = np.cumsum([0] + [len(p.flat) for p in parts[:-1]])
        offsets = np.concatenate([[0]] + [p.offsets[1:] + s for p, s in zip(parts, shifts)])
        return cls(np.concatenate([p.flat for p in parts]), offsets)

    @property
    def lengths(self) -> np.ndarray:
        """Tokens of each row (int64)."""
        return np.diff(self.offsets)

    def take(self, indices: Sequence[int] | np.ndarray) -> "TokenRows":
        """The rows at `indices`, in that order (one gather of their tokens)."""
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        starts, lengths = self.offsets[idx], self.lengths[idx]
        offsets = np.zeros(len(idx) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        # token k of the result comes from flat[start of its row + its place in the row]
        where = np.arange(offsets[-1], dtype=np.int64) + np.repeat(starts - offsets[:-1], lengths)
        return TokenRows(self.flat[where], offsets)

    def tolist(self) -> list[list[int]]:
        flat = self.flat.tolist()
        bounds = self.offsets.tolist()
        return [flat[a:b] for a, b in zip(bounds[:-1], bounds[1:])]

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, key):  # noqa: ANN001, ANN204 - an int gives a row, a slice or index array gives TokenRows
        if isinstance(key, slice):
            return self.take(np.arange(len(self))[key])
        if isinstance(key, (list, np.ndarray)):
            return self.take(key)
        i = int(key)
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(f"row {key} of {len(self)}")
        return self.flat[self.offsets[i] : self.offsets[i + 1]]

    def __iter__(self):  # noqa: ANN204
        flat, bounds = self.flat, self.offsets.tolist()
        return (flat[a:b] for a, b in zip(bounds[:-1], bounds[1:]))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TokenRows):
            try:
                other = TokenRows.from_lists(other)  # type: ignore[arg-type]
            except (TypeError, ValueError):
                return NotImplemented
        return np.array_equal(self.offsets, other.offsets) and np.array_equal(self.flat, other.flat)

    def __repr__(self) -> str:
        return f"TokenRows({len(self)} rows, {len(self.flat)} tokens)"


@dataclass
class ModelInputs:
    """What a model sees for each text: token ids with special tokens, cut at max_len, and whether a cut was made."""

    ids: TokenRows
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
        return ModelInputs(TokenRows.from_lists([]), np.zeros(0, dtype=bool))
    backend = truncating_backend(tokenizer, max_len)
    if backend is not None:
        encode = getattr(backend, "encode_batch_fast", backend.encode_batch)  # _fast: no character offsets
        encodings = encode(texts, add_special_tokens=True)
        truncated = np.fromiter((bool(e.overflowing) for e in encodings), dtype=bool, count=len(texts))
        return ModelInputs(TokenRows.from_lists([e.ids for e in encodings]), truncated)
    ids = tokenizer(texts, truncation=True, max_length=max_len)["input_ids"]
    longer = tokenizer(texts, truncation=True, max_length=max_len + 1)["input_ids"]
    return ModelInputs(TokenRows.from_lists(ids), np.array([len(x) > max_len for x in longer], dtype=bool))
