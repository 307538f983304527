"""Size facts of an encoder for Run.model_info: parameters, embedding dim, max tokens, read from the model folder.

Read from the files (config.json, sentence_bert_config.json, safetensors headers), not from loaded weights, so it
costs nothing and works for any transformers / sentence-transformers folder. Key names are the leaderboard's
(`parameters`, `embedding_dim`, `max_tokens`); MTEB's ModelMeta calls them n_parameters, embed_dim, max_tokens.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def count_parameters(folder: Path) -> int | None:
    """Parameters stored in the folder's top-level safetensors files, from the headers alone (no weights read, and
    no torch import: the header is 8 bytes of length then JSON, {name: {"dtype", "shape", "data_offsets"}})."""
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        return None
    total = 0
    for path in files:
        try:
            with open(path, "rb") as fh:
                header = json.loads(fh.read(int.from_bytes(fh.read(8), "little")))
        except (OSError, ValueError):
            return None
        total += sum(math.prod(t["shape"]) for name, t in header.items() if name != "__metadata__")
    return total


def embedding_dim(folder: Path, config: dict[str, Any]) -> int | None:
    """The sentence vector's width: the last Dense module of a sentence-transformers folder, else the pooled hidden size."""
    dim = None
    for module in _json_list(folder / "modules.json"):
        if str(module.get("type", "")).endswith("Dense"):
            dim = _json(folder / module.get("path", "") / "config.json").get("out_features", dim)
    if dim is None:
        dim = _json(folder / "1_Pooling" / "config.json").get("word_embedding_dimension")
    for key in ("hidden_size", "d_model", "dim"):
        if dim is None:
            dim = config.get(key)
    return int(dim) if dim is not None else None


def _json_list(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    return [m for m in data if isinstance(m, dict)] if isinstance(data, list) else []


def model_info(model: str | Path, model_object: Any = None) -> dict[str, Any]:
    """{parameters, embedding_dim, max_tokens, max_position_embeddings} of a model folder; the keys it cannot read are
    left out (a hub id that is not downloaded gives {} unless `model_object`, a loaded torch module, is passed)."""
    folder = Path(model)
    info: dict[str, Any] = {}
    if folder.is_dir():
        config = _json(folder / "config.json")
        params = count_parameters(folder)
        if params is not None:
            info["parameters"] = params
        dim = embedding_dim(folder, config)
        if dim is not None:
            info["embedding_dim"] = dim
        positions = config.get("max_position_embeddings") or config.get("n_positions")
        st_max = _json(folder / "sentence_bert_config.json").get("max_seq_length")
        if st_max or positions:  # sentence-transformers' max_seq_length is what the model is meant to see
            info["max_tokens"] = int(st_max or positions)
        if positions:
            info["max_position_embeddings"] = int(positions)
    if model_object is not None and "parameters" not in info:
        info["parameters"] = sum(p.numel() for p in model_object.parameters())
    return info
