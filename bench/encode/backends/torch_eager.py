"""The torch backend: transformers' model run eagerly by torch on the encoder's device, at the encoder's precision.

Precision (`bench.runtime.device`): at bf16 or fp16 the weights of a model the encoder loaded itself are cast once
(`model.to(dtype)`), which is what makes reduced precision fast; a model handed in from elsewhere (one being trained,
scored for a learning curve) keeps its fp32 weights and runs under autocast instead, so evaluating never changes it.
The last hidden states are pooled in float32 either way. The attention mask is prepared from the host's copy of the
padding (bench.encode.masks), so no forward waits for the GPU to say whether its batch is padded. Every forward runs under the device's attention policy (on
CUDA, no cuDNN attention: it builds an execution graph per new batch shape). On CUDA, inputs go through pinned memory
with non-blocking copies and the pooled vectors stay on the GPU until `to_host` brings a chunk's worth back at once."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from bench.encode.backends.base import Batch, BackendHost
from bench.encode.masks import model_mask
from bench.encode.pooling import eval_mode, pool
from bench.runtime.device import attention_policy, forward_context, weight_dtype

if TYPE_CHECKING:  # torch is imported only when a batch runs
    import torch


class TorchBackend:
    # One-thread throughput of all-MiniLM-L6-v2 falls ~15-25% at 64 x 256 slots (see the README's speed section).
    cpu_batch_tokens: ClassVar[int | None] = 2048
    attention_path = "padded"  # how attention meets padding: padded batches, masked (each score's info says)

    def __init__(self, host: BackendHost):
        self.host = host
        self.cast = False  # whether the weights were cast to the precision (else: autocast at run time)
        self._fp32_model: Any = None  # fp32 weights for `pooled_fp32`, loaded when first needed

    @property
    def name(self) -> str:
        return "torch"

    @property
    def device(self) -> str:
        """The device the host's resolved options name."""
        return str(self.host.options.device)

    @property
    def loaded(self) -> bool:
        return False  # it runs the host's torch model, nothing of its own

    @property
    def attention_kernels(self) -> str:
        """The attention kernels the device policy allows (each score's info records it beside the path)."""
        return attention_policy(self.device).name

    @staticmethod
    def unusable(device: str, precision: str) -> str | None:
        return None

    def place(self, model: Any) -> Any:
        """On the device, in eval mode; the weights cast to the precision when the encoder owns them."""
        dtype = weight_dtype(self.host.options.precision)
        self.cast = dtype is not None and self.host.owns_weights
        return model.to(self.device, **({"dtype": dtype} if self.cast else {})).eval()

    def pooled(self, batch: Batch) -> Any:
        import torch

        with eval_mode(self.host.model) as model, torch.inference_mode(), self._context():
            tensors = {k: self._to_device(v) for k, v in batch.items()}
            hidden = model(**model_inputs(model, tensors, batch)).last_hidden_state
            pooled = pool(hidden.float(), tensors["attention_mask"], self.host.options.pooling)
        return pooled.numpy() if pooled.device.type == "cpu" else pooled

    def pooled_fp32(self, batch: Batch) -> Any:
        """`pooled` again at fp32: weights at fp32 and no autocast (a batch whose reduced-precision output was not
        finite). The fp32 weights of a cast model are loaded from its folder on first use (kept for later batches)."""
        import torch

        with eval_mode(self._fp32()) as model, torch.inference_mode(), attention_policy(self.device).context():
            tensors = {k: self._to_device(v) for k, v in batch.items()}
            hidden = model(**model_inputs(model, tensors, batch)).last_hidden_state
            pooled = pool(hidden.float(), tensors["attention_mask"], self.host.options.pooling)
        return pooled.numpy() if pooled.device.type == "cpu" else pooled

    def _fp32(self) -> Any:
        """The model at fp32: the host's own when its weights were not cast, else a second copy, read from the folder
        the encoder loaded (the weights as published; a copy upcast from the cast weights where there is none)."""
        if not self.cast:
            return self.host.model
        if self._fp32_model is None:
            source = getattr(self.host, "source", None)
            if source is not None:
                from bench.encode.loading import load_weights

                model = load_weights(self.host.name, str(source), self.host.options.allow_pickle)
            else:
                import copy

                model = copy.deepcopy(self.host.model).float()
            if getattr(model.config, "_attn_implementation", None) == "flash_attention_2":
                model.set_attn_implementation("sdpa")  # flash-attn has no fp32 kernel
            self._fp32_model = model.to(self.device).eval()
        return self._fp32_model

    def tokens(self, batch: Batch) -> np.ndarray:
        import torch

        with eval_mode(self.host.model) as model, torch.inference_mode(), self._context():
            tensors = {k: self._to_device(v) for k, v in batch.items()}
            return model(**model_inputs(model, tensors, batch)).last_hidden_state.float().cpu().numpy()

    def to_host(self, parts: list[Any]) -> np.ndarray:
        return self.host_copy(parts).result()

    def host_copy(self, parts: list[Any]) -> Any:
        """The chunk's vectors on their way to the host: numpy parts (the CPU) at once; CUDA tensors by one
        non-blocking copy into pinned memory queued behind the batches, with an event recorded after it."""
        from bench.encode.chunks import Done

        if not parts or isinstance(parts[0], np.ndarray):
            return Done(np.concatenate(parts).astype(np.float32, copy=False))
        import torch

        pooled = torch.cat(parts).float()
        if pooled.device.type != "cuda":
            return Done(pooled.cpu().numpy())
        host = torch.empty(pooled.shape, dtype=torch.float32, pin_memory=True)
        host.copy_(pooled, non_blocking=True)
        copied = torch.cuda.Event()
        copied.record(torch.cuda.current_stream(pooled.device))
        return PinnedCopy(host, copied)

    def _context(self) -> Any:
        """The attention policy, and autocast unless the weights themselves are at the precision."""
        return forward_context(self.device, self.host.options.precision, autocast_too=not self.cast)

    def _to_device(self, array: np.ndarray) -> "torch.Tensor":
        """A host array on the model's device: through pinned memory and a non-blocking copy on CUDA."""
        import torch

        tensor = torch.from_numpy(array)
        device = self.device
        if device.startswith("cuda"):
            return tensor.pin_memory().to(device, non_blocking=True)
        return tensor.to(device)


def model_inputs(model: Any, tensors: dict[str, Any], batch: Batch) -> dict[str, Any]:
    """The batch's tensors as the model takes them: the attention mask prepared from the host's copy
    (bench.encode.masks: transformers need not read the mask back from the device in every forward)."""
    return {**tensors, "attention_mask": model_mask(model, tensors["attention_mask"], batch["attention_mask"])}


class PinnedCopy:
    """A device-to-host copy in flight: `result()` waits for its event (not for the work queued after it)."""

    def __init__(self, host: Any, event: Any):
        self.host, self.event = host, event

    def result(self) -> np.ndarray:
        self.event.synchronize()
        return self.host.numpy()
