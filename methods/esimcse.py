"""ESimCSE (Wu et al., COLING 2022, arXiv:2109.04380): SimCSE with word repetition and momentum contrast.

* Positive pair (paper §3.1): the anchor is the text; the positive is the same subword sequence with `dup_len`
  of its tokens repeated in place. dup_len ~ U[0, max(2, int(dup_rate * N))) over the N non-special tokens,
  positions sampled without replacement and applied in sorted order, so [CLS]/[SEP] are never duplicated. Both
  views still go through dropout (the SimCSE augmentation stays). The draw is made each time a text is batched,
  from the trainer's seeded rng (the reference code freezes it in a preprocessed dataset cache, so every epoch
  would see the same view; it also caps dup_len at 10, which the paper does not). The positive may be longer
  than max_len by its dup_len repeats (repetition is applied after truncation, as in the reference code:
  truncating again would drop original tokens), but never longer than the backbone's position limit.
* Momentum contrast (paper §3.2): a copy of the encoder updated by EMA (theta_m <- m theta_m + (1-m) theta,
  m = 0.995, after every optimiser step), run in eval mode (no dropout) without gradients, encodes the positives
  of past batches into a FIFO queue whose embeddings are extra negatives:
  loss = CE over [cos(z1, z2_batch) | cos(z1, queue)] / t, the positive on the diagonal of the first block.
  Capacity: whole batches, queue_size_ratio (2.5, paper: 160 for batch 64) rounded half up -> 3 batches.

What "the queue never holds embeddings from a different encoder state than the momentum encoder's" means here,
and the choice made (`EsimcseConfig.refresh_queue_each_step`):
  1. No queue embedding is ever produced by the online encoder, nor by the momentum encoder in train mode
     (dropout would make it a different, random encoder state), nor by a momentum encoder this run does not
     continue (e.g. one re-copied from the online weights after a resume).
  2. Default (False, the paper's / MoCo's design): an entry is encoded once, by the momentum encoder as it is
     when the batch is enqueued (in after_step, right after that step's EMA update), so at a loss the queue
     holds the momentum states of the last `queue_batches` steps: the newest entry is the current state, the
     oldest 2 EMA updates behind (at m = 0.995 two updates move the momentum encoder by ~1% of its distance to
     the online encoder). This bounded staleness is what the momentum encoder exists to make harmless, and it
     costs one no-grad forward of one batch per step.
  3. True (strict reading): the queue keeps token ids only and every entry is re-encoded by the current momentum
     encoder before every loss: all negatives come from exactly one encoder state, at +queue_batches no-grad
     forwards per step instead of 1 (estimated +30% compute: 9 instead of 7 forward-equivalents per step).
Resume: the checkpoint holds the momentum encoder's weights and the queued token ids, never embeddings. On
resume the queue is reset to those ids and re-encoded by the restored momentum encoder, so after a resume it
holds exactly one state, the one the run continues from. In refresh mode this makes the resumed run identical to
an uninterrupted one; in the default mode the newest entry is identical and the two older ones come from the
current momentum state instead of their 1-2-updates-older ones, for the first steps after a resume only
(tests/test_esimcse.py bounds the difference). loss() itself never touches the queue (see after_step).
"""

from __future__ import annotations

import contextlib
import copy
import math
import random
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from bench.runtime import distributed
from bench.encode.pooling import POOLINGS
from bench.train.hparams import hp
from bench.train.method import MethodSpec
from methods.losses import info_nce
from methods.pairs import embed, pad_rows


@dataclass
class EsimcseConfig:
    # Paper §4 / Table 6: dup_rate 0.32 is the best (the reference code's CLI default 0.05 is not the paper setting).
    dup_rate: float = hp(0.32, ge=0, le=1)
    # Paper §3.2: m = 0.995 is the best momentum.
    momentum: float = hp(0.995, ge=0, lt=1)
    # Paper: queue size ~2.5x the batch (160 for batch 64); here rounded to whole batches (2.5 -> 3 batches),
    # so a queue entry is always one whole past batch.
    queue_size_ratio: float = hp(2.5, ge=0)
    # SPEC §1: InfoNCE temperature 0.05 shared by the contrastive methods.
    temperature: float = hp(0.05, gt=0)
    # Pooling of the training embeddings; SPEC §1: the pooling used at evaluation (mean unless the run says).
    pooling: str = hp("mean", choices=POOLINGS)
    # False: MoCo / paper behaviour (entries encoded once, when enqueued, by the momentum encoder of that step).
    # True: entries are re-encoded by the current momentum encoder before each loss (single encoder state).
    refresh_queue_each_step: bool = False

    def __post_init__(self) -> None:
        if not 0.0 <= self.dup_rate <= 1.0:
            raise ValueError(f"esimcse: dup_rate must be in [0, 1], got {self.dup_rate}")
        if not 0.0 <= self.momentum < 1.0:
            raise ValueError(f"esimcse: momentum must be in [0, 1), got {self.momentum}")
        if self.queue_size_ratio < 0:
            raise ValueError(f"esimcse: queue_size_ratio must be >= 0 (0 disables the queue), got {self.queue_size_ratio}")
        if self.temperature <= 0:
            raise ValueError(f"esimcse: temperature must be > 0, got {self.temperature}")
        if self.pooling not in POOLINGS:
            raise ValueError(f"esimcse: pooling {self.pooling!r} is not one of {POOLINGS}")

    @property
    def queue_batches(self) -> int:
        """Queue capacity in whole batches: queue_size_ratio rounded half up (2.5 -> 3; 0 -> no queue)."""
        return int(math.floor(self.queue_size_ratio + 0.5))


