"""The one variant loop every suite runs: clean, then each attack the context asks for.

    for variant in variant_loop(model, ctx, measured=texts, pool=lambda seed: Distractors.build(texts, seed)):
        attacked = variant.texts(texts, salt=f"{dataset}|{variant.name}")
        ... score attacked ...
        info = variant.info(attacked)

- Seeds: `variant.texts(texts, salt)` draws the attack's randomness from `ctx.rng(salt).getrandbits(32)`; each suite
  keeps the salt it always used (sts `{dataset}|{variant}|1` and `|2`, retrieval `{dataset}|{variant}|docs`, knn
  `{dataset}|{variant}`, diag `diag|{variant}|1`/`2`, mteb `mteb|{dataset}|{variant}`), so stored elong scores
  are reproduced exactly.
- Form: a model with a tokenizer gets the token-aware attack (within its max_len); a lexical model (BM25, no
  tokenizer) and an object scored through its own encode (no tokenizer lenbench can see) the word-level one.
- Memory: above `LAZY_ATTACK_DOCS` texts (a lexical model: its `chunk_docs`) the attacked texts are computed chunk
  by chunk as they are read (`AttackedTexts`: the same texts), so a large corpus is never held attacked.
- Distractors: `pool(seed)` builds the sentences padding draws from, once per dataset, only when a variant needs it.
- What changed: `variant.info(attacked)` is the attack meter's Score.info (changed and truncated fractions; the
  clean variant carries the truncated fraction), None when the loop does not measure (a clean-only run).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from bench.evaluate.attacks import CLEAN, Attack, AttackedTexts, AttackInput, AttackMeter, Distractors, apply_attack
from bench.evaluate.suites.base import EvalContext

LAZY_ATTACK_DOCS = 50_000  # above this, attacked texts are computed chunk by chunk (twice: meter and encoder)
POOL_SALT = "distractors"


def is_word_level(model: Any) -> bool:
    """A model without embeddings reads whole texts (BM25), and one whose tokens lenbench cannot see (an object's own
    encode: bench.encode.opaque, `word_level`) is attacked word by word. (An encoder's tokenizer is not touched here:
    a clean run over cached texts must not load it.)"""
    return not callable(getattr(model, "encode", None)) or getattr(model, "word_level", False) is True


def attack_with(model: Any, attack: Attack, texts: Sequence, seed: int, pool: Distractors | None = None) -> Sequence:
    """`texts` attacked for `model`: word-level for a lexical model, else token-aware within its max_len; lazily
    (chunk by chunk on access) above LAZY_ATTACK_DOCS texts (a lexical model: above its `chunk_docs`)."""
    words = is_word_level(model)
    lazy_above = getattr(model, "chunk_docs", LAZY_ATTACK_DOCS) if words else LAZY_ATTACK_DOCS
    tokenizer = None if words else model.tokenizer
    if len(texts) > lazy_above:
        where = AttackInput(pool=pool)
        return AttackedTexts(texts, None, tokenizer, model.max_len, seed, attack=attack, where=where, words=words)
    return apply_attack(attack, texts, tokenizer, model.max_len, seed, pool=pool, words=words)


@dataclass
class Variant:
    """One variant of one dataset: clean (`attack` None) or an attack."""

    name: str
    attack: Attack | None
    loop: VariantLoop

    @property
    def clean(self) -> bool:
        return self.attack is None

    def seed(self, salt: str) -> int:
        return self.loop.ctx.rng(salt).getrandbits(32)

    def texts(self, texts: Sequence, salt: str) -> Sequence:
        """`texts` as this variant shows them (clean: unchanged), the attack's randomness seeded by `salt`."""
        if self.attack is None:
            return texts
        pool = self.loop.pool() if self.attack.needs_pool else None
        return attack_with(self.loop.model, self.attack, texts, self.seed(salt), pool)

    def info(self, attacked: Sequence | None = None) -> dict | None:
        """Score.info: what the attack changed of the measured texts (`attacked`: them, attacked, in order)."""
        meter = self.loop.meter
        if meter is None:
            return None
        if self.attack is None:
            return meter.clean_info()
        return meter.measure(attacked).info()


class VariantLoop:
    """The variants of one dataset (see the module doc); iterate it."""

    def __init__(self, model: Any, ctx: EvalContext, measured: Sequence | None = None,
                 pool: Callable[[int], Distractors] | None = None, attacks: list[Attack] | None = None,
                 measure: bool | None = None, dataset: str = ""):  # fmt: skip
        self.model, self.ctx, self.dataset = model, ctx, dataset
        self.attacks = ctx.attacks() if attacks is None else attacks
        if measure is None:  # a clean-only run skips the meter: a warm cache then needs no tokenizer
            measure = bool(self.attacks)
        self.meter = None
        if measure and measured is not None:
            self.meter = AttackMeter(measured, None if is_word_level(model) else model.tokenizer, model.max_len)
        self._pool_factory = pool
        self._pool: Distractors | None = None

    def pool(self) -> Distractors:
        if self._pool is None:
            if self._pool_factory is None:
                raise ValueError("this suite gives padding attacks no distractor sentences")
            self._pool = self._pool_factory(self.ctx.rng(f"{self.dataset}|{POOL_SALT}").getrandbits(32))
        return self._pool

    @property
    def names(self) -> list[str]:
        return [CLEAN] + [a.name for a in self.attacks]

    def __iter__(self) -> Iterator[Variant]:
        yield Variant(CLEAN, None, self)
        for attack in self.attacks:
            yield Variant(attack.name, attack, self)


def variant_loop(model: Any, ctx: EvalContext, measured: Sequence | None = None,
                 pool: Callable[[int], Distractors] | None = None, attacks: list[Attack] | None = None,
                 measure: bool | None = None, dataset: str = "") -> VariantLoop:  # fmt: skip
    """`dataset` seeds the distractor pool (`{dataset}|distractors`)."""
    return VariantLoop(model, ctx, measured, pool, attacks, measure, dataset)
