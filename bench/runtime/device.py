"""Where a model runs, at what precision and with which attention kernels: the one device policy of lenbench.

The encoder, the trainer and the commands all ask here, so "the default device", "what `auto` precision means" and
"which attention kernels run" are written once:

    resolve_device(None) -> "cuda" when this torch can use a GPU, else "cpu" (torch is not even imported on a
        machine with no NVIDIA driver)
    resolve_precision("auto", device) -> the fastest precision that keeps the fp32 scores (AUTO_PRECISION); with
        training=True the training autocast's (TRAIN_AUTO_PRECISION)
    weight_dtype(precision) -> the torch dtype an inference model's weights are cast to (None: fp32, no cast)
    autocast(device, precision) -> the context a training forward pass runs under (autocast, or nothing for fp32)
    attention_policy(device) -> the attention kernels lenbench's forward passes use there, and their name

Precision. Evaluation casts the model's weights (`model.to(bfloat16)`): that is what makes reduced precision fast.
Autocast keeps fp32 weights and casts every matrix product's inputs again at every call, and on the first pass over
new shapes it was 0.12-0.36x fp32 on an H200 (issue 36). Pooling and normalisation still run in float32. Training
keeps fp32 master weights under autocast (bf16; fp16 would need loss scaling, so training refuses it, and its `auto`
stays bf16). A precision is `auto` only where its scores agree with fp32 within 0.1 on STS-B and SciFact nDCG@10.
On CUDA that is fp16 weights: all-MiniLM-L6-v2 on an H100 scored SciFact 64.5082 at fp32 and at fp16, 64.6952 at
bf16 (0.187 off: bf16 keeps 8 bits of mantissa against fp16's 11; on an H200 bf16 happened to stay within 0.01).
fp16's narrow range is what it risks instead (activations past 65,504 become inf): the encoder runs every text whose
reduced-precision vector is not finite again at fp32 and counts it (`fp32_reruns` in each score's info and in the
evaluation's runtime), so an overflow costs time, never a score. `benchmarks/gpu.py` re-measures every precision on
the GPU it runs on and says whether `auto` is the fastest that passes there. On the CPU `auto` is fp32: bf16 matrix
products are slower on CPUs without bf16 units; `--precision bf16` still asks for it (its scores are checked in
tests/test_precision.py). The precision is part of the run's config and of the embedding cache's key, so rows of
different precisions never pool.

Attention. Since torch 2.10, scaled-dot-product attention with a padding mask prefers cuDNN's kernel on sm90/sm100
(H100, H200, B200) with cuDNN newer than 9.15. That kernel builds an execution graph for every new (batch, width)
shape, at tens to hundreds of milliseconds each, which made the first pass over a corpus 5-10x slower than the
second. On CUDA lenbench's forward passes therefore run with cuDNN attention switched off, the other kernels in
torch's order (flash, memory-efficient, math): the memory-efficient kernel takes padded batches with no per-shape
build, and math runs whatever the others cannot. Off rather than last in the order: torch moves cuDNN to the front
by itself on those GPUs. The choice applies around lenbench's own forward passes only (a context), so a program that
imports lenbench keeps its own settings; LENBENCH_CUDNN_ATTENTION=1 keeps torch's default.
"""

from __future__ import annotations

import os
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PRECISIONS = ("auto", "fp32", "bf16", "fp16")
TRAIN_PRECISIONS = ("auto", "fp32", "bf16")  # fp16 training would need loss scaling
# What `auto` resolves to for evaluation, by device type (fp32 where none is named): the fastest precision measured to
# keep the fp32 scores within 0.1 (fp16 weights on CUDA; benchmarks/gpu.py measures fp32, bf16 and fp16 and prints
# which passes), and for training's autocast (bf16: fp16 would need loss scaling).
AUTO_PRECISION = {"cuda": "fp16"}
TRAIN_AUTO_PRECISION = {"cuda": "bf16"}
# SDPA kernels lenbench's forward passes may use on CUDA, in order: no cuDNN and its per-shape graph builds.
CUDA_ATTENTION_KERNELS = ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "MATH")


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


def is_accelerator(device: Any) -> bool:
    return device_kind(device) != "cpu"


def device_memory(device: Any) -> int | None:
    """Bytes of memory of a CUDA device (None on the CPU, or when torch cannot say)."""
    if device_kind(device) != "cuda":
        return None
    try:
        import torch

        return int(torch.cuda.get_device_properties(torch.device(str(device))).total_memory)
    except Exception:  # noqa: BLE001 - unknown: callers take their smallest default
        return None


def resolve_precision(precision: str | None, device: Any, training: bool = False) -> str:
    """fp32, bf16 or fp16: `auto` (or None) is AUTO_PRECISION's entry for the device type (TRAIN_AUTO_PRECISION's
    when `training`), else fp32."""
    precision = precision or "auto"
    if precision not in PRECISIONS:
        from bench.runtime.errors import ConfigError

        raise ConfigError(f"precision {precision!r} is not one of {', '.join(PRECISIONS)}")
    if precision != "auto":
        return precision
    return (TRAIN_AUTO_PRECISION if training else AUTO_PRECISION).get(device_kind(device), "fp32")


def weight_dtype(precision: str) -> Any:
    """The torch dtype inference weights are cast to at `precision` (fp32, bf16, fp16; resolved), None for fp32."""
    if precision == "fp32":
        return None
    import torch

    return {"bf16": torch.bfloat16, "fp16": torch.float16}[precision]


def autocast(device: Any, precision: str) -> Any:
    """The context a training forward (and backward) pass runs under: autocast to the precision on `device`'s type,
    or nothing (fp32)."""
    precision = resolve_precision(precision, device, training=True)
    if precision == "fp32":
        return nullcontext()
    import torch

    return torch.autocast(device_kind(device), dtype=weight_dtype(precision))


@dataclass(frozen=True)
class AttentionPolicy:
    """The attention kernels lenbench's forward passes use on one device: `name` is recorded in each score's info
    and in the run's runtime; `context()` wraps a forward pass (and, in training, its backward)."""

    name: str
    kernels: tuple[str, ...] = ()  # the SDPBackend names allowed, in priority order; () keeps torch's own

    def context(self) -> Any:
        if not self.kernels:
            return nullcontext()
        from torch.nn.attention import SDPBackend, sdpa_kernel

        return sdpa_kernel([getattr(SDPBackend, n) for n in self.kernels], set_priority=True)


def attention_policy(device: Any) -> AttentionPolicy:
    """cuDNN attention off on CUDA (see the module docstring); torch's default elsewhere."""
    if device_kind(device) != "cuda":
        return AttentionPolicy("sdpa default")
    from bench.environment import flag

    if flag("LENBENCH_CUDNN_ATTENTION"):
        return AttentionPolicy("sdpa default (LENBENCH_CUDNN_ATTENTION)")
    return AttentionPolicy("sdpa without cuDNN", CUDA_ATTENTION_KERNELS)


def forward_context(device: Any, precision: str, autocast_too: bool = True) -> Any:
    """The attention policy's context, and autocast to `precision` when `autocast_too` (training; an inference model
    whose weights were cast needs none)."""
    stack = ExitStack()
    stack.enter_context(attention_policy(device).context())
    if autocast_too:
        stack.enter_context(autocast(device, precision))
    return stack

