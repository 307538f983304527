"""What a method's `loss()` must return, checked where the trainer receives it: a scalar tensor (0-dimensional)
that carries a gradient. A plug-in that breaks the rule is stopped at its first step with one line naming the
method, where its code lives and the rule, instead of a traceback from `backward()` (a non-finite value is the
trainer's own check: it saves a checkpoint first).
"""

from __future__ import annotations

from typing import Any

from bench.runtime.errors import TrainingError


def method_origin(adapter: Any) -> str:
    """`'name' (module.Class)`: the method as its registry knows it, and where its code lives."""
    from bench.train.method import AdapterHooks

    cls = type(adapter)
    return f"{AdapterHooks.of(adapter).label!r} ({cls.__module__}.{cls.__qualname__})"


def check_loss(loss: Any, adapter: Any) -> None:
    """Refuse a loss that is no tensor, not a scalar, or carries no gradient (TrainingError, one line)."""
    import torch

    rule = "loss() must return a scalar tensor (0-dimensional, e.g. .mean()) computed from the model, with a grad"
    if not isinstance(loss, torch.Tensor):
        problem = f"returned {type(loss).__name__}, not a tensor"
    elif loss.dim() != 0:
        problem = f"returned a tensor of shape {tuple(loss.shape)}, not a scalar"
    elif not loss.requires_grad:
        problem = "returned a tensor with no grad (detached, or not computed from the model's parameters)"
    elif loss.grad_fn is None:
        problem = "returned a leaf tensor (a constant), not one computed from the model's parameters"
    else:
        return
    raise TrainingError(f"method {method_origin(adapter)}: {problem}; {rule}")
