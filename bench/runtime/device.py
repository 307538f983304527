"""Where a model runs and at what precision: the one device and precision policy of lenbench.

The encoder, the trainer and the commands all ask here, so "the default device" and "what `auto` precision means"
are written once:

    resolve_device(None) -> "cuda" when this torch can use a GPU, else "cpu" (torch is not even imported on a
        machine with no NVIDIA driver)
    resolve_precision("auto", device) -> "bf16" on CUDA, "fp32" elsewhere
    autocast(device, precision) -> the context a forward pass runs under (bf16 autocast, or nothing for fp32)

Precision `auto` keeps bf16 only where it was measured to give the fp32 scores: on CUDA (all-MiniLM-L6-v2 on an
H100: STS-B 82.04 and SciFact nDCG@10 64.52 under bf16 autocast, 82.03 / 64.51 in fp32; `benchmarks/gpu.py`
re-measures both on the machine it runs on). On the CPU `auto` is fp32: bf16 autocast there is slower on CPUs
without bf16 matrix units and its scores are checked in tests/test_precision.py; `--precision bf16` still asks
for it. The precision a model ran at is part of the run's config and of the embedding cache's key.
"""

from __future__ import annotations

import os
from contextlib import nullcontext
from pathlib import Path
from typing import Any

PRECISIONS = ("auto", "fp32", "bf16")


def cuda_possible() -> bool:
    """False when this machine certainly has no NVIDIA GPU (no driver node): then torch need not be imported."""
    return Path("/proc/driver/nvidia").exists() or Path("/dev/nvidia0").exists() or "CUDA_VISIBLE_DEVICES" in os.environ


def default_device() -> str:
    """cuda when this torch can use a GPU here, else cpu."""
    if not cuda_possible():
        return "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def resolve_device(device: Any = None) -> str:
    """The device name to run on: the one given (a string or torch.device), else the default."""
    return str(device) if device else default_device()


def device_kind(device: Any) -> str:
    """"cuda" for "cuda:1", "cpu" for "cpu": the autocast device type."""
    return str(device).split(":")[0]


def resolve_precision(precision: str | None, device: Any) -> str:
    """fp32 or bf16: `auto` (or None) is bf16 on CUDA and fp32 elsewhere (see the module docstring)."""
    precision = precision or "auto"
    if precision not in PRECISIONS:
        from bench.runtime.errors import ConfigError

        raise ConfigError(f"precision {precision!r} is not one of {', '.join(PRECISIONS)}")
    if precision != "auto":
        return precision
    return "bf16" if device_kind(device) == "cuda" else "fp32"


def autocast(device: Any, precision: str) -> Any:
    """The context a forward (and backward) pass runs under: bf16 autocast on `device`'s type, or nothing (fp32)."""
    if resolve_precision(precision, device) != "bf16":
        return nullcontext()
    import torch

    return torch.autocast(device_kind(device), dtype=torch.bfloat16)


def is_accelerator(device: Any) -> bool:
    return device_kind(device) != "cpu"
