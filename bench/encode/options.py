"""The values of the encoder's options, in one place and without importing numpy or torch, so command-line parsers
(`bench eval`, `bench run`, the sweep's RunSpec) offer exactly what the encoder accepts."""

from __future__ import annotations

from bench.encode import backends
from bench.encode.pooling import POOLINGS

# inference backend (bench.encode.backends); auto: onnx on the CPU when onnxruntime is installed, else torch
BACKENDS = ("auto", *backends.BACKENDS)
EMB_DTYPES = ("fp32", "fp16")  # precision of the returned embedding matrix

__all__ = ["BACKENDS", "EMB_DTYPES", "POOLINGS"]
