"""`simcse`: unsupervised SimCSE (Gao et al. 2021; SPEC §2; minBERT paper 002 §5.3): the same text encoded twice,
the two dropout masks (p = 0.1) make the positive pair; InfoNCE with in-batch negatives, t = 0.05.

The original trains with [CLS]+MLP pooling at max_len 32; here pooling is mean (SPEC §1: the evaluation pooling)
unless configured, and max_len is the comparison's shared one. Both views go through one forward pass over the
concatenated 2B rows (the original implementation's layout; about half the CPU time of two passes); dropout masks
are drawn per row, so the pair still differs.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from bench.encode.pooling import POOLINGS
from bench.train.hparams import hp
from bench.train.method import MethodSpec
from methods.pairs import ANCHOR_MODES, PairContrastiveAdapter, anchor_strings, choose_anchor


@dataclass
class SimcseConfig:
    temperature: float = hp(0.05, gt=0)
    pooling: str = hp("mean", choices=POOLINGS)
    dropout: float = hp(0.1, gt=0, lt=1)  # the augmentation itself: every dropout layer of the encoder is set to this p
    # Which text is duplicated: "whole" = the training text as it is (SimCSE); "first"/"random" = one sentence
    # of it, which makes simcse exactly laser3-self without the elongation (paper 000, Table 2 note).
    text: str = hp("whole", choices=ANCHOR_MODES)

    def __post_init__(self) -> None:
        if not 0.0 < self.dropout < 1.0:
            raise ValueError(f"simcse: dropout must be in (0, 1) - it is the augmentation; got {self.dropout}")
        if self.text not in ANCHOR_MODES:
            raise ValueError(f"simcse: text {self.text!r} is not one of {ANCHOR_MODES}")


def set_dropout(model: torch.nn.Module, p: float) -> int:
    """Set every dropout layer to p (BERT's attention reads its p from its Dropout module); returns how many."""
    n = 0
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = p
            n += 1
    return n


class SimcseAdapter(PairContrastiveAdapter):
    name = "simcse"
    one_forward = True  # the two views are the same ids: one forward over the concatenated 2B batch

    def setup(self, model: torch.nn.Module) -> list[torch.nn.Module]:
        if set_dropout(model, self.config.dropout) == 0:
            raise ValueError("simcse: the backbone has no dropout layer; dropout is SimCSE's augmentation")
        return []

    splits_sentences = property(lambda self: self.config.text != "whole")

    def fixed_strings(self, text: str) -> list[str]:
        return [text] if self.config.text == "whole" else anchor_strings(text, self.config.text)

    def text_pair(self, text: str, rng: random.Random) -> tuple[str, str | None] | None:
        sentence = text if self.config.text == "whole" else choose_anchor(text, self.config.text, rng)[0]
        return sentence, None  # the same token ids twice; dropout (model in train mode) makes them differ


SPEC = MethodSpec(
    cite=("gao2021simcse", "zhang2023minbertsimcse"),
    name="simcse",
    paper="Gao, Yao & Chen 2021, SimCSE: Simple Contrastive Learning of Sentence Embeddings (EMNLP 2021); the "
    "self-reference baseline of Xiao et al. 2023 (LA(SER)^3)",
    summary="same text twice, dropout p=0.1 makes the pair; InfoNCE t=0.05, in-batch negatives",
    config_cls=SimcseConfig,
    factory=SimcseAdapter,
)
