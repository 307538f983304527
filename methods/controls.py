"""Control methods: trivial augmentations that keep a treatment's anchor, loss and budget and change only the positive.

A paper's gain over a reference row says the method differs from that row; it does not say the method's idea made the
difference. A control answers that: it is trained exactly like the treatment (the shared trainer, the same corpus,
batch, max_len, lr, temperature, budget and seed) with a positive that lacks the idea. If the control gains as much as
the treatment, the gain came from what both share (contrastive training on this corpus, in-batch negatives, a change
of length), not from the idea. The claim files in `claims/` name which control tests which claim.

* `delete-words`: positive = the anchor with each word deleted with probability p (0.1; at least one word kept). Tests
  LA(SER)^3 (an augmentation that changes the text without self-reference) and SimCSE ("dropout beats discrete
  augmentations such as word deletion").
* `random-span`: positive = the anchor with a span of random vocabulary words inserted at a random word boundary (or
  appended), as long as LA(SER)^3's elongation would have made it: m is drawn as laser3-self draws it and the span
  holds n * (m - 1) random words, so the positive's length follows elongation's distribution exactly, without any
  self-reference. Tests LA(SER)^3's "self-reference with elongation", beyond a mere change of length.
* `identity`: positive = the anchor itself with dropout off: the pair is identical, so the loss is only the in-batch
  negatives pushing texts apart (uniformity without alignment). Tests SimCSE ("dropout is a minimal augmentation that
  works"): SimCSE's own "no dropout" ablation, which `simcse --hp dropout=0` refuses.
* `eda-positive`: positive = EDA synonym replacement of the anchor (rate 0.1, WordNet), contrastive. Tests PaSeR
  ("a generative objective beats a contrastive one"): its own data augmentation without the generative objective.

All four take the anchor as laser3-self does (`anchor`: first sentence by default, or a random one, or the whole text).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import torch

from bench.encode.pooling import POOLINGS
from bench.evaluate.attacks import sample_m
from bench.train.hparams import hp
from bench.train.method import MethodSpec
from methods.losses import info_nce
from methods.pairs import ANCHOR_MODES, Pair, PairContrastiveAdapter, anchor_strings, choose_anchor, embed

PAPER = "control (lenbench): a trivial augmentation with the treatment's anchor, loss and budget"


@dataclass
class ControlConfig:
    temperature: float = hp(0.05, gt=0)
    pooling: str = hp("mean", choices=POOLINGS)
    anchor: str = hp("first", choices=ANCHOR_MODES)  # laser3-self's anchor: the first sentence

    def __post_init__(self) -> None:
        if self.anchor not in ANCHOR_MODES:
            raise ValueError(f"control: anchor {self.anchor!r} is not one of {ANCHOR_MODES}")


@dataclass
class DeleteWordsConfig(ControlConfig):
    p: float = hp(0.1, gt=0, lt=1)  # each word deleted with this probability


@dataclass
class RandomSpanConfig(ControlConfig):
    where: str = hp("random", choices=("random", "end"))  # the span inserted at a random word boundary, or appended


@dataclass
class EdaPositiveConfig(ControlConfig):
    rate: float = hp(0.1, gt=0, le=1)  # EDA's alpha: the share of words replaced by a synonym

    def __post_init__(self) -> None:
        from methods import eda

        super().__post_init__()
        # Here, not when the adapter is built: `bench run` validates every method's config before it loads or trains
        # anything, so a missing WordNet is its one error line instead of a failure after the other methods trained.
        eda.require_wordnet("eda-positive")


class _AnchorControl(PairContrastiveAdapter):
    """The anchor as laser3-self takes it; subclasses say what the positive is."""

    splits_sentences = property(lambda self: self.config.anchor != "whole")

    def fixed_strings(self, text: str) -> list[str]:
        return anchor_strings(text, self.config.anchor)

    def anchor_of(self, text: str, rng: random.Random) -> str:
        return choose_anchor(text, self.config.anchor, rng)[0]


class DeleteWordsAdapter(_AnchorControl):
    name = "delete-words"

    def text_pair(self, text: str, rng: random.Random) -> tuple[str, str | None] | None:
        anchor = self.anchor_of(text, rng)
        words = anchor.split()
        if not words:
            return None
        kept = [w for w in words if rng.random() >= self.config.p] or [words[rng.randrange(len(words))]]
        return anchor, " ".join(kept)


class RandomSpanAdapter(_AnchorControl):
    name = "random-span"

    def __init__(self, config: Any, *, tokenizer: Any, max_len: int, seed: int = 0):
        super().__init__(config, tokenizer=tokenizer, max_len=max_len, seed=seed)
        vocab = tokenizer.get_vocab()
        special = set(getattr(tokenizer, "all_special_tokens", []))
        # Whole words of the vocabulary (no "##" continuation, no [unused], letters only): what a random word is.
        self.words = sorted(i for t, i in vocab.items() if t.isalpha() and t not in special)
        self.continuation = {i for t, i in vocab.items() if t.startswith("##")}
        if not self.words:
            raise ValueError("random-span: the tokenizer's vocabulary has no whole-word tokens to draw from")

    def text_pair(self, text: str, rng: random.Random) -> tuple[str, str | None] | None:
        return self.anchor_of(text, rng), None

    def finish_pair(self, anchor: list[int], positive: list[int] | None, rng: random.Random) -> Pair | None:
        if not anchor:
            return None
        m = sample_m(len(anchor), self.max_len, rng)  # laser3-self's length: n * m tokens in all
        span = [rng.choice(self.words) for _ in range(len(anchor) * (m - 1))]
        if self.config.where == "end":
            at = len(anchor)
        else:
            bounds = [i for i in range(len(anchor) + 1) if i == len(anchor) or anchor[i] not in self.continuation]
            at = rng.choice(bounds)
        return self.tokens.wrap(anchor), self.tokens.wrap(anchor[:at] + span + anchor[at:])


class IdentityAdapter(_AnchorControl):
    """The positive is the anchor and dropout is off: one forward pass, InfoNCE of each embedding with itself."""

    name = "identity"

    def setup(self, model: torch.nn.Module) -> list[torch.nn.Module]:
        from methods.simcse import set_dropout

        set_dropout(model, 0.0)  # no augmentation at all, not even dropout's
        return []

    def text_pair(self, text: str, rng: random.Random) -> tuple[str, str | None] | None:
        return self.anchor_of(text, rng), None

    def loss(self, model: torch.nn.Module, batch: dict[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        a = embed(model, batch["anchor_input_ids"], batch["anchor_attention_mask"], self.config.pooling)
        return info_nce(a, a, self.config.temperature), {}


class EdaPositiveAdapter(_AnchorControl):
    name = "eda-positive"

    def __init__(self, config: Any, *, tokenizer: Any, max_len: int, seed: int = 0):
        from methods import eda

        super().__init__(config, tokenizer=tokenizer, max_len=max_len, seed=seed)
        self.wordnet = eda.load_wordnet(str(eda.require_wordnet("eda-positive")))

    def text_pair(self, text: str, rng: random.Random) -> tuple[str, str | None] | None:
        from methods import eda
        from methods.rake import split_words

        anchor = self.anchor_of(text, rng)
        words = split_words(anchor)
        if not words:
            return None
        replaced = eda.synonym_replacement(words, rng, self.wordnet, self.config.rate)
        return anchor, " ".join(w for w, _, _ in replaced)


def _spec(name: str, summary: str, claim: str, config_cls: type, factory: Any, cite: tuple[str, ...]) -> MethodSpec:
    # a control cites the paper whose claim it tests (and what its positive is made with)
    return MethodSpec(name=name, paper=PAPER, summary=summary, config_cls=config_cls, factory=factory, control=True,
                      claim=claim, cite=cite)  # fmt: skip


SPEC_DELETE = _spec(
    "delete-words", "anchor = first sentence; positive = the anchor with each word deleted (p = 0.1); InfoNCE t=0.05",
    "LA(SER)^3: a positive that changes the text without self-reference; SimCSE: dropout beats word deletion",
    DeleteWordsConfig, DeleteWordsAdapter, ("xiao2023length", "gao2021simcse"),
)
SPEC_SPAN = _spec(
    "random-span", "anchor = first sentence; positive = the anchor with n*(m-1) random words inserted, m drawn as "
    "laser3-self's elongation (the same length, no self-reference); InfoNCE t=0.05",
    "LA(SER)^3: elongation by self-reference, beyond a change of length", RandomSpanConfig, RandomSpanAdapter,
    ("xiao2023length",),
)
SPEC_IDENTITY = _spec(
    "identity", "anchor = first sentence; positive = the anchor itself, dropout off: only the in-batch negatives",
    "SimCSE: dropout is a minimal augmentation that works (no augmentation at all)", ControlConfig, IdentityAdapter,
    ("gao2021simcse",),
)
SPEC_EDA = _spec(
    "eda-positive", "anchor = first sentence; positive = EDA synonym replacement of it (rate 0.1, WordNet); "
    "InfoNCE t=0.05", "PaSeR: its generative objective beats contrastive training on its own augmentation",
    EdaPositiveConfig, EdaPositiveAdapter, ("wu2022paser", "wei2019eda", "miller1995wordnet"),
)
SPECS = [SPEC_DELETE, SPEC_SPAN, SPEC_IDENTITY, SPEC_EDA]