def repetition_length(n_tokens: int, dup_rate: float, rng: random.Random) -> int:
    """dup_len ~ U[0, max(2, int(dup_rate * N))) (paper §3.1), never more than the N tokens there are."""
    return min(rng.randrange(max(2, int(dup_rate * n_tokens))), n_tokens)


def repeat_tokens(
    ids: list[int],
    dup_rate: float,
    rng: random.Random,
    n_special_front: int = 1,
    n_special_back: int = 1,
    max_total: int | None = None,
) -> list[int]:
    """Word repetition on a tokenised sequence: duplicate dup_len randomly chosen non-special tokens in place.

    `ids` includes the special tokens; the first `n_special_front` and last `n_special_back` ([CLS] ... [SEP])
    are never candidates. Returns a new list: every original token in order, plus each chosen one once more
    right after itself. `max_total` (the backbone's position limit) caps the result's length: dup_len is cut
    to what fits.
    """
    body = range(n_special_front, len(ids) - n_special_back)
    n = len(body)
    if n <= 0:
        return list(ids)
    dup_len = repetition_length(n, dup_rate, rng)
    if max_total is not None:
        dup_len = max(0, min(dup_len, max_total - len(ids)))
    chosen = set(rng.sample(body, dup_len))
    out: list[int] = []
    for i, tok in enumerate(ids):
        out.append(tok)
        if i in chosen:
            out.append(tok)
    return out


class MomentumQueue:
    """FIFO of past positive batches for momentum-contrast negatives; capacity in whole batches.

    Each entry keeps the token ids (to re-encode: resume, or `refresh_queue_each_step`) and, once computed,
    the momentum encoder's embeddings of them.
    """

    def __init__(self, capacity_batches: int):
        self.capacity_batches = capacity_batches
        self.entries: deque[dict[str, torch.Tensor | None]] = deque()

    def __len__(self) -> int:  # number of embeddings (rows), not batches
        return sum(int(e["input_ids"].shape[0]) for e in self.entries)

    def push(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, embeddings: torch.Tensor | None) -> None:
        if self.capacity_batches <= 0:
            return
        self.entries.append(
            {
                "input_ids": input_ids.detach().to("cpu"),
                "attention_mask": attention_mask.detach().to("cpu"),
                "embeddings": None if embeddings is None else embeddings.detach(),
            }
        )
        while len(self.entries) > self.capacity_batches:
            self.entries.popleft()  # oldest batch leaves first

    def clear(self) -> None:
        self.entries.clear()

    def invalidate(self) -> None:
        """Drop the cached embeddings (keep the ids): they will be recomputed by the current momentum encoder."""
        for e in self.entries:
            e["embeddings"] = None

    def embeddings(self, encode) -> torch.Tensor | None:
        """(rows, dim) negatives, oldest first; entries without embeddings are encoded now with `encode`."""
        if not self.entries:
            return None
        for e in self.entries:
            if e["embeddings"] is None:
                e["embeddings"] = encode(e["input_ids"], e["attention_mask"])
        return torch.cat([e["embeddings"] for e in self.entries], dim=0)

    def state_dict(self) -> list[dict[str, torch.Tensor]]:
        return [{"input_ids": e["input_ids"], "attention_mask": e["attention_mask"]} for e in self.entries]

    def load_state_dict(self, entries: list[dict[str, torch.Tensor]]) -> None:
        self.clear()
        for e in entries[-self.capacity_batches :] if self.capacity_batches > 0 else []:
            self.push(e["input_ids"], e["attention_mask"], None)


