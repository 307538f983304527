"""The bare token-embedding backbone (`--backbone embedding-bag[-DIM]`): the crop-SSL paper's Table 1 column 8.

A randomly initialised embedding table over the packaged MiniLM's WordPiece vocabulary, no position embeddings, no
transformer: a text's vector is the mean of its tokens' vectors. It is a transformers model (config type
`lenbench-embedding-bag`, registered with AutoConfig/AutoModel when this module is imported, which `load_weights`
does), so the shared trainer, the encoder, the ONNX export and `bench eval --model FOLDER` treat it like any other.

Special tokens ([CLS], [SEP], [PAD], [MASK]) embed to zero: the trainer's pair methods and the encoder wrap every
text in [CLS] ... [SEP], and a zero vector leaves the *direction* of the mean unchanged (it only scales it by
n / (n + 2)), so after L2 normalisation a text's embedding is the mean over its real WordPiece tokens: exactly
what sentence-transformers' StaticEmbedding computes (it tokenises without special tokens). The saved folder is
therefore also a sentence-transformers folder (StaticEmbedding + Normalize, see `write_sentence_transformers_files`);
the one difference is that StaticEmbedding never truncates, while lenbench cuts at max_len.

Dropout on the token vectors (p = 0.1, training only) gives SimCSE's two views something to differ in; without it
the two views of a text are identical and SimCSE's task is trivially solved.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from transformers import AutoConfig, AutoModel, PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import BaseModelOutput

MODEL_TYPE = "lenbench-embedding-bag"
DEFAULT_DIM = 256
BACKBONE_PREFIX = "embedding-bag"


class EmbeddingBagConfig(PretrainedConfig):
    model_type = MODEL_TYPE

    def __init__(
        self,
        vocab_size: int = 30522,
        hidden_size: int = DEFAULT_DIM,
        dropout: float = 0.1,
        initializer_range: float = 0.02,
        ignored_token_ids: list[int] | None = None,
        max_position_embeddings: int = 512,
        pad_token_id: int = 0,
        **kwargs: Any,
    ):
        super().__init__(pad_token_id=pad_token_id, **kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.dropout = dropout
        self.initializer_range = initializer_range
        self.ignored_token_ids = list(ignored_token_ids or [])
        # Not a limit of the model (it has no positions); the length the tokenizer and max_len checks read.
        self.max_position_embeddings = max_position_embeddings


class EmbeddingBagModel(PreTrainedModel):
    """Token ids -> per-token vectors (zero for the ignored special tokens); pooling is the encoder's (mean)."""

    config_class = EmbeddingBagConfig
    base_model_prefix = "bag"
    main_input_name = "input_ids"

    def __init__(self, config: EmbeddingBagConfig):
        super().__init__(config)
        self.embedding = torch.nn.Embedding(config.vocab_size, config.hidden_size)
        self.dropout = torch.nn.Dropout(config.dropout)
        # Kept as a plain list, not a buffer: transformers materialises a model on the meta device, and a buffer that
        # is not in the checkpoint would come back uninitialised.
        self.ignored = [int(i) for i in config.ignored_token_ids if 0 <= int(i) < config.vocab_size]
        self.post_init()

    def _init_weights(self, module: torch.nn.Module) -> None:
        if isinstance(module, torch.nn.Embedding):
            module.weight.data.normal_(mean=0.0, std=self.config.initializer_range)

    def get_input_embeddings(self) -> torch.nn.Embedding:
        return self.embedding

    def set_input_embeddings(self, value: torch.nn.Embedding) -> None:
        self.embedding = value

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **_: Any) -> BaseModelOutput:
        hidden = self.dropout(self.embedding(input_ids))
        if self.ignored:
            ignored = torch.tensor(self.ignored, dtype=input_ids.dtype, device=input_ids.device)
            keep = (input_ids.unsqueeze(-1) != ignored).all(-1)
            hidden = hidden * keep.unsqueeze(-1).to(hidden.dtype)
        return BaseModelOutput(last_hidden_state=hidden)


_registered = False


def register() -> None:
    """Make AutoConfig/AutoModel know the type (idempotent)."""
    global _registered
    if _registered:
        return
    AutoConfig.register(MODEL_TYPE, EmbeddingBagConfig, exist_ok=True)
    AutoModel.register(EmbeddingBagConfig, EmbeddingBagModel, exist_ok=True)
    _registered = True


def parse_backbone(name: str) -> int | None:
    """'embedding-bag' -> 256, 'embedding-bag-512' -> 512; None when the name is not an embedding bag."""
    if name == BACKBONE_PREFIX:
        return DEFAULT_DIM
    if not name.startswith(BACKBONE_PREFIX + "-"):
        return None
    tail = name[len(BACKBONE_PREFIX) + 1 :]
    if not tail.isdigit() or not 1 <= int(tail) <= 4096:
        raise ValueError(f"backbone {name!r}: the embedding bag's width is a whole number 1..4096 (e.g. embedding-bag-256)")
    return int(tail)


def is_embedding_bag(model: Any) -> bool:
    return getattr(getattr(model, "config", None), "model_type", None) == MODEL_TYPE


def write_sentence_transformers_files(folder: Path) -> None:
    """modules.json of a StaticEmbedding (weights `embedding.weight` in model.safetensors, tokenizer.json, both at the
    folder's root, where save_pretrained put them) followed by Normalize."""
    (folder / "modules.json").write_text(
        json.dumps(
            [
                {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.StaticEmbedding"},
                {"idx": 1, "name": "1", "path": "1_Normalize", "type": "sentence_transformers.models.Normalize"},
            ],
            indent=2,
        )
    )
    (folder / "1_Normalize").mkdir(exist_ok=True)
