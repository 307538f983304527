"""A backbone given as an object: `lenbench.run(backbone=st_model)` (a SentenceTransformer, or a transformers model
with its tokenizer) or `bench run --backbone path/to/file.py:NAME` (a plain file naming one, as `bench eval --model`
takes it). Training loads a backbone from a model folder, in every process, so the object is saved once as one:

    <--out>/backbones/object-<hash of its class, weights and tokenizer>/

and that folder is the run's backbone from then on: in its rows, its config hash and its reproduce command. The same
weights give the same folder, so they reuse the same rows; one changed weight gives another folder, never a reused
row. The folder holds the transformer and its tokenizer; lenbench pools them with `--pooling` as it does any backbone
(a SentenceTransformer's own pooling module is not kept). An object lenbench cannot train (one with only `encode`)
is refused in one line: it can be scored (`bench eval --model`, `lenbench.evaluate`), not trained.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from bench.runtime.errors import ConfigError

OBJECT_BACKBONE_PREFIX = "object-"


def backbone_folder(value: Any, out: str | os.PathLike[str], *, tokenizer: Any = None) -> Any:
    """`value` as a backbone the options take: a model object, or a 'file.py:NAME' string, saved as its folder under
    `out`/backbones (its path returned); any other value as it is (a name, a folder, a hub id)."""
    from bench.encode.objects import FILE_MODEL, is_model_object, model_from_file, model_object

    if isinstance(value, str) and FILE_MODEL.match(value.strip()):
        source = model_from_file(value)
    elif is_model_object(value):
        source = model_object(value, tokenizer=tokenizer)
    else:
        if tokenizer is not None:
            raise ConfigError(f"tokenizer= is for a backbone given as a transformers model; backbone={value!r} is "
                              "loaded by its name or folder")  # fmt: skip
        return value
    assert source is not None  # FILE_MODEL matched
    model, tok = _trainable_parts(source)
    return str(_saved(model, tok, Path(out) / "backbones"))


def with_backbone_folder(spec: Any) -> Any:
    """A RunSpec whose --backbone names a file's object (file.py:NAME), with that object's folder as its backbone."""
    folder = backbone_folder(spec.backbone, spec.out)
    return spec if folder == spec.backbone else spec.with_options(backbone=folder)


def _trainable_parts(source: Any) -> tuple[Any, Any]:
    """(transformers model, tokenizer) of a model object, or one ConfigError saying what a backbone must be."""
    from bench.encode.objects import is_transformers_model, sentence_transformer_parts

    obj = source.obj
    parts = sentence_transformer_parts(obj)
    if parts is not None:
        return parts[0], parts[1]
    if is_transformers_model(obj):
        if source.tokenizer is None:
            raise ConfigError(f"backbone {source.shown}: a transformers {type(obj).__name__} needs its tokenizer: "
                              "lenbench.run(..., backbone=model, tokenizer=tok), or a (model, tokenizer) pair")  # fmt: skip
        return obj, source.tokenizer
    raise ConfigError(f"backbone {source.shown} ({type(obj).__qualname__}): a backbone is trained, so it must be a "
                      "SentenceTransformer of a Transformer and a mean or CLS Pooling, or a transformers model with "
                      "its tokenizer; an object with only encode() can be scored (bench eval --model, "
                      "lenbench.evaluate), not trained")  # fmt: skip


def _saved(model: Any, tokenizer: Any, root: Path) -> Path:
    """The object's folder under `root`, written once: into a temporary sibling, then renamed, so a process that
    dies midway, or another process saving the same weights, never leaves a half folder under the final name."""
    from bench.encode.objects import object_fingerprint

    folder = root / f"{OBJECT_BACKBONE_PREFIX}{object_fingerprint(model, tokenizer)}"
    if (folder / "config.json").is_file():
        return folder
    shutil.rmtree(folder, ignore_errors=True)  # a folder without its config is no model: written again
    root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=root))
    try:
        model.save_pretrained(scratch, safe_serialization=True)
        tokenizer.save_pretrained(scratch)
        try:
            os.replace(scratch, folder)
        except OSError:  # another process saved the same weights first: its folder is this one
            if not (folder / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return folder
