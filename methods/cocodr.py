"""`cocodr-pt`: the intra-reference baseline of LA(SER)^3 (shared/papers/000 §4 "Baselines"): anchor = the first
(or a random) sentence of a document, not elongated; positive = the rest of the document. It is the unsupervised
pre-training part of COCO-DR (Yu et al. 2022), with "one sentence vs the rest" instead of two sentences.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from bench.encode.pooling import POOLINGS
from bench.train.hparams import hp
from bench.train.method import MethodSpec
from methods.laser3 import Laser3IntraAdapter
from methods.pairs import ANCHOR_MODES


@dataclass
class CocodrConfig:
    temperature: float = hp(0.05, gt=0)
    pooling: str = hp("mean", choices=POOLINGS)
    anchor: str = "first"  # "first" (paper main) or "random" (§5.1 ablation)

    def __post_init__(self) -> None:
        if self.anchor not in ANCHOR_MODES or self.anchor == "whole":
            raise ValueError(f"cocodr-pt: anchor {self.anchor!r} must be 'first' or 'random'")


class CocodrAdapter(Laser3IntraAdapter):
    """LA(SER)^3's intra-reference pairs without the elongation: anchor = first sentence, positive = the rest."""

    name = "cocodr-pt"

    def elongation_factor(self, n_tokens: int, rng: random.Random) -> int:
        return 1


SPEC = MethodSpec(
    cite=("yu2022cocodr",),
    name="cocodr-pt",
    paper="Yu, Xiong, Sun, Zhang & Overwijk 2022, COCO-DR: Combating Distribution Shifts in Zero-Shot Dense "
    "Retrieval with Contrastive and Distributionally Robust Learning (EMNLP 2022), its contrastive pre-training "
    "part; the intra-reference baseline of Xiao et al. 2023 (LA(SER)^3)",
    summary="anchor = first sentence; positive = the rest of the document; InfoNCE t=0.05, mean pooling",
    config_cls=CocodrConfig,
    factory=CocodrAdapter,
)
