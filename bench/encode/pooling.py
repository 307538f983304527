"""Token vectors -> one vector per text: the poolings lenbench knows, shared by the encoder, its ONNX export and the
methods that pool during training (a small module so none of them needs the whole encoder)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch is imported by the caller, which already holds tensors
    import torch

POOLINGS = ("mean", "cls")


def pool(hidden: torch.Tensor, attention_mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """(batch, length, dim) last hidden states -> (batch, dim): the [CLS] vector, or the mean over real tokens."""
    if pooling == "cls":
        return hidden[:, 0]
    if pooling == "mean":
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    raise ValueError(f"pooling {pooling!r} is not one of {POOLINGS}")


@contextmanager
def eval_mode(model: Any) -> Iterator[Any]:
    """The model without dropout for the block, its training flag restored after: an encoder may be asked for vectors
    by a model that is being trained (ONNX export, mid-training evaluation)."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


def pooled_output(model: Any, tensors: dict[str, torch.Tensor], pooling: str) -> torch.Tensor:
    """One batch (input_ids, attention_mask, ... on the model's device) through the model, pooled: (batch, dim)."""
    return pool(model(**tensors).last_hidden_state, tensors["attention_mask"], pooling)
