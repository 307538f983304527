"""Transformers text encoder: load from a hub id or a local folder, pool, encode corpora in bounded memory.

    enc = Encoder.load(name, options, cache_dir=None, token_cache=None)  # options: EncoderOptions (bench.encode.
        options: pooling, max_len, batch size and tokens, device, backend, precision, embedding dtype, cache use,
        allow_pickle), or its fields by name on top: Encoder.load(name, max_len=32, use_cache=False)
    enc.encode(texts, desc=..., normalize=True, dtype=None) -> np.ndarray   # (len(texts), dim); a disk-backed memmap
        when the matrix is larger than `enc.memmap_bytes`
    enc.encode_into_cache(texts, normalize=True) -> int   # encode what the cache lacks (a rank's shard); no matrix
    enc.tokenize(texts) -> bench.encode.inputs.ModelInputs  # the truncated token ids the model sees
    enc.token_embeddings(texts)                             # per-token vectors (length diagnostics)

Streaming (`bench.encode.pipeline`): `encode` walks the texts in chunks (the first 256 texts, then 2,048; on an
accelerator each next four times the last, up to 16,384). Per chunk it
looks each text up in the embedding cache (text -> token-id key -> vector, `bench.encode.cache`), takes the token ids
of the rest from the token-id cache or the tokenizer (`bench.encode.token_ids`), encodes the distinct missing model
inputs in length-sorted batches, writes each vector into one preallocated (n, dim) matrix and commits the chunk to
the cache (also what an exception interrupts). The next chunk is tokenised on a second thread meanwhile. The cache
key is what the model sees (the truncated token ids, in a namespace of fingerprint, pooling, max_len, normalisation
and precision): an elongated document cut at max_len that equals its clean cut is a hit.

Batches (`bench.encode.batching`): on the CPU the padding-minimal plan within a cache-sized token budget; on an
accelerator token-budget batches (tens of thousands of slots, up to 1,024 rows) padded to a bounded set of
(rows, width) shapes, so shape-specialising kernels meet few shapes (`enc.shapes` counts them).

Laziness: for a local folder nothing heavy is loaded until needed (fingerprint from the weight files, dimension
from config.json); a warm run over cached texts imports neither torch nor transformers.

Backends (`bench.encode.backends`, chosen once when the encoder is built): torch, onnx (CPU, fp32) and flash
(flash-attn's varlen attention on unpadded tokens, CUDA); they run batches, everything else is done here the same
for all. Precision and attention kernels are the device policy's (`bench.runtime.device`); a model the encoder
loads itself has its weights cast to the precision. Which model a name means and how it loads: `bench.encode.loading`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bench import environment
from bench.encode import loading
from bench.encode.backends import make_backend
from bench.encode.batching import BATCH_COST_TOKENS, device_batching, pad_batch, plan_batches, width_scale
from bench.encode.cache import CacheUnavailable, EmbeddingCache, default_cache_dir
from bench.encode.chunks import ACCELERATOR_CHUNK_TEXTS, CHUNK_TEXTS, FIRST_CHUNK_TEXTS, MEMMAP_BYTES, allocate_matrix
from bench.encode.inputs import ModelInputs
from bench.encode.token_ids import TokenIdCache
from bench.encode.options import EMB_DTYPES, ENCODER_DEFAULTS, EncoderOptions
from bench.encode.pipeline import encode_chunks
from bench.encode.st_config import folder_pooling
from bench.runtime import stages
from bench.runtime.device import is_accelerator
from bench.runtime.errors import ConfigError
from bench.runtime.pools import usable_cores

if TYPE_CHECKING:  # torch is imported only when a model must run
    import torch

log = logging.getLogger(__name__)

NUMPY_DTYPES = {name: np.dtype(f"float{name[2:]}") for name in EMB_DTYPES}  # "fp16" -> float16


class Encoder:
    """Pooled, normalised sentence embeddings from a transformers model (see the module docstring).

    Built from a model in memory (`Encoder(model, tokenizer, name=...)`) or lazily from a folder (`Encoder.load`).
    Counters: `forward_calls` (batches run), `texts_encoded` (model inputs encoded), `texts_asked` (texts asked for),
    `token_slots` / `tokens_run` (padded token slots run through the model / real tokens among them), `fp32_reruns`.
    """

    def __init__(
        self,
        model: "torch.nn.Module | None",
        tokenizer: Any,
        options: EncoderOptions | None = None,
        *,
        name: str,
        opened: loading.OpenedModel | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        show_progress: bool = True,
        token_cache: bool | None = None,
        fingerprint: str | None = None,
        **changes: Any,
    ):
        """`options` (bench.encode.options.EncoderOptions, default its defaults), with `changes` to any of its fields
        by name (`max_len=32`): how the model runs; `auto` device, precision and backend are resolved here, once.

        `model` (and `tokenizer`): handed in, they run as they are (a model being trained keeps its weights' dtype);
        None: loaded on first use from `opened` (bench.encode.loading.open_model: the source folder or hub id, and
        the fingerprint and dimension when its files told them), and then the encoder's own, cast to the precision.
        `fingerprint`: the identity of a model handed in (bench.encode.objects: its weights and class), instead of
        its weights' hash taken on first use."""
        options = replace(options or ENCODER_DEFAULTS, **changes)  # an unknown name: TypeError; a bad value: ConfigError
        if options.pooling is None:  # no folder declared one (Encoder.load reads it): mean pooling
            options = replace(options, pooling="mean")
        source, fingerprint, dim = (opened.source, opened.fingerprint, opened.dim) if opened else (None, fingerprint, None)
        if model is None and source is None:
            raise ConfigError("Encoder needs a model or a source folder to load it from")
        self.options = options.resolved()  # device, precision and backend as they run (recorded by describe())
        self.name = name
        self.shape_bounded = is_accelerator(self.device_name)  # bucketed batch shapes (bench.encode.batching)
        # weights loaded here (or opened for it) are the encoder's to cast to the precision; a model handed in runs
        # under autocast
        self.owns_weights = opened is not None or model is None
        self.engine = make_backend(self.options.backend, self)  # chosen once
        # None: the device's defaults (rows, and token slots per batch: bench.encode.batching.device_batching)
        width = dim if dim is not None else getattr(getattr(model, "config", None), "hidden_size", None)
        self.batch_size, self.batch_tokens = device_batching(
            self.device_name, self.options.batch_size, self.options.batch_tokens, self.engine.cpu_batch_tokens, width)
        self.batch_cost = BATCH_COST_TOKENS * width_scale(width)  # a forward call's fixed cost, in token slots
        self.shapes: set[tuple[int, int]] = set()  # distinct (rows, width) batch shapes run through the model
        self.use_cache = self.options.use_cache
        self.use_token_cache = self.use_cache if token_cache is None else token_cache
        self.token_ids: TokenIdCache | None = None  # text -> token ids, on disk (made on first tokenisation)
        self.source = source
        self._model = model
        self._tokenizer = tokenizer
        self._dim = dim
        self.show_progress = show_progress
        self.chunk_size = ACCELERATOR_CHUNK_TEXTS if self.shape_bounded else CHUNK_TEXTS
        self.first_chunk_size = FIRST_CHUNK_TEXTS
        self.prefetch = True  # tokenise the next chunk on a second thread while this one is encoded
        # commit each chunk (host copy, normalising, matrix and cache writes) on a thread of its own while the next one
        # runs (bench.encode.commits), or on the calling thread as soon as it has run: $LENBENCH_COMMIT_THREAD, else
        # the thread on an accelerator and from three cores (on two, the tokenizer and the forward fill both)
        chosen = environment.optional_flag("LENBENCH_COMMIT_THREAD")
        self.background_commits = chosen if chosen is not None else self.shape_bounded or usable_cores() > 2
        self.memmap_bytes = int(environment.number("LENBENCH_MEMMAP_BYTES", MEMMAP_BYTES))
        self.forward_calls = 0
        self.texts_encoded = 0
        self.texts_asked = 0
        self.token_slots = 0  # padded token slots run through the model (batch size x width, summed)
        self.tokens_run = 0  # real tokens among them
        self.fp32_reruns = 0  # texts run again at fp32: their reduced-precision vector was not finite (bench.encode.finite)
        self._fingerprint = fingerprint
        self._caches: dict[bool, EmbeddingCache] = {}  # normalize -> cache (raw vectors, for kNN's Euclidean, apart)
        self._cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        if model is not None:
            self._model = self.engine.place(model)

    # ------------------------------------------------------------ construction
    @classmethod
    def load(cls, name: str, options: EncoderOptions | None = None, *, cache_dir: str | os.PathLike[str] | None = None,
             show_progress: bool = True, token_cache: bool | None = None, **changes: Any) -> "Encoder":  # fmt: skip
        """The encoder of a folder, 'minilm' or a hub id under `options` (with `changes` by field name, as
        `Encoder(...)`). A local folder loads nothing yet (see the module docstring); a hub id is loaded now. Pooling
        None: the folder's sentence-transformers config says, else mean."""
        options = replace(options or ENCODER_DEFAULTS, **changes)
        opened = loading.open_model(name, options.max_len, allow_pickle=options.allow_pickle)
        if options.pooling is None and opened.is_folder:
            options = replace(options, pooling=folder_pooling(opened.source))
        return cls(opened.model, opened.tokenizer, options, name=name, opened=opened, cache_dir=cache_dir,
                   show_progress=show_progress, token_cache=token_cache)  # fmt: skip - opened for this encoder: its weights are cast to the precision

    # The options as they run, read from the one value (`options`), never copied.
    @property
    def pooling(self) -> str:
        return str(self.options.pooling)

    @property
    def max_len(self) -> int:
        return self.options.max_len

    @property
    def device_name(self) -> str:
        return str(self.options.device)

    @property
    def precision(self) -> str:
        """fp32, bf16 or fp16 (bench.runtime.device)."""
        return self.options.precision

    @property
    def emb_dtype(self) -> str:
        return self.options.emb_dtype

    @property
    def model(self) -> "torch.nn.Module":
        """The torch model, loaded on first use."""
        if self._model is None:
            self._model = self.engine.place(loading.load_weights(self.name, str(self.source), self.options.allow_pickle))
        return self._model

    @property
    def tokenizer(self) -> Any:
        if self._tokenizer is None:
            self._tokenizer = loading.load_tokenizer(self.name, str(self.source))
        return self._tokenizer

    @property
    def model_loaded(self) -> bool:
        return self._model is not None or self.engine.loaded

    @property
    def backend(self) -> str:
        """The backend's name ("torch", "onnx"), as the run's description records it."""
        return self.engine.name

    @property
    def device(self) -> Any:
        """torch.device of the model (imports torch): use `device_name` where a string does."""
        import torch

        return torch.device(self.device_name)

    @property
    def cache_dir(self) -> Path:
        """Folder of the embedding cache and of ONNX exports."""
        return self._cache_dir

    @property
    def fingerprint(self) -> str:
        if self._fingerprint is None:
            self._fingerprint = loading.weights_fingerprint(self.model)
        return self._fingerprint

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = int(self.model.config.hidden_size)
        return self._dim

    @property
    def cache(self) -> EmbeddingCache | None:
        """The cache of normalised embeddings (None when caching is off)."""
        return self._cache_for(normalize=True)

    def _cache_for(self, normalize: bool) -> EmbeddingCache | None:
        if not self.use_cache:
            return None
        if normalize not in self._caches:
            namespace = f"{self.fingerprint}|{self.pooling}|{self.max_len}" + ("" if normalize else "|raw")
            # bf16 vectors differ in the last digits, so each precision has its own entries. fp32 is named too:
            # before --precision, CUDA always ran under bf16 autocast and wrote to the unnamed namespace, so no entry
            # written then is read as fp32 (CPU caches are rebuilt once).
            namespace += f"|{self.precision}"
            try:
                self._caches[normalize] = EmbeddingCache(self._cache_dir, namespace)
            except CacheUnavailable as exc:  # the cache only saves work: run without it rather than fail
                log.warning("%s; this run goes on without the embedding cache (--no-cache does so silently)",
                            " ".join(str(exc).split()))  # fmt: skip
                self.use_cache = False
                return None
        return self._caches[normalize]

    def describe(self) -> dict[str, Any]:
        return {
            "model": self.name,
            "pooling": self.pooling,
            "max_len": self.max_len,
            "fingerprint": self.fingerprint,
            "device": self.device_name,
            "backend": self.backend,
            "emb_dtype": self.emb_dtype,
            "precision": self.precision,
        }

    def attention_info(self) -> dict[str, str]:
        """The attention kernels the backend runs and on what (padded batches or unpadded tokens), for score info."""
        return {"attention_kernels": str(getattr(self.engine, "attention_kernels", self.backend)),
                "attention_path": str(getattr(self.engine, "attention_path", "padded"))}  # fmt: skip

    # ---------------------------------------------------------------- encoding
    def tokenize(self, texts: Sequence[str]) -> ModelInputs:
        """The token ids the model sees for each text (special tokens, cut at max_len) and which were cut; from disk
        where this tokenizer already tokenised a text at this max_len (bench.encode.token_ids; unless no cache)."""
        if self.token_ids is None:
            self.token_ids = TokenIdCache(self.tokenizer, self.max_len, self._cache_dir, use_disk=self.use_token_cache)
        return self.token_ids.model_inputs(texts)

    def encode(
        self,
        texts: Sequence[str],
        batch_size: int | None = None,
        desc: str = "encode",
        use_cache: bool | None = None,
        normalize: bool = True,
        dtype: str | None = None,
    ) -> np.ndarray:
        """(len(texts), dim) pooled embeddings, L2-normalised unless `normalize=False`; float32, or the encoder's
        emb_dtype ("fp16") when `dtype` is None. A disk-backed memmap above `memmap_bytes`."""
        n = len(texts)
        np_dtype = NUMPY_DTYPES[dtype or self.emb_dtype]
        out = self._allocate(n, np_dtype)
        self._encode_all(texts, out, batch_size, desc, use_cache, normalize)
        return out

    def encode_into_cache(self, texts: Sequence[str], batch_size: int | None = None, desc: str = "encode",
                          normalize: bool = True) -> int:  # fmt: skip
        """Encode the texts the cache lacks into the cache, keeping no matrix; returns how many were encoded."""
        if not self.use_cache:
            raise ConfigError("encode_into_cache needs the embedding cache (use_cache=True)")
        before = self.texts_encoded
        self._encode_all(texts, None, batch_size, desc, True, normalize)
        return self.texts_encoded - before

    def _allocate(self, n: int, np_dtype: Any) -> np.ndarray:
        """The output matrix: in RAM, or a disk-backed memmap in the cache folder above `memmap_bytes`."""
        return allocate_matrix(n, self.dim, np_dtype, self.memmap_bytes, self._cache_dir)

    def _encode_all(self, texts: Sequence[str], out: np.ndarray | None, batch_size: int | None, desc: str,
                    use_cache: bool | None, normalize: bool) -> None:  # fmt: skip
        """Run the chunk pipeline (bench.encode.pipeline) over the texts, with this call's cache and batch size."""
        cache = self._cache_for(normalize) if (use_cache if use_cache is not None else self.use_cache) else None
        encode_chunks(self, texts, out, batch_size or self.batch_size, desc, cache, normalize)

    def pad_id(self) -> int:
        pad = getattr(self.tokenizer, "pad_token_id", None)
        return int(pad) if pad is not None else 0

    def _forward(self, batch: dict[str, np.ndarray]) -> Any:
        """One batch through the backend: (batch, dim) float32 pooled, not normalised; numpy on the CPU, a tensor
        left on the device on an accelerator."""
        self.forward_calls += 1
        with stages.timed("forward"):
            return self.engine.pooled(batch)

    def _batches(self, texts: Sequence[str], batch_size: int):  # noqa: ANN202
        """Length-sorted batches with dynamic padding: yields (original indices, lengths, numpy batch)."""
        ids = self.tokenize(texts).ids
        lengths = ids.lengths
        pad_id = self.pad_id()
        for members in plan_batches(lengths, batch_size, self.batch_tokens):
            input_ids, mask = pad_batch(ids.take(members), pad_id)
            yield members, lengths[members], {"input_ids": input_ids, "attention_mask": mask}

    def token_embeddings(self, texts: Sequence[str], batch_size: int | None = None) -> list[np.ndarray]:
        """Last-layer token embeddings of each text (padding removed, special tokens kept), float32; on the encoder's
        backend (ONNX Runtime: the token-level export of bench.encode.backends.onnx_export; never cached)."""
        if not len(texts):
            return []
        out: list[np.ndarray | None] = [None] * len(texts)
        for members, lengths, batch in self._batches(texts, batch_size or self.batch_size):
            self.forward_calls += 1
            hidden = self.engine.tokens(batch)
            for r, i in enumerate(members):  # a list of ragged arrays: one slice per text
                out[int(i)] = hidden[r, : lengths[r]].copy()
        return out  # type: ignore[return-value]
