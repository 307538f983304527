"""Evaluation during training (learning curves): the hook the caller passes in, and the isolation the trainer runs it
under so training is exactly what it would be without it."""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from bench.runtime.errors import ConfigError


@dataclass
class EvalHook:
    """Evaluation during training (learning curves): `evaluate(model, tokenizer, step)` is called after steps every,
    2 * every, ... and after the last step. The trainer knows nothing of what it does (the command builds it from
    bench.evaluate); it runs it isolated, so training is exactly what it would be without it: in eval mode under
    no_grad, with every RNG (python, numpy, torch, CUDA) saved before and restored after, train mode restored, and
    its wall time left out of the run's consumed seconds (a seconds budget buys the same training). Under several
    processes every rank calls it (the evaluation shards its encoding like the final one)."""

    every: int
    evaluate: Any  # callable(model, tokenizer, step) -> None

    def __post_init__(self) -> None:
        if self.every < 1:
            raise ConfigError(f"--eval-every must be a positive number of steps, got {self.every}")


def run_isolated(hook: EvalHook, model: torch.nn.Module, extra: Sequence[torch.nn.Module], tokenizer: Any, step: int,
                 device: torch.device) -> float:  # fmt: skip
    """Call the hook without disturbing training (see EvalHook); returns the seconds it took."""
    import numpy as np

    start = time.monotonic()
    states = (random.getstate(), np.random.get_state(), torch.get_rng_state(),
              torch.cuda.get_rng_state(device) if device.type == "cuda" else None)  # fmt: skip
    modes = [m.training for m in (model, *extra)]
    try:
        model.eval()
        with torch.no_grad():
            hook.evaluate(model, tokenizer, step)
    finally:
        random.setstate(states[0])
        np.random.set_state(states[1])
        torch.set_rng_state(states[2])
        if states[3] is not None:
            torch.cuda.set_rng_state(states[3], device)
        for m, mode in zip((model, *extra), modes):
            m.train(mode)
    return time.monotonic() - start
