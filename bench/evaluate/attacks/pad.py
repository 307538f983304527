"""`@pad`: distractor padding. Sentences of other items of the same dataset are inserted at the start, in the middle
or at the end of a text until it is m times its own length, then the whole is cut at max_len (Lee, Goel &
Ramchandran 2024 insert irrelevant text the same three ways). Variants `pad-start-M`, `pad-middle-M`, `pad-end-M`
(default m in {2, 4}).

- Length: the distractor block holds (m - 1) * n tokens, n the text's own token count (no special tokens), counted
  up to max_len (more could never be read), cut on a token boundary; the padded text is cut at max_len.
- Position: start = block + text; end = text + block; middle = at the sentence boundary nearest the middle of the
  text (a one-sentence text: the word boundary nearest its middle).
- A text that already fills max_len loses its own content to `pad-start` (changed), keeps its visible part under
  `pad-end` (a no-op, and the attack meter counts it as one), and under `pad-middle` loses what follows its middle.
- Distractors: `Distractors` drawn by the evaluation seed; never the item's own sentences; for retrieval never from a
  document judged relevant to any query (the suite excludes them from the pool).
- Word-level form (BM25): whitespace words stand in for tokens, nothing is cut; a (title, text) document is padded
  in its text field (n counts title and text).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bench.evaluate.attacks.base import (
    SPECIAL_TOKENS_BERT, Attack, AttackFamily, AttackInput, body_of, cut_at_budget, cut_each, token_counts,
    with_body, word_count,
)  # fmt: skip
from bench.evaluate.attacks.elong import MAX_COPIES
from bench.runtime.errors import ConfigError

POSITIONS = ("start", "middle", "end")
_BOUNDARY = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")


def middle_split(text: str) -> int:
    """Character index of the sentence boundary nearest the middle of `text` (else the nearest whitespace; else the
    end)."""
    half = len(text) / 2
    cuts = [m.start() for m in _BOUNDARY.finditer(text)]
    if not cuts:
        cuts = [m.start() for m in re.finditer(r"\s+", text.strip())]
    if not cuts:
        return len(text)
    return min(cuts, key=lambda c: (abs(c - half), c))


def insert(text: str, block: str, position: str) -> str:
    """`block` put into `text` at `position`, joined by single spaces."""
    if not block:
        return text
    if not text.strip():
        return block
    if position == "start":
        return f"{block} {text}"
    if position == "end":
        return f"{text} {block}"
    cut = middle_split(text)
    head, tail = text[:cut].rstrip(), text[cut:].lstrip()
    return " ".join(p for p in (head, block, tail) if p)


@dataclass(frozen=True)
class PadAttack(Attack):
    position: str = "end"
    m: int = 2

    def apply(self, texts, tokenizer, max_len, rng, where: AttackInput) -> list[str]:  # noqa: ANN001
        budget = max_len - SPECIAL_TOKENS_BERT
        texts = list(texts)
        pool = where.pool
        if pool is None:
            raise ValueError(f"attack {self.name!r} needs a distractor pool")
        counts = pool.counts(tokenizer)
        own = token_counts(texts, tokenizer, budget + 1)
        needs = [min((self.m - 1) * n, budget) for n in own]
        blocks = [pool.draw(need, where.owner(j), rng, counts) for j, need in enumerate(needs)]
        blocks = cut_each(blocks, needs, tokenizer, budget)
        padded = [insert(t, b, self.position) for t, b in zip(texts, blocks)]
        return cut_at_budget(padded, tokenizer, budget)[0]

    def apply_words(self, texts, max_len, rng, where: AttackInput) -> list:  # noqa: ANN001
        pool = where.pool
        if pool is None:
            raise ValueError(f"attack {self.name!r} needs a distractor pool")
        counts = pool.counts(None)
        out = []
        for j, text in enumerate(texts):
            need = (self.m - 1) * word_count(text)
            block = " ".join(pool.draw(need, where.owner(j), rng, counts).split()[:need])
            out.append(with_body(text, insert(body_of(text), block, self.position)))
        return out


def make(param: str) -> PadAttack:
    """'start-2' -> pad-start-2."""
    position, _, m = param.rpartition("-")
    if position not in POSITIONS or not (m.isascii() and m.isdigit()) or not 2 <= int(m) <= MAX_COPIES:
        raise ConfigError(f"padding variant {param!r}: use POSITION-M with POSITION in {', '.join(POSITIONS)} and an "
                          f"integer M from 2 to {MAX_COPIES} (e.g. --attack pad=start-2,end-4)")  # fmt: skip
    order = POSITIONS.index(position) * 1000 + int(m)
    return PadAttack(name=f"pad-{param}", family="pad", param=param, x=float(int(m)), order=order, needs_pool=True,
                     position=position, m=int(m))  # fmt: skip


FAMILY = AttackFamily(
    name="pad",
    summary="unrelated sentences of other items inserted at the start, middle or end until the text is m times "
    "its length, cut at max_len",
    axis="m (length factor)",
    defaults=tuple(f"{p}-{m}" for p in POSITIONS for m in (2, 4)),
    cite=("lenbench",),
    make=make,
    order=10,
    ordered=False,  # positions start / middle / end are categories, not points of one axis
    param_help="POSITION-M, POSITION in start, middle, end (e.g. --attack pad=start-2,end-4)",
)
