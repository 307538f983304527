"""`--suite demo-order[:N]`: a third-party lenbench suite used by the plugin test. Each of N built-in sentences is
paired with itself reversed word by word and with an unrelated sentence; the score is the share of sentences (x100)
whose reversed copy is closer than the unrelated one ("order-robust share"), so an encoder that ignores word order
scores 100."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bench.evaluate.suites.metadata import SuiteMeta
from results_db.records import ScoreRecord

SENTENCES = (
    "the cat sleeps on the warm sofa", "stock markets fell sharply on monday", "children play football in the park",
    "the train to paris was delayed again", "a chef slices onions for the soup", "rain is expected over the weekend",
)


@dataclass
class OrderSuite:
    n: int = len(SENTENCES)
    name: str = "demo-order"

    def datasets(self) -> list[str]:
        return [f"toy{self.n}"]

    def evaluate(self, model, dataset, ctx):
        texts = list(SENTENCES[: self.n])
        emb = model.encode(texts + [" ".join(reversed(t.split())) for t in texts])
        own, flipped = emb[: self.n], emb[self.n :]
        other = np.roll(own, 1, axis=0)
        closer = np.einsum("ij,ij->i", own, flipped) > np.einsum("ij,ij->i", own, other)
        return [ScoreRecord(self.name, dataset, "order_robust", 100.0 * float(closer.mean()), n=self.n)]


def make_suite(arg: str | None) -> OrderSuite:
    return OrderSuite(int(arg)) if arg else OrderSuite()


SUITE = SuiteMeta("demo-order", "lenbench_demo_suite:make_suite", "order_robust", "sentences",
                  summary="word-order robustness on six built-in sentences")
