"""`--model` strings -> something suites can score: a transformers `Encoder`, or the BM25 lexical baseline."""

from __future__ import annotations

from typing import Any

LEXICAL_MODELS = ("bm25",)


def load_model(
    name: str,
    *,
    pooling: str | None = None,
    max_len: int = 256,
    batch_size: int = 64,
    device: str | None = None,
    use_cache: bool = True,
    cache_dir: str | None = None,
    backend: str = "auto",
    emb_dtype: str = "fp32",
    precision: str = "auto",
) -> Any:
    """BM25 for 'bm25', else an `Encoder` (lazy for local folders: nothing heavy loads until a text must be encoded)."""
    if name.lower() in LEXICAL_MODELS:
        from bench.evaluate.lexical import BM25Model

        return BM25Model(max_len=max_len)
    from bench.encode.encoder import Encoder

    return Encoder.load(
        name,
        pooling=pooling,
        max_len=max_len,
        batch_size=batch_size,
        device=device,
        use_cache=use_cache,
        cache_dir=cache_dir,
        backend=backend,
        emb_dtype=emb_dtype,
        precision=precision,
    )
