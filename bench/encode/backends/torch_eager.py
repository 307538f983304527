"""The torch backend: transformers' model run eagerly by torch on the encoder's device, under the encoder's
precision (bf16 autocast, see `bench.runtime.device`). On CUDA, inputs go through pinned memory with non-blocking
copies and the pooled vectors stay on the GPU until `to_host` brings a chunk's worth back at once."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from bench.encode.backends.base import Batch, BackendHost
from bench.encode.pooling import eval_mode, pooled_output
from bench.runtime.device import autocast

if TYPE_CHECKING:  # torch is imported only when a batch runs
    import torch


class TorchBackend:
    # One-thread throughput of all-MiniLM-L6-v2 falls ~15-25% at 64 x 256 slots (see the README's speed section).
    cpu_batch_tokens: ClassVar[int | None] = 2048

    def __init__(self, host: BackendHost):
        self.host = host

    @property
    def name(self) -> str:
        return "torch"

    @property
    def loaded(self) -> bool:
        return False  # it runs the host's torch model, nothing of its own

    @staticmethod
    def unusable(device: str, precision: str) -> str | None:
        return None

    def place(self, model: Any) -> Any:
        return model.to(self.host.device_name).eval()

    def pooled(self, batch: Batch) -> Any:
        import torch

        with eval_mode(self.host.model) as model, torch.inference_mode(), self._autocast():
            tensors = {k: self._to_device(v) for k, v in batch.items()}
            pooled = pooled_output(model, tensors, self.host.pooling).float()
        return pooled.numpy() if pooled.device.type == "cpu" else pooled

    def tokens(self, batch: Batch) -> np.ndarray:
        import torch

        with eval_mode(self.host.model) as model, torch.inference_mode(), self._autocast():
            tensors = {k: self._to_device(v) for k, v in batch.items()}
            return model(**tensors).last_hidden_state.float().cpu().numpy()

    def to_host(self, parts: list[Any]) -> np.ndarray:
        if parts and not isinstance(parts[0], np.ndarray):
            import torch

            return torch.cat(parts).float().cpu().numpy()
        return np.concatenate(parts).astype(np.float32, copy=False)

    def _autocast(self) -> Any:
        return autocast(self.host.device_name, self.host.precision)

    def _to_device(self, array: np.ndarray) -> "torch.Tensor":
        """A host array on the model's device: through pinned memory and a non-blocking copy on CUDA."""
        import torch

        tensor = torch.from_numpy(array)
        device = self.host.device_name
        if device.startswith("cuda"):
            return tensor.pin_memory().to(device, non_blocking=True)
        return tensor.to(device)
