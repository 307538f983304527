"""The sentence-transformers files of an encoder folder: they say how the folder is scored (max_seq_length, pooling,
normalisation), so `SentenceTransformer(folder)` computes the vectors lenbench scored.

`bench run` saves a trained encoder with these files declaring the evaluation's max_len and pooling (the trainer is
given them): training may read fewer tokens per text (--max-len) than evaluation (--eval-max-len), and the folder
must reproduce the scores in its model card, not the training length. `declare_scoring` rewrites them in a folder
saved otherwise.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

MODULES = [
    {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
]


def write_st_config(folder: str | os.PathLike[str], dim: int, pooling: str, max_len: int) -> None:
    """modules.json (Transformer -> Pooling -> Normalize), sentence_bert_config.json and 1_Pooling/config.json."""
    out = Path(folder)
    (out / "modules.json").write_text(json.dumps(MODULES, indent=2))
    (out / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": max_len, "do_lower_case": False}))
    (out / "1_Pooling").mkdir(exist_ok=True)
    (out / "2_Normalize").mkdir(exist_ok=True)
    (out / "1_Pooling" / "config.json").write_text(
        json.dumps(
            {
                "word_embedding_dimension": int(dim),
                "pooling_mode_cls_token": pooling == "cls",
                "pooling_mode_mean_tokens": pooling == "mean",
                "pooling_mode_max_tokens": False,
                "pooling_mode_mean_sqrt_len_tokens": False,
            },
            indent=2,
        )
    )


def declare_scoring(folder: str | os.PathLike[str], pooling: str, max_len: int) -> None:
    """Rewrite a saved encoder folder's sentence-transformers files for the max_len and pooling it is scored with
    (the weights and the files lenbench fingerprints are not touched)."""
    out = Path(folder)
    try:
        modules = [m.get("type") for m in json.loads((out / "modules.json").read_text())]
    except (OSError, ValueError):
        modules = []
    if modules and modules != [m["type"] for m in MODULES]:
        return  # another layout (a StaticEmbedding folder reads whole texts, has no pooling): left as saved
    from bench.runtime.writes import atomic_folder

    config = json.loads((out / "config.json").read_text())
    with atomic_folder(out, "the encoder's sentence-transformers files", replace=True) as tmp:
        write_st_config(tmp, int(config["hidden_size"]), pooling, max_len)


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
