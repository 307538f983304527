"""`--model` strings -> something suites can score: a transformers `Encoder`, or the BM25 lexical baseline."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from bench.encode.options import ENCODER_DEFAULTS, EncoderOptions

LEXICAL_MODELS = ("bm25",)


def load_model(name: str, options: EncoderOptions | None = None, *, cache_dir: str | os.PathLike[str] | None = None,
               **changes: Any) -> Any:  # fmt: skip
    """BM25 for 'bm25' (it reads `options.max_len` tokens of each text), else an `Encoder` under `options` (with
    `changes` to its fields by name, as `Encoder.load`; lazy for local folders: nothing heavy loads until a text must
    be encoded)."""
    options = replace(options or ENCODER_DEFAULTS, **changes)
    if name.lower() in LEXICAL_MODELS:
        from bench.evaluate.lexical import BM25Model

        return BM25Model(max_len=options.max_len)
    from bench.encode.encoder import Encoder

    return Encoder.load(name, options, cache_dir=cache_dir)
