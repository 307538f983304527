"""Encoder backends: how a padded batch runs through the model (`base.Backend`), one module each.

    torch  transformers' model in eager torch (any device; fp32, bf16, fp16)  torch_eager.TorchBackend
    onnx   ONNX Runtime on an exported graph (CPU, fp32)                      onnx_cpu.OnnxBackend
    flash  torch with flash-attn's varlen attention on unpadded tokens        torch_varlen.VarlenBackend
           (CUDA, bf16/fp16, the optional flash-attn package)

A new backend is a module here with a class of the `Backend` protocol, one entry in BACKENDS, and its place in
AUTO_ORDER if `--backend auto` may pick it. Classes are imported only when chosen, so listing the names (the
command-line choices, `bench.encode.options`) imports neither numpy nor torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from bench.runtime.errors import ConfigError

if TYPE_CHECKING:
    from bench.encode.backends.base import Backend, BackendHost

BACKENDS: dict[str, str] = {  # name -> "module:class"
    "torch": "bench.encode.backends.torch_eager:TorchBackend",
    "onnx": "bench.encode.backends.onnx_cpu:OnnxBackend",
    "flash": "bench.encode.backends.torch_varlen:VarlenBackend",
}
# What `auto` picks: the first backend here that can run on the device at the precision (flash on CUDA at bf16/fp16
# when flash-attn is installed, onnx on the CPU in fp32 when onnxruntime is installed, torch otherwise).
AUTO_ORDER = ("flash", "onnx", "torch")


def backend_class(name: str) -> type[Backend]:
    module, _, attr = BACKENDS[name].partition(":")
    return getattr(importlib.import_module(module), attr)


def resolve_backend(backend: str, device: str, precision: str = "fp32") -> str:
    """The backend a name means on this device at this precision: `auto` picks by AUTO_ORDER; a named backend that
    cannot run there is one ConfigError saying what to change."""
    if backend == "auto":
        return next(name for name in AUTO_ORDER if backend_class(name).unusable(device, precision) is None)
    if backend not in BACKENDS:
        raise ConfigError(f"backend {backend!r} is not one of {('auto', *BACKENDS)}")
    why = backend_class(backend).unusable(device, precision)
    if why is not None:
        raise ConfigError(why)
    return backend


def make_backend(backend: str, host: BackendHost) -> Backend:
    """The backend object of a resolved name, for an encoder (`host`)."""
    return backend_class(backend)(host)
