"""`cocodr-pt`: the intra-reference baseline of LA(SER)^3 (shared/papers/000 §4 "Baselines"): anchor = the first
(or a random) sentence of a document, not elongated; positive = the rest of the document. It is the unsupervised
pre-training part of COCO-DR (Yu et al. 2022), with "one sentence vs the rest" instead of two sentences.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from methods.base import MethodSpec
from methods.pairs import ANCHOR_MODES, Pair, PairContrastiveAdapter, choose_anchor
from methods.registry import register


@dataclass
class CocodrConfig:
    temperature: float = 0.05
    pooling: str = "mean"
    anchor: str = "first"  # "first" (paper main) or "random" (§5.1 ablation)

    def __post_init__(self) -> None:
        if self.anchor not in ANCHOR_MODES or self.anchor == "whole":
            raise ValueError(f"cocodr-pt: anchor {self.anchor!r} must be 'first' or 'random'")


class CocodrAdapter(PairContrastiveAdapter):
    name = "cocodr-pt"

    def accepts(self, text: str) -> bool:
        from bench.train.sentences import split_sentences

        return len(split_sentences(text)) >= 2

    def make_pair(self, text: str, rng: random.Random) -> Pair | None:
        anchor, rest = choose_anchor(text, self.config.anchor, rng)
        body, rest_body = self.tokens.body(anchor), self.tokens.body(rest)
        if not body or not rest_body:
            return None
        return self.tokens.wrap(body), self.tokens.wrap(rest_body)


SPEC = register(
    MethodSpec(
        name="cocodr-pt",
        paper="Yu et al. 2022, COCO-DR (EMNLP), unsupervised pre-training part, as the intra-reference baseline "
        "of LA(SER)^3 (shared/papers/000)",
        summary="anchor = first sentence; positive = the rest of the document; InfoNCE t=0.05, mean pooling",
        config_cls=CocodrConfig,
        factory=CocodrAdapter,
    )
)