class EsimcseAdapter:
    name = "esimcse"
    shard_trim = ("anchor_", "positive_")  # on several processes, each shard drops the padding it does not use

    def __init__(self, config: EsimcseConfig, *, tokenizer: Any, max_len: int, seed: int = 0):
        if max_len < 4:
            raise ValueError(f"esimcse: max_len must be at least 4, got {max_len}")
        self.config = config
        self.tokenizer = tokenizer
        self.max_len = max_len
        self.seed = seed
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.queue = MomentumQueue(config.queue_batches)
        self._memo: Any = {}  # text -> ids for the corpus's texts (a token_cache.TokenTable: `prepare`)
        self.momentum_encoder: torch.nn.Module | None = None
        self._pending: tuple[torch.Tensor, torch.Tensor] | None = None  # positives of the step in progress
        self._pending_autocast: tuple[str, torch.dtype] | None = None  # the autocast loss() ran under, if any
        # Longest sequence the backbone can take (positives may exceed max_len by their repeats, not this).
        limit = getattr(tokenizer, "model_max_length", None)
        self.position_limit: int | None = int(limit) if isinstance(limit, int) and 0 < limit < 100_000 else None

    # ---------------------------------------------------------------- protocol
    def setup(self, model: torch.nn.Module) -> list[torch.nn.Module]:
        """The momentum encoder starts as an exact copy of the encoder (paper §3.2); it is not trained by the optimiser."""
        n_pos = getattr(getattr(model, "config", None), "max_position_embeddings", None)
        if isinstance(n_pos, int) and n_pos > 0:
            self.position_limit = min(n_pos, self.position_limit or n_pos)
        self.momentum_encoder = copy.deepcopy(model)
        for p in self.momentum_encoder.parameters():
            p.requires_grad_(False)
        self.momentum_encoder.eval()
        self.queue.clear()
        self._pending = None
        return []

    def make_batch(self, texts: list[str], rng: random.Random) -> dict[str, Any] | None:
        texts = [t for t in texts if t and t.strip()]
        if len(texts) < 2:  # InfoNCE needs an in-batch negative (as PairContrastiveAdapter.make_batch)
            return None
        anchors = self._ids(texts)
        # Repetition is drawn here, every time a text is batched (never cached), from the trainer's rng.
        # The positive may exceed max_len by its dup_len repeated tokens (as in the reference code, which
        # repeats after truncation): truncating it again would drop original tokens. It never exceeds the
        # backbone's position limit.
        positives = [repeat_tokens(ids, self.config.dup_rate, rng, max_total=self.position_limit) for ids in anchors]
        a_ids, a_mask = pad_rows(anchors, self.pad_id)
        p_ids, p_mask = pad_rows(positives, self.pad_id)
        return {
            "anchor_input_ids": a_ids,
            "anchor_attention_mask": a_mask,
            "positive_input_ids": p_ids,
            "positive_attention_mask": p_mask,
            "n_examples": len(texts),
            "n_tokens": int(a_mask.sum() + p_mask.sum()),
        }

    def _ids(self, texts: list[str]) -> list[list[int]]:
        """Token ids with special tokens, cut at max_len: from the corpus's prepared ids when there, else tokenised."""
        found = [self._memo.get(t) for t in texts]
        missing = [t for t, f in zip(texts, found) if f is None]
        if missing:
            enc = iter(self.tokenizer(missing, truncation=True, max_length=self.max_len, add_special_tokens=True)["input_ids"])
            found = [f if f is not None else list(next(enc)) for f in found]
        return [list(f) for f in found]  # type: ignore[arg-type]

    def prepare(self, texts: Sequence[str], workers: int | None = None) -> dict[str, Any]:
        """Per-corpus preprocessing before training: every text's token ids, once, kept on disk (bench.data.token_cache)."""
        import time

        from bench.data import token_cache

        start = time.monotonic()
        strings = list(dict.fromkeys(t for t in texts if t and t.strip()))
        self._memo, cached = token_cache.bodies(strings, self.tokenizer, self.max_len, workers, special=True)
        return {"tokens": {"strings": len(strings), "cached": cached, "seconds": round(time.monotonic() - start, 3)}}

    def _momentum_encode(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        assert self.momentum_encoder is not None
        self.momentum_encoder.eval()  # no dropout: a stable target, as in the paper / MoCo
        with torch.no_grad():
            return embed(self.momentum_encoder, ids, mask, self.config.pooling).float()

    def queue_negatives(self, model: torch.nn.Module) -> torch.Tensor | None:
        """The queue's embeddings as the momentum encoder gives them (refreshed first if configured)."""
        self._ensure_momentum(model)
        if self.config.refresh_queue_each_step:
            self.queue.invalidate()
        return self.queue.embeddings(self._momentum_encode)

    def loss(self, model: torch.nn.Module, batch: dict[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        self._ensure_momentum(model)
        z1 = embed(model, batch["anchor_input_ids"], batch["anchor_attention_mask"], self.config.pooling)
        z2 = embed(model, batch["positive_input_ids"], batch["positive_attention_mask"], self.config.pooling)
        negatives = self.queue_negatives(model)
        if negatives is not None:
            negatives = negatives.to(z1.device)
        loss = info_nce(z1, z2, self.config.temperature, extra_negatives=negatives)
        # This batch's positives join the queue in after_step(), once the optimiser step and the EMA update are
        # done: loss() has no side effect on the queue, so a step the trainer abandons (non-finite loss) leaves
        # nothing behind, and the newest entry is encoded by the momentum state the next loss will see.
        self._pending = (batch["positive_input_ids"], batch["positive_attention_mask"])
        # The trainer runs loss() under its autocast (bf16 on CUDA) but after_step() outside it: remember the
        # precision, so queue entries are encoded exactly as refresh mode (inside loss) would encode them.
        dev = z1.device.type
        self._pending_autocast = (dev, torch.get_autocast_dtype(dev)) if torch.is_autocast_enabled(dev) else None
        return loss, {"queue_size": float(0 if negatives is None else negatives.shape[0])}

    def after_step(self, model: torch.nn.Module) -> None:
        """EMA update of the momentum encoder, then enqueue the step's positives, encoded by that updated state
        (refresh mode: ids only, they are encoded before each loss)."""
        self._ensure_momentum(model)
        ema_update(self.momentum_encoder, model, self.config.momentum)
        if self._pending is not None:
            p_ids, p_mask = self._pending
            self._pending = None
            amp, self._pending_autocast = self._pending_autocast, None
            with torch.autocast(amp[0], dtype=amp[1]) if amp else contextlib.nullcontext():
                emb = None if self.config.refresh_queue_each_step else self._momentum_encode(p_ids, p_mask)
            if distributed.active():
                # Several processes: each encoded its shard of the batch; every rank queues the whole global
                # batch (ids and embeddings, in rank order), so the queue, its negatives and the checkpointed ids
                # are those of one device, whatever the world size of a later --resume.
                p_ids = distributed.all_gather_rows(p_ids, pad_value=self.pad_id)
                p_mask = distributed.all_gather_rows(p_mask, pad_value=0)
                emb = None if emb is None else distributed.all_gather_rows(emb)
            self.queue.push(p_ids, p_mask, emb)

    def state_dict(self) -> dict[str, Any]:
        assert self.momentum_encoder is not None, "esimcse: state_dict() before setup()"
        return {
            "momentum_encoder": {k: v.detach().to("cpu") for k, v in self.momentum_encoder.state_dict().items()},
            "queue": self.queue.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.momentum_encoder is None:
            raise RuntimeError("esimcse: load_state_dict() needs setup(model) first (it restores the momentum encoder)")
        if "momentum_encoder" not in state:
            raise ValueError("esimcse: adapter state has no 'momentum_encoder' weights; cannot resume consistently")
        self.momentum_encoder.load_state_dict(state["momentum_encoder"])
        self._pending = None
        # Token ids come back; embeddings are recomputed by the restored momentum encoder at the next loss.
        self.queue.load_state_dict(state.get("queue", []))

    # ---------------------------------------------------------------- helpers
    def _ensure_momentum(self, model: torch.nn.Module) -> None:
        if self.momentum_encoder is None:
            raise RuntimeError("esimcse: setup(model) must be called before training")
        device = next(model.parameters()).device
        if next(self.momentum_encoder.parameters()).device != device:
            self.momentum_encoder.to(device)


@torch.no_grad()
def ema_update(target: torch.nn.Module, source: torch.nn.Module, momentum: float) -> None:
    """theta_target <- momentum * theta_target + (1 - momentum) * theta_source (parameters, by name)."""
    src = dict(source.named_parameters())
    for name, p_t in target.named_parameters():
        p_s = src[name].detach()
        p_t.mul_(momentum).add_(p_s.to(p_t.device, p_t.dtype), alpha=1.0 - momentum)
    src_buffers = dict(source.named_buffers())
    for name, b_t in target.named_buffers():  # e.g. position_ids: follow the encoder exactly
        if name in src_buffers:
            b_t.copy_(src_buffers[name])


SPEC = MethodSpec(
    cite=("wu2022esimcse",),
    name="esimcse",
    paper="Wu et al. 2022, ESimCSE: Enhanced Sample Building Method for Contrastive Learning of Unsupervised "
    "Sentence Embedding (COLING 2022, arXiv:2109.04380)",
    summary="SimCSE with a word-repetition positive (dup rate 0.32) and momentum-encoder queue negatives "
    "(EMA 0.995, queue 2.5x batch rounded to whole batches)",
    config_cls=EsimcseConfig,
    factory=EsimcseAdapter,
)
