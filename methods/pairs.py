"""What the pair-contrastive adapters (simcse, laser3, cocodr-pt, crop) share: token-level pair batches and InfoNCE.

A subclass only says how a raw text becomes an (anchor, positive) pair of token-id lists; tokenisation,
truncation to max_len, padding, mean/CLS pooling and the in-batch InfoNCE loss (SPEC §1) are the same for all.

It says so in two steps, so that a batch's texts are tokenised in one tokenizer call rather than one call per
string: `text_pair(text, rng)` picks the two strings (the positive None when it is the anchor's own tokens), and
`finish_pair(anchor_body, positive_body, rng)` turns their token ids (no special tokens, cut at max_len - 2) into
the pair. A subclass that overrides `make_pair` alone is built text by text, as before.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from typing import Any

import torch

from bench.encode.batching import pad_batch
from bench.encode.masks import model_mask
from bench.encode.pooling import POOLINGS, pool
from bench.train.method import BaseAdapter
from methods.losses import info_nce

Pair = tuple[list[int], list[int]]  # (anchor ids, positive ids), special tokens included


class TokenHelper:
    """Tokenise without specials, truncate to max_len - 2, wrap with [CLS] ... [SEP]."""

    def __init__(self, tokenizer: Any, max_len: int):
        self.tokenizer = tokenizer
        self.max_len = max_len
        self.body_max = max_len - 2  # room for [CLS] and [SEP]
        self.cls_id = tokenizer.cls_token_id
        self.sep_id = tokenizer.sep_token_id
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

        self.memo: Any = {}  # string -> body for the corpus's strings (a token_cache.TokenTable: `PairContrastiveAdapter.prepare`)

    def body(self, text: str) -> list[int]:
        """Token ids of `text` without special tokens, cut at max_len - 2 (by the tokenizer: long documents are
        never turned into thousands of ids only to be cut)."""
        return self.bodies([text])[0]

    def bodies(self, texts: list[str]) -> list[list[int]]:
        if not texts:
            return []
        if len(self.memo):
            found = [self.memo.get(t) for t in texts]
            missing = [t for t, f in zip(texts, found) if f is None]
            if not missing:
                return found  # type: ignore[return-value]
            computed = iter(self._tokenize(missing))
            return [f if f is not None else next(computed) for f in found]
        return self._tokenize(texts)

    def _tokenize(self, texts: list[str]) -> list[list[int]]:
        enc = self.tokenizer(texts, add_special_tokens=False, truncation=True, max_length=self.body_max,
                             return_attention_mask=False, return_token_type_ids=False)["input_ids"]  # fmt: skip
        return [list(ids[: self.body_max]) for ids in enc]

    def wrap(self, body: list[int]) -> list[int]:
        return [self.cls_id, *body[: self.body_max], self.sep_id]


def pad_rows(rows: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, mask) long tensors of `rows` padded with `pad_id`: lenbench's one padding function (the encoder's),
    as torch tensors."""
    ids, mask = pad_batch(rows, pad_id)
    return torch.from_numpy(ids), torch.from_numpy(mask)


