"""`OpaqueEncoder`: any object with `encode(list[str], **kwargs)` returning an (n, d) array or tensor (mteb v2's
EncoderProtocol style), scored by the same suites and attacks as lenbench's own `Encoder`.

    enc = OpaqueEncoder(obj, name="hash-encoder", fingerprint="...", identity=DECLARED, max_len=256)
    enc.encode(texts, desc=..., normalize=True, dtype=None) -> np.ndarray   # (len(texts), dim) float32

What lenbench cannot see into, it does not pretend to: the object's tokens are unknown, so the length attacks are
word-level (as for BM25: whitespace words stand in for tokens, `max_len` only sizes elongation's 'rand' draws, and
the object truncates as it likes); no vector is cached (a declared name is no proof that the vectors are the same),
no batch is planned beyond handing `BATCH_TEXTS` distinct texts at a time, nothing is exported to ONNX. The suites
that need token embeddings (diag) refuse it in one line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from bench.runtime.errors import ModelLoadError

BATCH_TEXTS = 256  # distinct texts handed to the object's encode() at a time
DECLARED = "declared, not derived"  # Run.config["identity"] of a row keyed by the caller's name
DERIVED = "derived"  # keyed by a hash of the weights and class (never written to the config: rows hash as before)


class OpaqueEncoder:
    """An object's `encode` behind the interface the suites call (see the module docstring)."""

    tokenizer = None  # attacks are word-level: the object's tokens are not lenbench's to see
    word_level = True
    use_cache = False
    pooling = None  # the object pools as it likes; the config records none

    def __init__(self, obj: Any, *, name: str, fingerprint: str, identity: str, max_len: int,
                 device: str = "cpu", emb_dtype: str = "fp32"):  # fmt: skip
        self.inner_object = obj
        self.name = name
        self.fingerprint = fingerprint
        self.identity = identity
        self.max_len = max_len
        self.device_name = device
        self.emb_dtype = emb_dtype
        self._dim: int | None = None
        self.texts_encoded = 0  # distinct texts handed to the object
        self.texts_asked = 0
        self.forward_calls = 0  # calls of the object's encode()

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = int(self._call(["a"]).shape[1])
        return self._dim

    def describe(self) -> dict[str, Any]:
        return {"model": self.name, "fingerprint": self.fingerprint, "device": self.device_name,
                "backend": f"{type(self.inner_object).__qualname__}.encode", "identity": self.identity}  # fmt: skip

    def encode(self, texts: Sequence[str], desc: str = "", normalize: bool = True, dtype: Any = None) -> np.ndarray:
        """(len(texts), dim) float32 vectors, L2-normalised unless `normalize=False`; each distinct text is encoded
        once (attacked variants repeat texts), in calls of `BATCH_TEXTS`."""
        texts = [str(t) for t in texts]
        self.texts_asked += len(texts)
        distinct = list(dict.fromkeys(texts))
        parts = [self._call(distinct[i : i + BATCH_TEXTS]) for i in range(0, len(distinct), BATCH_TEXTS)]
        width = parts[0].shape[1] if parts else (self.dim if texts else 0)
        vectors = np.concatenate(parts) if parts else np.zeros((0, width), np.float32)
        self.texts_encoded += len(distinct)
        if normalize:
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            vectors = vectors / np.where(norms > 0, norms, 1.0)
        where = {text: i for i, text in enumerate(distinct)}
        out = vectors[[where[t] for t in texts]] if texts else vectors
        if dtype is None and self.emb_dtype != "fp32":
            dtype = np.dtype(f"float{self.emb_dtype[2:]}")
        return out.astype(dtype or np.float32, copy=False)

    def _call(self, texts: list[str]) -> np.ndarray:
        """The object's vectors of `texts` as a float32 (n, d) matrix; anything else is one line naming the object."""
        self.forward_calls += 1
        got = self.inner_object.encode(texts)
        if hasattr(got, "detach"):  # a torch tensor, on any device
            got = got.detach().float().cpu().numpy()
        try:
            vectors = np.asarray(got, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise self._bad(texts, f"{type(got).__name__} that is not numeric ({exc})") from None
        if vectors.ndim != 2 or vectors.shape[0] != len(texts) or vectors.shape[1] == 0:
            raise self._bad(texts, f"an array of shape {vectors.shape}")
        if self._dim is not None and vectors.shape[1] != self._dim:
            raise self._bad(texts, f"{vectors.shape[1]}-wide vectors after {self._dim}-wide ones")
        if not np.isfinite(vectors).all():
            raise self._bad(texts, "vectors that are not finite (nan or inf)")
        self._dim = int(vectors.shape[1])
        return vectors

    def _bad(self, texts: list[str], what: str) -> ModelLoadError:
        return ModelLoadError(f"model {self.name!r}: {type(self.inner_object).__qualname__}.encode({len(texts)} texts) "
                              f"returned {what}; it must return an ({len(texts)}, dim) array or tensor of numbers, one "
                              "row per text")  # fmt: skip
