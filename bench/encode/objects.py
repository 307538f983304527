"""Models from memory: a SentenceTransformer, a transformers model with its tokenizer, or any object with
`encode(list[str], **kwargs)` returning an (n, d) array or tensor, as the encoder the suites score.

    source = ModelObject(st_model)                          # lenbench.evaluate(st_model, ...)
    source = model_object((bert, tok))                      # lenbench.evaluate((bert, tok), ...) or tokenizer=tok
    source = ModelObject(obj, name="hash-encoder-v1")        # lenbench.evaluate(obj, ..., name="hash-encoder-v1")
    source = model_from_file("enc.py:ENCODER")              # bench eval --model enc.py:ENCODER
    encoder = object_encoder(source, options)                # an Encoder or an OpaqueEncoder

What runs: a SentenceTransformer made of a Transformer, a mean or CLS Pooling (and a Normalize), and a transformers
model with its tokenizer, run in lenbench's own `Encoder` (token-aware attacks, the embedding cache, batch
planning), so they score exactly as the same weights loaded from their folder. Anything else with `encode` (a
SentenceTransformer with more modules, an mteb-style wrapper, a numpy function) runs through its own `encode` in an
`OpaqueEncoder` (bench.encode.opaque: word-level attacks, no cache).

Identity (what a row's config hash is taken over): a torch module is keyed by a hash of its weights and its class,
and of its tokenizer where it has one (`object_fingerprint`): the same weights reuse their rows, changed weights
never do. Any other object is keyed by
the name the caller declares; lenbench cannot check that it is the same object, so its rows say "identity declared,
not derived" and are reused only when asked (bench.experiment.evaluation).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bench.encode.opaque import DECLARED, DERIVED, OpaqueEncoder
from bench.encode.options import EncoderOptions
from bench.runtime.errors import ConfigError, ModelLoadError

OBJECT_MODEL = "<object>"  # EvalOptions.model of a model given as an object (the API's; its name replaces it)
FILE_MODEL = re.compile(r"^(?P<file>.+\.py):(?P<attr>[A-Za-z_][A-Za-z0-9_]*)$")  # --model path/to/file.py:NAME


@dataclass
class ModelObject:
    """A model given as an object, with what the caller said of it."""

    obj: Any
    name: str | None = None  # the caller's name: the row's label, and an opaque object's identity
    tokenizer: Any = None  # a transformers model's tokenizer
    origin: str = ""  # where it came from ("enc.py:ENCODER"), for messages

    @property
    def shown(self) -> str:
        return self.origin or self.name or type(self.obj).__qualname__


def model_object(model: Any, *, name: str | None = None, tokenizer: Any = None) -> ModelObject:
    """The API's model argument as a ModelObject: an object, or a `(transformers model, tokenizer)` pair."""
    if isinstance(model, tuple) and len(model) == 2 and tokenizer is None and is_transformers_model(model[0]):
        model, tokenizer = model
    return ModelObject(model, name=name, tokenizer=tokenizer)


def is_model_object(model: Any) -> bool:
    """What the API takes as a model object: anything with `encode`, a torch module, or a (transformers model,
    tokenizer) pair (None, a number, a list are none of these: the API refuses them in one line)."""
    if isinstance(model, (str, bytes, os.PathLike)):  # a name or folder (a str has an encode() of its own)
        return False
    if isinstance(model, tuple):
        return len(model) == 2 and is_transformers_model(model[0])
    return callable(getattr(model, "encode", None)) or is_torch_module(model)


def is_torch_module(obj: Any) -> bool:
    torch = sys.modules.get("torch")  # an object of a torch class means torch is imported already
    return torch is not None and isinstance(obj, torch.nn.Module)


