"""LA(SER)^3 (shared/papers/000 §4, SPEC §2): length-agnostic self-reference.

* `laser3-self` (alias `laser3`): anchor = the text's first sentence (a one-sentence wiki line: the whole line);
  positive = the anchor elongated m times, f(S, m) = S repeated m times.
* `laser3-intra`: anchor = the first sentence elongated m times; positive = the rest of the document.

m is drawn per input: n = the anchor's token count without special tokens, m ~ U{1, ..., max(1, floor((max_len-2)/n))}
(10 tokens at max_len 256 -> 1..25; 50 tokens -> 1..5), so the copies always fit in max_len. Elongation is done on
token ids: [CLS] + ids*m + [SEP] is exactly the tokenisation of the m copies joined with a space (WordPiece splits on
whitespace first), and cannot exceed max_len. Ablations (paper §5): fixed m = 2 ("twice", clamped to what fits),
random instead of first sentence as anchor, max_len 64/128/256 (the run's --max-len).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from bench.evaluate.attacks import max_m, sample_m
from bench.encode.pooling import POOLINGS
from bench.train.hparams import hp
from bench.train.method import MethodSpec
from methods.pairs import ANCHOR_MODES, Pair, PairContrastiveAdapter, anchor_strings, choose_anchor

M_MODES = ("random", "twice", "none")
PAPER = (
    "Xiao, Li, Hudson, Lin & Al Moubayed 2023, Length is a Curse and a Blessing for Document-level Semantics "
    "(EMNLP 2023): LA(SER)^3, length-agnostic self-reference"
)


@dataclass
class Laser3Config:
    temperature: float = hp(0.05, gt=0)
    pooling: str = hp("mean", choices=POOLINGS)  # paper: mean pooling (Table 5 also reports [CLS])
    m_mode: str = hp("random", choices=M_MODES)  # "random": m ~ U{1..max_m}; "twice": m = 2; "none": m = 1 (no elongation ablation)
    anchor: str = hp("first", choices=ANCHOR_MODES)  # "first" (paper main), "random" (§5.1 ablation), "whole" (no sentence split)

    def __post_init__(self) -> None:
        if self.m_mode not in M_MODES:
            raise ValueError(f"laser3: m_mode {self.m_mode!r} is not one of {M_MODES}")
        if self.anchor not in ANCHOR_MODES:
            raise ValueError(f"laser3: anchor {self.anchor!r} is not one of {ANCHOR_MODES}")


class _Laser3Base(PairContrastiveAdapter):
    def elongation_factor(self, n_tokens: int, rng: random.Random) -> int:
        """m for an anchor of n tokens (special tokens excluded); never makes the copies exceed max_len."""
        if self.config.m_mode == "random":
            return sample_m(n_tokens, self.max_len, rng)
        if self.config.m_mode == "twice":
            return min(2, max_m(n_tokens, self.max_len))
        return 1

    def elongated(self, body: list[int], rng: random.Random) -> tuple[list[int], int]:
        m = self.elongation_factor(len(body), rng)
        return self.tokens.wrap(body * m), m


class Laser3SelfAdapter(_Laser3Base):
    name = "laser3-self"
    splits_sentences = property(lambda self: self.config.anchor != "whole")

    def fixed_strings(self, text: str) -> list[str]:
        return anchor_strings(text, self.config.anchor)

    def text_pair(self, text: str, rng: random.Random) -> tuple[str, str | None] | None:
        return choose_anchor(text, self.config.anchor, rng)[0], None

    def finish_pair(self, anchor: list[int], positive: list[int] | None, rng: random.Random) -> Pair | None:
        if not anchor:
            return None
        elongated, _ = self.elongated(anchor, rng)
        return self.tokens.wrap(anchor), elongated


class Laser3IntraAdapter(_Laser3Base):
    name = "laser3-intra"
    splits_sentences = True

    def accepts(self, text: str) -> bool:
        """Intra-reference needs a rest of the document: one-sentence texts are skipped."""
        from bench.data.sentences import split_sentences

        return len(split_sentences(text)) >= 2

    def fixed_strings(self, text: str) -> list[str]:
        if self.config.anchor != "first":  # a random anchor's rest depends on the draw: tokenised when drawn
            return anchor_strings(text, self.config.anchor)
        return [s for s in choose_anchor(text, "first", None) if s]  # type: ignore[arg-type]

    def text_pair(self, text: str, rng: random.Random) -> tuple[str, str | None] | None:
        return choose_anchor(text, self.config.anchor, rng)

    def finish_pair(self, anchor: list[int], positive: list[int] | None, rng: random.Random) -> Pair | None:
        if not anchor or not positive:
            return None
        elongated_anchor, _ = self.elongated(anchor, rng)
        return elongated_anchor, self.tokens.wrap(positive)


SPEC_SELF = MethodSpec(
    cite=("xiao2023length",),
    name="laser3-self",
    paper=PAPER,
    summary="anchor = first sentence; positive = anchor elongated m times, m ~ U{1..(max_len-2)//n}; "
    "InfoNCE t=0.05, mean pooling (paper: lr 3e-5, bs 64, max_len 256, 1 epoch)",
    config_cls=Laser3Config,
    factory=Laser3SelfAdapter,
    aliases=("laser3",),
)
SPEC_INTRA = MethodSpec(
    cite=("xiao2023length",),
    name="laser3-intra",
    paper=PAPER,
    summary="anchor = first sentence elongated m times; positive = the rest of the document (msmarco setting)",
    config_cls=Laser3Config,
    factory=Laser3IntraAdapter,
)
