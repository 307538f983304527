"""The adapter of the small method contract (`lenbench.contrastive`, bench.train.positives): the anchor is the text,
the positive what the author's function returns for it, trained with the pair methods' in-batch InfoNCE.

The function sees a whole batch of texts at once (or, with per_text=True, each text; the adapter batches it), and
the batch's anchors and positives are tokenised in one tokenizer call (the anchors once per corpus: `fixed_strings`).
`temperature` and `pooling` are the config's when it declares them (then tunable with --hp), else 0.05 and mean.
"""

from __future__ import annotations

import random
from typing import Any

from bench.train.positives import PositivesContract
from methods.pairs import Pair, PairContrastiveAdapter


class PositivesAdapter(PairContrastiveAdapter):
    def __init__(self, config: Any, *, contract: PositivesContract, name: str, tokenizer: Any, max_len: int,
                 seed: int = 0):  # fmt: skip
        self.name = name
        self.contract = contract
        self.where = contract.where  # the trainer names it when no draw gives a batch
        super().__init__(config, tokenizer=tokenizer, max_len=max_len, seed=seed)

    def fixed_strings(self, text: str) -> list[str]:
        return [text]  # the anchor: tokenised once per corpus

    def pairs(self, texts: list[str], rng: random.Random) -> list[Pair | None]:
        texts = [t for t in texts if t and t.strip()]
        positives = self.contract.call(texts, self.config, rng)
        used = [(t, p) for t, p in zip(texts, positives) if p is not None and p.strip()]
        bodies = iter(self.tokens.bodies([s for pair in used for s in pair]))
        out: list[Pair | None] = []
        for p in positives:
            if p is None or not p.strip():
                out.append(None)
                continue
            anchor, positive = next(bodies), next(bodies)
            out.append(self.finish_pair(anchor, positive, rng))
        return out
