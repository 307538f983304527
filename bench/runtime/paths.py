"""Where lenbench keeps files between runs on this machine (the embedding cache, ONNX exports, corpus counts), and
the one way a registered name becomes a folder under an output folder (`child_folder`)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """$LENBENCH_CACHE, else $XDG_CACHE_HOME/lenbench/embeddings (the embedding cache's folder since 0.1)."""
    from bench import environment

    env = environment.text("LENBENCH_CACHE")
    if env:
        return Path(env).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "lenbench" / "embeddings"


def child_folder(root: str | os.PathLike[str], name: str) -> Path:
    """root/name for a registered name (a method, `METHOD-seedN`): a slug, so the folder is one plain path component
    that never leaves `root` (a ValueError otherwise; registries refuse such names before they get here)."""
    from bench.runtime.plugins import is_slug

    root = Path(root)
    folder = root / name
    if not is_slug(name) or folder.resolve().parent != root.resolve():
        raise ValueError(f"{name!r} cannot name a folder under {root}: names are slugs (lower-case letters, digits, '-', '_')")
    return folder
