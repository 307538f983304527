"""`@upper`: a third-party lenbench attack used by the plugin test: every text upper-cased (variant `upper`), or
only its first N words (`upper-N`), cut at max_len."""

from __future__ import annotations

from dataclasses import dataclass

from bench.evaluate.attacks import SPECIAL_TOKENS_BERT, Attack, AttackFamily
from bench.evaluate.attacks.base import cut_at_budget


def upper(text: str, words: int | None) -> str:
    parts = text.split(" ")
    n = len(parts) if words is None else words
    return " ".join([p.upper() for p in parts[:n]] + parts[n:])


@dataclass(frozen=True)
class UpperAttack(Attack):
    words: int | None = None

    def apply(self, texts, tokenizer, max_len, rng, where):
        return cut_at_budget([upper(t, self.words) for t in texts], tokenizer, max_len - SPECIAL_TOKENS_BERT)[0]

    def apply_words(self, texts, max_len, rng, where):
        return [upper(t, self.words) for t in texts]


def make(param: str) -> UpperAttack:
    if param == "":
        return UpperAttack(name="upper", family="upper", param="", x=None, order=0)
    return UpperAttack(name=f"upper-{param}", family="upper", param=param, x=float(int(param)), order=int(param),
                       words=int(param))


FAMILY = AttackFamily(name="upper", summary="texts upper-cased", axis="words upper-cased", defaults=("", "2"),
                      make=make, order=50)
