"""`mlm`: masked-language-model continued pre-training (Devlin et al. 2019; the comparison in shared/papers/002).

15% of the non-special tokens are selected (each independently, as BERT's data collator does); of those 80% become
[MASK], 10% a random token, 10% stay as they are; the loss is cross-entropy on the selected positions only.
The MLM head (dense - GELU - LayerNorm - output tied to the word embeddings) is a training-only module: it is
initialised from the backbone's `cls.predictions.*` weights when the backbone folder has them (a BERT pre-training
checkpoint), else freshly, and it is never part of the saved encoder.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from bench.train.hparams import hp
from bench.train.method import BaseAdapter, MethodSpec
from methods.losses import token_mean
from methods.pairs import TokenHelper, pad_rows

log = logging.getLogger(__name__)


@dataclass
class MlmConfig:
    mask_prob: float = hp(0.15, gt=0, lt=1)  # fraction of (non-special) tokens selected for prediction
    mask_token_frac: float = hp(0.8, ge=0, le=1)  # of the selected: replaced by [MASK]
    random_token_frac: float = hp(0.1, ge=0, le=1)  # of the selected: replaced by a random token (the rest stay unchanged)

    def __post_init__(self) -> None:
        if not 0 < self.mask_prob < 1 or self.mask_token_frac + self.random_token_frac > 1:
            raise ValueError("mlm: need 0 < mask_prob < 1 and mask_token_frac + random_token_frac <= 1")


class SharedEmbedding:
    """Holds the encoder's nn.Embedding without registering it as a submodule: a head uses the same Parameter
    (same storage) but its parameters()/state_dict() do not list it again (no duplicate in the optimiser, no copy
    of the encoder's embedding matrix in the training-only modules' checkpoint)."""

    def __init__(self, embedding: nn.Embedding):
        self.embedding = embedding

    @property
    def weight(self) -> torch.Tensor:
        return self.embedding.weight


class MlmHead(nn.Module):
    """BERT's prediction head: dense + GELU + LayerNorm, then the tied word-embedding matrix + bias."""

    def __init__(self, shared: SharedEmbedding, hidden: int, eps: float = 1e-12):
        super().__init__()
        self._shared = shared
        self.dense = nn.Linear(hidden, hidden)
        self.layer_norm = nn.LayerNorm(hidden, eps=eps)
        self.bias = nn.Parameter(torch.zeros(shared.weight.shape[0]))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        x = self.layer_norm(F.gelu(self.dense(hidden)))
        return x @ self._shared.weight.T + self.bias


# backbone checkpoint key -> MlmHead key
_HEAD_KEYS = {
    "cls.predictions.transform.dense.weight": "dense.weight",
    "cls.predictions.transform.dense.bias": "dense.bias",
    "cls.predictions.transform.LayerNorm.weight": "layer_norm.weight",
    "cls.predictions.transform.LayerNorm.bias": "layer_norm.bias",
    "cls.predictions.bias": "bias",
}


def backbone_head_weights(folder: str | Path) -> dict[str, torch.Tensor]:
    """The MLM head tensors of a backbone folder's model.safetensors (empty when it has none)."""
    path = Path(folder) / "model.safetensors"
    if not path.exists():
        return {}
    from safetensors import safe_open

    out = {}
    with safe_open(str(path), "pt") as f:
        keys = set(f.keys())
        for src, dst in _HEAD_KEYS.items():
            if src in keys:
                out[dst] = f.get_tensor(src)
    return out