def object_fingerprint(module: Any, tokenizer: Any = None) -> str:
    """sha256 of a torch module's class and weights (names, dtypes, bytes), and of its tokenizer when it has one: the
    same weights in the same class are the same model wherever they came from; one changed weight is another. (A
    folder's fingerprint covers its tokenizer files too: bench.encode.loading.folder_fingerprint.)"""
    from bench.encode.loading import weights_fingerprint

    cls = type(module)
    text = f"{cls.__module__}.{cls.__qualname__}|{weights_fingerprint(module)}"
    if tokenizer is not None:
        text += f"|{tokenizer_fingerprint(tokenizer)}"
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """sha256 of a tokenizer's class and vocabulary: a fast tokenizer's whole definition (vocabulary, normaliser,
    special tokens), else its vocabulary."""
    import json

    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None and callable(getattr(backend, "to_str", None)):
        # truncation and padding are how a call last ran (the encoder sets them), not what the tokenizer is
        definition = {k: v for k, v in json.loads(backend.to_str()).items() if k not in ("truncation", "padding")}
        text = json.dumps(definition, sort_keys=True)
    elif callable(getattr(tokenizer, "get_vocab", None)):
        text = json.dumps(sorted(tokenizer.get_vocab().items()))
    else:  # nothing to read: its class alone
        text = ""
    cls = type(tokenizer)
    return hashlib.sha256(f"{cls.__module__}.{cls.__qualname__}|{text}".encode()).hexdigest()[:24]


def declared_fingerprint(name: str) -> str:
    return "declared:" + hashlib.sha256(name.encode()).hexdigest()[:16]


# ------------------------------------------------------------------------------------------- --model file.py:NAME
def model_from_file(text: str) -> ModelObject | None:
    """`path/to/file.py:NAME` as a model object (None when `text` is not of that form): the plain Python file is
    run as a module of its own (nothing installed, nothing added to sys.path) and NAME read from it: an object with
    `encode`, or a zero-argument callable (a class, a function) returning one. Its declared name is `file.py:NAME`."""
    match = FILE_MODEL.match(str(text).strip())
    if match is None:
        return None
    path = Path(match["file"]).expanduser()
    attr = match["attr"]
    shown = f"{path.name}:{attr}"
    if not path.is_file():
        raise ModelLoadError(f"--model {text}: no file {path} (give path/to/file.py:NAME, NAME an object with "
                             "encode() or a zero-argument callable returning one)")  # fmt: skip
    module_name = f"lenbench_model_file_{hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None  # a .py file always has a source loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses and pickling look their module up by name
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the file's own error, in one line naming the file
        sys.modules.pop(module_name, None)
        raise ModelLoadError(f"--model {text}: running {path} failed: {type(exc).__name__}: "
                             f"{' '.join(str(exc).split())}") from exc  # fmt: skip
    if not hasattr(module, attr):
        defined = sorted(n for n, v in vars(module).items() if not n.startswith("_") and (isinstance(v, type) and
                         callable(getattr(v, "encode", None)) or is_model_object(v)))  # fmt: skip
        raise ModelLoadError(f"--model {text}: {path} defines no {attr!r}"
                             f"{' (objects with encode there: ' + ', '.join(defined) + ')' if defined else ''}")  # fmt: skip
    value = getattr(module, attr)
    if isinstance(value, type) or not is_model_object(value):
        if not callable(value):
            raise ModelLoadError(f"--model {text}: {attr} is a {type(value).__name__}, not an object with encode() "
                                 "or a callable returning one")  # fmt: skip
        try:
            value = value()
        except TypeError as exc:
            raise ModelLoadError(f"--model {text}: calling {attr}() failed ({exc}); NAME must be an object with "
                                 "encode() or a callable taking no arguments") from exc  # fmt: skip
        if not is_model_object(value):
            raise ModelLoadError(f"--model {text}: {attr}() returned a {type(value).__name__}, not a model: an "
                                 "object with encode(list[str]), a SentenceTransformer or a (transformers model, "
                                 "tokenizer) pair")  # fmt: skip
    if isinstance(value, tuple):  # (transformers model, tokenizer)
        return ModelObject(value[0], tokenizer=value[1], origin=shown)
    return ModelObject(value, origin=shown)


