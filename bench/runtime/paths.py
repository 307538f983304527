"""Where lenbench keeps files between runs on this machine (the embedding cache, ONNX exports, corpus counts)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """$LENBENCH_CACHE, else $XDG_CACHE_HOME/lenbench/embeddings (the embedding cache's folder since 0.1)."""
    env = os.environ.get("LENBENCH_CACHE")
    if env:
        return Path(env).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "lenbench" / "embeddings"