def mask_tokens(
    ids: torch.Tensor, special: torch.Tensor, config: MlmConfig, mask_id: int, vocab: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """(corrupted ids, labels with -100 where nothing is predicted). `special` marks [CLS]/[SEP]/[PAD]."""
    labels = ids.clone()
    selected = (torch.rand(ids.shape, generator=generator) < config.mask_prob) & ~special
    labels[~selected] = -100
    roll = torch.rand(ids.shape, generator=generator)
    to_mask = selected & (roll < config.mask_token_frac)
    to_random = selected & (roll >= config.mask_token_frac) & (roll < config.mask_token_frac + config.random_token_frac)
    corrupted = ids.clone()
    corrupted[to_mask] = mask_id
    corrupted[to_random] = torch.randint(vocab, ids.shape, generator=generator)[to_random]
    return corrupted, labels


class MlmAdapter(BaseAdapter):
    name = "mlm"

    def __init__(self, config: MlmConfig, *, tokenizer: Any, max_len: int, seed: int = 0):
        self.config = config
        self.tokens = TokenHelper(tokenizer, max_len)
        self.mask_id = tokenizer.mask_token_id
        self.vocab = len(tokenizer)
        self.head: MlmHead | None = None
        self.head_source = "fresh"

    def setup(self, model: nn.Module) -> list[nn.Module]:
        cfg = model.config
        shared = SharedEmbedding(model.get_input_embeddings())
        self.head = MlmHead(shared, cfg.hidden_size, getattr(cfg, "layer_norm_eps", 1e-12))
        weights = backbone_head_weights(getattr(model, "name_or_path", "") or getattr(cfg, "_name_or_path", ""))
        if weights:
            missing = self.head.load_state_dict(weights, strict=False).missing_keys
            self.head_source = "backbone" if not missing else "partly backbone"
        log.info("mlm head: %s initialisation", self.head_source)
        self.head.to(shared.weight.device)
        return [self.head]

    def make_batch(self, texts: list[str], rng: random.Random) -> dict[str, Any] | None:
        rows = [self.tokens.wrap(b) for b in self.tokens.bodies([t for t in texts if t and t.strip()]) if b]
        if not rows:
            return None
        ids, mask = pad_rows(rows, self.tokens.pad_id)
        special = (ids == self.tokens.cls_id) | (ids == self.tokens.sep_id) | (mask == 0)
        generator = torch.Generator().manual_seed(rng.getrandbits(63))  # the trainer's rng: resumable
        corrupted, labels = mask_tokens(ids, special, self.config, self.mask_id, self.vocab, generator)
        return {"input_ids": corrupted, "attention_mask": mask, "labels": labels, "n_examples": len(rows), "n_tokens": int(mask.sum())}

    def loss(self, model: nn.Module, batch: dict[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        assert self.head is not None, "mlm: setup(model) first"
        device = next(model.parameters()).device
        labels = batch["labels"].to(device)
        hidden = model(input_ids=batch["input_ids"].to(device), attention_mask=batch["attention_mask"].to(device)).last_hidden_state
        picked = labels != -100
        n_picked = int(picked.sum())
        # Mean over masked tokens (of every rank: token_mean); a batch with none selected gives a zero loss that
        # keeps the graph (and, under several processes, still joins the count's all_reduce).
        logits = self.head(hidden[picked])
        per_token = F.cross_entropy(logits.float(), labels[picked], reduction="sum") if n_picked else hidden.sum() * 0.0
        return token_mean(per_token, n_picked), {"masked_tokens": float(n_picked)}

    # no state_dict: the head's weights are checkpointed by the trainer as an extra module


SPEC = MethodSpec(
    cite=("devlin2019bert",),
    name="mlm",
    paper="Devlin, Chang, Lee & Toutanova 2019, BERT: Pre-training of Deep Bidirectional Transformers for Language "
    "Understanding (NAACL 2019), masked-language modelling; compared with SimCSE in Zhang, Comparative Analysis "
    "of SimCSE for minBERT Optimization with Multiple Downstream Tasks (Stanford CS224N project report)",
    summary="15% of tokens selected (80% [MASK], 10% random, 10% kept); CE on the selected; training-only head",
    config_cls=MlmConfig,
    factory=MlmAdapter,
    needs_context=True,
)
