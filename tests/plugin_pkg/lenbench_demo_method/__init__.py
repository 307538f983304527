"""`demo-shuffle`: a third-party lenbench method used by the plugin test.

Positive pair = the text and the text with its words shuffled; InfoNCE with in-batch negatives through the shared
pair adapter. `nan_at_step` (0 = never) makes the loss NaN at that step, to test the harness's divergence stop.
The entry point names `specs`, a zero-argument callable returning the MethodSpec(s) to register.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from bench.train.method import MethodSpec
from methods.pairs import PairContrastiveAdapter


@dataclass
class DemoConfig:
    temperature: float = 0.05
    pooling: str = "mean"
    nan_at_step: int = 0


class DemoShuffleAdapter(PairContrastiveAdapter):
    name = "demo-shuffle"

    def __init__(self, config, **kwargs):
        super().__init__(config, **kwargs)
        self.calls = 0

    def make_pair(self, text: str, rng: random.Random):
        words = text.split()
        shuffled = words[:]
        rng.shuffle(shuffled)
        a, p = self.tokens.body(" ".join(words)), self.tokens.body(" ".join(shuffled))
        if not a or not p:
            return None
        return self.tokens.wrap(a), self.tokens.wrap(p)

    def loss(self, model, batch):
        self.calls += 1
        loss, logs = super().loss(model, batch)
        if self.config.nan_at_step and self.calls == self.config.nan_at_step:
            loss = loss * float("nan")
        return loss, logs


def specs() -> list[MethodSpec]:
    return [
        MethodSpec(
            name="demo-shuffle",
            paper="(test fixture) word-shuffle augmentation",
            summary="text vs its words shuffled; InfoNCE t=0.05, mean pooling",
            config_cls=DemoConfig,
            factory=lambda config, *, tokenizer, max_len, seed=0, **_: DemoShuffleAdapter(
                config, tokenizer=tokenizer, max_len=max_len, seed=seed
            ),
        )
    ]
