"""`vanilla`: no training at all, the backbone evaluated as it is (the 'untrained' row of every comparison)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bench.encode.pooling import POOLINGS
from bench.train.hparams import hp
from bench.train.method import BaseAdapter, MethodSpec


@dataclass
class VanillaConfig:
    pooling: str = hp("mean", choices=POOLINGS)  # SPEC §1: mean pooling at evaluation unless the run says otherwise


class VanillaAdapter(BaseAdapter):
    """Never trained; exists so `get_method('vanilla').build()` works like any other method."""

    name = "vanilla"

    def __init__(self, config: VanillaConfig, **_: Any):
        self.config = config

    def make_batch(self, texts, rng):  # noqa: ANN001
        return None

    def loss(self, model, batch):  # noqa: ANN001
        raise RuntimeError("vanilla does not train")


SPEC = MethodSpec(
    cite=("lenbench",),
    name="vanilla",
    paper="none: the backbone checkpoint without training (the reference row of every comparison)",
    summary="no training: the backbone checkpoint as it is, mean pooling",
    config_cls=VanillaConfig,
    factory=lambda config, **kw: VanillaAdapter(config, **kw),
    trains=False,
    aliases=("untrained",),
)
