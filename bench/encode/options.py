"""The values of the encoder's options, in one place and without importing numpy or torch, so command-line parsers
(`bench eval`, `bench run`, the sweep's RunSpec) offer exactly what the encoder accepts."""

from __future__ import annotations

from bench.encode.pooling import POOLINGS

BACKENDS = ("auto", "torch", "onnx")  # inference backend; auto: onnx on the CPU when onnxruntime is installed
EMB_DTYPES = ("fp32", "fp16")  # precision of the returned embedding matrix

__all__ = ["BACKENDS", "EMB_DTYPES", "POOLINGS"]