def embed(model: torch.nn.Module, ids: torch.Tensor, mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """Pooled vectors of a padded batch. The batch is copied to the model's device without waiting (the loader
    pins it on CUDA), and the model gets the attention mask prepared from the host's copy (bench.encode.masks), so
    a training step does not wait for the GPU to say whether the batch is padded."""
    device = next(model.parameters()).device
    host_mask = mask.numpy() if mask.device.type == "cpu" else None
    ids, mask = ids.to(device, non_blocking=True), mask.to(device, non_blocking=True)
    given = mask if host_mask is None else model_mask(model, mask, host_mask)
    return pool(model(input_ids=ids, attention_mask=given).last_hidden_state, mask, pooling)


class PairContrastiveAdapter(BaseAdapter):
    """Base of the InfoNCE pair methods. Subclasses implement `make_pair(text, rng) -> Pair | None`."""

    name = "pair"
    # True when both views always have the same token ids and length (SimCSE): one forward over the 2B rows.
    one_forward = False
    shard_trim = ("anchor_", "positive_")  # on several processes, each shard drops the padding it does not use

    def __init__(self, config: Any, *, tokenizer: Any, max_len: int, seed: int = 0):
        if getattr(config, "pooling", "mean") not in POOLINGS:
            raise ValueError(f"{self.name}: pooling {config.pooling!r} is not one of {POOLINGS}")
        if not getattr(config, "temperature", 0.05) > 0:
            raise ValueError(f"{self.name}: temperature must be > 0")
        self.config = config
        self.tokens = TokenHelper(tokenizer, max_len)
        self.max_len = max_len
        self.seed = seed

    # ------------------------------------------------------- corpus preprocessing
    def fixed_strings(self, text: str) -> list[str]:
        """The strings `text_pair` may ask to tokenise for this text, whatever the rng draws (tokenised once per
        corpus by `prepare`); [] when they depend on the draw."""
        return []

    def prepare(self, texts: Sequence[str], workers: int | None = None) -> dict[str, Any]:
        """Per-corpus preprocessing before training, done once and kept on disk: the sentence splits (when the
        method splits) and the token ids of every `fixed_strings` string. Returns what it did, for the log."""
        from bench.data import token_cache

        report = super().prepare(texts, workers)
        start = time.monotonic()
        strings = list(dict.fromkeys(s for t in texts if t and t.strip() for s in self.fixed_strings(t)))
        if strings:
            self.tokens.memo, cached = token_cache.bodies(strings, self.tokens.tokenizer, self.tokens.body_max, workers)
            report["tokens"] = {"strings": len(strings), "cached": cached, "seconds": round(time.monotonic() - start, 3)}
        return report

    # ---------------------------------------------------------------- pairs
    def text_pair(self, text: str, rng: random.Random) -> tuple[str, str | None] | None:
        """The (anchor, positive) strings of a text; positive None: the anchor's own token ids; None: no pair."""
        raise NotImplementedError

    def finish_pair(self, anchor: list[int], positive: list[int] | None, rng: random.Random) -> Pair | None:
        """Token bodies of `text_pair`'s strings -> the pair with special tokens; None when a side is empty."""
        if not anchor:
            return None
        if positive is None:
            return self.tokens.wrap(anchor), self.tokens.wrap(anchor)
        if not positive:
            return None
        return self.tokens.wrap(anchor), self.tokens.wrap(positive)

    def make_pair(self, text: str, rng: random.Random) -> Pair | None:
        """One text's pair (the batch path, `pairs`, makes the same pairs with one tokenizer call a batch)."""
        return self.pairs([text], rng)[0] if text and text.strip() else None

    def pairs(self, texts: list[str], rng: random.Random) -> list[Pair | None]:
        """The pair of each non-blank text, in order (None where a text gives none); draws from `rng` text by text
        in `text_pair`, then text by text in `finish_pair`."""
        texts = [t for t in texts if t and t.strip()]
        if type(self).make_pair is not PairContrastiveAdapter.make_pair:  # a subclass with its own per-text pairs
            return [self.make_pair(t, rng) for t in texts]
        chosen = [self.text_pair(t, rng) for t in texts]
        strings: list[str] = []
        for c in chosen:
            if c is not None:
                strings.append(c[0])
                if c[1] is not None:
                    strings.append(c[1])
        bodies = iter(self.tokens.bodies(strings))
        out: list[Pair | None] = []
        for c in chosen:
            if c is None:
                out.append(None)
                continue
            anchor = next(bodies)
            positive = next(bodies) if c[1] is not None else None
            out.append(self.finish_pair(anchor, positive, rng))
        return out

    # ------------------------------------------------------------- protocol
    def make_batch(self, texts: list[str], rng: random.Random) -> dict[str, Any] | None:
        pairs = [p for p in self.pairs(texts, rng) if p is not None]
        if len(pairs) < 2:  # InfoNCE needs at least one in-batch negative
            return None
        a_ids, a_mask = pad_rows([a for a, _ in pairs], self.tokens.pad_id)
        p_ids, p_mask = pad_rows([p for _, p in pairs], self.tokens.pad_id)
        return {
            "anchor_input_ids": a_ids,
            "anchor_attention_mask": a_mask,
            "positive_input_ids": p_ids,
            "positive_attention_mask": p_mask,
            "n_examples": len(pairs),
            "n_tokens": int(a_mask.sum() + p_mask.sum()),
        }

    def embed_pair(self, model: torch.nn.Module, batch: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        pooling = getattr(self.config, "pooling", "mean")  # a small-contract config may leave it out
        a_ids, p_ids = batch["anchor_input_ids"], batch["positive_input_ids"]
        if self.one_forward and a_ids.shape == p_ids.shape:
            # One pass over [anchors; positives]: each row still gets its own dropout mask, as in two passes.
            both = embed(model, torch.cat([a_ids, p_ids]),
                         torch.cat([batch["anchor_attention_mask"], batch["positive_attention_mask"]]), pooling)  # fmt: skip
            return both[: len(a_ids)], both[len(a_ids) :]
        a = embed(model, batch["anchor_input_ids"], batch["anchor_attention_mask"], pooling)
        p = embed(model, batch["positive_input_ids"], batch["positive_attention_mask"], pooling)
        return a, p

    def loss(self, model: torch.nn.Module, batch: dict[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        a, p = self.embed_pair(model, batch)
        return info_nce(a, p, getattr(self.config, "temperature", 0.05)), {}



# ------------------------------------------------------------------------------- anchor choice
ANCHOR_MODES = ("first", "random", "whole")


def choose_anchor(text: str, mode: str, rng: random.Random) -> tuple[str, str]:
    """(anchor sentence, rest of the document) for LA(SER)^3 / COCO-DR pairs.

    "first": the first sentence (paper main setting; on one-sentence wiki lines it is the whole line);
    "random": a random sentence (paper §5.1 ablation), the rest being the other sentences in order;
    "whole": the whole text, no rest (self-reference on line-per-sentence corpora without splitting).
    """
    from bench.data.sentences import split_sentences

    if mode == "whole":
        return " ".join(text.split()), ""
    sentences = split_sentences(text)
    if not sentences:
        return "", ""
    i = 0 if mode == "first" else rng.randrange(len(sentences))
    return sentences[i], " ".join(sentences[:i] + sentences[i + 1 :])


def anchor_strings(text: str, mode: str) -> list[str]:
    """Every anchor `choose_anchor(text, mode, rng)` can return, whatever the draw."""
    from bench.data.sentences import split_sentences

    if mode == "whole":
        return [" ".join(text.split())]
    sentences = split_sentences(text)
    return sentences[:1] if mode == "first" else sentences