# ------------------------------------------------------------------------------------------- the encoder
def object_encoder(source: ModelObject, options: EncoderOptions, *, cache_dir: str | os.PathLike[str] | None = None) -> Any:
    """The encoder that scores `source` under `options` (see the module docstring; `cache_dir`: its embedding cache,
    default the usual one); an object lenbench cannot score is one ConfigError naming it and saying what it must be."""
    from bench.encode.encoder import Encoder

    obj = source.obj
    st = sentence_transformer_parts(obj)
    if st is not None:  # Transformer + Pooling (+ Normalize): lenbench's encoder on its weights
        model, tokenizer, pooling = st
        fingerprint = object_fingerprint(obj, tokenizer)
        return Encoder.of_object(model, tokenizer, replace(options, pooling=options.pooling or pooling),
                                 cache_dir=cache_dir, name=_label(source, fingerprint), fingerprint=fingerprint)
    if is_transformers_model(obj):
        if source.tokenizer is None:
            raise ConfigError(f"model {source.shown}: a transformers {type(obj).__name__} needs its tokenizer: pass "
                              "tokenizer= or a (model, tokenizer) pair (e.g. lenbench.evaluate((model, AutoTokenizer."
                              "from_pretrained(path)), 'sts'))")  # fmt: skip
        fingerprint = object_fingerprint(obj, source.tokenizer)
        return Encoder.of_object(obj, source.tokenizer, replace(options, pooling=options.pooling or "mean"),
                                 cache_dir=cache_dir, name=_label(source, fingerprint), fingerprint=fingerprint)
    if not callable(getattr(obj, "encode", None)):
        raise ConfigError(f"model {source.shown} ({type(obj).__qualname__}): give a model folder or hub id as a "
                          "string, a SentenceTransformer, a transformers model with tokenizer=, or an object with "
                          "encode(list[str]) returning an (n, dim) array")  # fmt: skip
    resolved = options.resolved()
    if is_torch_module(obj):  # its own encode, but its weights (and a SentenceTransformer's tokenizer) are there to hash
        fingerprint = object_fingerprint(obj, getattr(obj, "tokenizer", None))
        name, identity = _label(source, fingerprint), DERIVED
    else:
        name = source.name or source.origin
        if not name:
            raise ConfigError(f"model {type(obj).__qualname__}: lenbench cannot derive the identity of an object "
                              "that is not a torch module; name it: lenbench.evaluate(obj, ..., name='my-encoder-v1') "
                              "(rows are keyed by that name and marked 'identity declared, not derived')")  # fmt: skip
        fingerprint, identity = declared_fingerprint(name), DECLARED
    return OpaqueEncoder(obj, name=name, fingerprint=fingerprint, identity=identity, max_len=options.max_len,
                         device=str(resolved.device), emb_dtype=options.emb_dtype)  # fmt: skip


def object_info(encoder: Any, source: ModelObject) -> dict[str, Any]:
    """Run.model_info of an object: its class, and its parameter count when it is a torch module."""
    cls = type(source.obj)
    info: dict[str, Any] = {"class": f"{cls.__module__}.{cls.__qualname__}"}
    if source.origin:
        info["file"] = source.origin
    if is_torch_module(source.obj):
        info["parameters"] = int(sum(p.numel() for p in source.obj.parameters()))
    if getattr(encoder, "identity", None) == DECLARED:
        info["identity"] = DECLARED
    return info


def _label(source: ModelObject, fingerprint: str) -> str:
    """The label of a torch model: the caller's name, its file:NAME, else its class and the head of its fingerprint."""
    return source.name or source.origin or f"{type(source.obj).__name__}@{fingerprint[:8]}"


def is_transformers_model(obj: Any) -> bool:
    transformers = sys.modules.get("transformers")
    return transformers is not None and isinstance(obj, transformers.PreTrainedModel)


def sentence_transformer_parts(obj: Any) -> tuple[Any, Any, str] | None:
    """(transformers model, tokenizer, pooling) of a SentenceTransformer that lenbench's encoder computes exactly:
    a Transformer, a Pooling of mean or CLS (not prompt-aware), optionally a Normalize; None for any other object
    (its own encode runs)."""
    st = sys.modules.get("sentence_transformers")
    if st is None or not isinstance(obj, st.SentenceTransformer):
        return None
    modules = list(obj)
    names = [type(m).__name__ for m in modules]
    if names not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        return None
    transformer, pooling = modules[0], modules[1]
    # sentence-transformers 6 names the mode `pooling_mode`; earlier versions answer get_pooling_mode_str()
    mode = pooling.pooling_mode if isinstance(getattr(pooling, "pooling_mode", None), str) else (
        pooling.get_pooling_mode_str() if callable(getattr(pooling, "get_pooling_mode_str", None)) else None)
    model = getattr(transformer, "auto_model", None)
    if mode not in ("mean", "cls") or model is None or getattr(pooling, "include_prompt", True) is False:
        return None
    return model, transformer.tokenizer, mode
