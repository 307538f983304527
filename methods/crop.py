"""`crop`: crop-based self-supervision (shared/papers/003 §3): split a text into sentences, discard sentences under
100 or over 250 characters, form every chunk of t = 2 consecutive (kept) sentences, and sample two distinct chunks
as anchor and positive (they may overlap, never coincide). A text with fewer than two chunks gives no pair and is
skipped. Paper: Adam lr 2e-5 with linear warm-up + decay, bs 64, t 0.05, mean pooling, one epoch (the shared
trainer's lr is the comparison's; pass --lr 2e-5 to match the paper alone).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from bench.encode.pooling import POOLINGS
from bench.train.hparams import hp
from bench.train.method import MethodSpec
from methods.pairs import PairContrastiveAdapter


@dataclass
class CropConfig:
    temperature: float = hp(0.05, gt=0)
    pooling: str = hp("mean", choices=POOLINGS)
    min_chars: int = hp(100, ge=0)  # sentences shorter than this are discarded
    max_chars: int = hp(250, ge=1)  # sentences longer than this are discarded
    chunk_sentences: int = hp(2, ge=1)  # t (Figure S2b: t = 2 is the best)

    def __post_init__(self) -> None:
        if self.chunk_sentences < 1 or self.min_chars > self.max_chars:
            raise ValueError("crop: chunk_sentences must be >= 1 and min_chars <= max_chars")


def kept_sentences(text: str, min_chars: int, max_chars: int) -> list[str]:
    from bench.data.sentences import split_sentences

    return [s for s in split_sentences(text) if min_chars <= len(s) <= max_chars]


def chunks(sentences: list[str], t: int) -> list[str]:
    """Every run of t consecutive sentences, joined with a space."""
    return [" ".join(sentences[i : i + t]) for i in range(len(sentences) - t + 1)]


class CropAdapter(PairContrastiveAdapter):
    name = "crop"
    splits_sentences = True

    def text_chunks(self, text: str) -> list[str]:
        c = self.config
        return chunks(kept_sentences(text, c.min_chars, c.max_chars), c.chunk_sentences)

    def fixed_strings(self, text: str) -> list[str]:
        return self.text_chunks(text)

    def accepts(self, text: str) -> bool:
        return len(self.text_chunks(text)) >= 2

    def text_pair(self, text: str, rng: random.Random) -> tuple[str, str | None] | None:
        candidates = self.text_chunks(text)
        if len(candidates) < 2:
            return None
        i, j = rng.sample(range(len(candidates)), 2)  # two distinct chunks
        return candidates[i], candidates[j]


SPEC = MethodSpec(
    cite=("anonymous2024crop",),
    name="crop",
    paper="Is Self-Supervision Enough for Training Sentence Embeddings? (anonymous ICLR submission under "
    "double-blind review, OpenReview), crop-based self-supervision",
    summary="two distinct chunks of 2 consecutive sentences (sentences <100 or >250 chars dropped); "
    "InfoNCE t=0.05, mean pooling (paper: Adam lr 2e-5, bs 64, 1 epoch)",
    config_cls=CropConfig,
    factory=CropAdapter,
)
