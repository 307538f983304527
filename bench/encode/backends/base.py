"""What the encoder asks of a backend: run one padded batch of token ids through the model, pooled or per token.

The encoder owns everything around it (tokenising, length-sorted batch plans, padding, the cache, normalisation);
a backend owns only how a batch runs: where the weights live and in which form (`place`), the forward itself
(`pooled`, `tokens`) and bringing a chunk's vectors back to the host (`to_host`). One is chosen when the encoder is
built (`bench.encode.backends.make_backend`); no encoder method asks which one it has.

A batch is the padded numpy arrays `bench.encode.batching.pad_batch` makes: {"input_ids": int64 (rows, width),
"attention_mask": int64 (rows, width)}. `pooled` may leave its vectors where the model ran (a tensor on the GPU):
the encoder hands a chunk's worth of them to `host_copy` at once, so an accelerator syncs once per chunk, and only
on the commit thread (bench.encode.commits), while the main thread queues the next chunk's batches. That thread may
also call `pooled_fp32` (a vector that was not finite), holding the lock the main thread holds around `pooled`:
a backend is never run by two threads at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Protocol

import numpy as np

Batch = dict[str, np.ndarray]


class BackendOptions(Protocol):
    """The options a backend reads (`bench.encode.options.EncoderOptions` has them, resolved by the encoder)."""

    @property
    def device(self) -> str | None: ...  # resolved: a device name

    @property
    def precision(self) -> str: ...  # resolved: fp32, bf16 or fp16

    @property
    def pooling(self) -> str | None: ...  # resolved: mean or cls

    @property
    def allow_pickle(self) -> bool: ...  # fp32 weights read again from the folder (bench.encode.loading)


class BackendHost(Protocol):
    """What a backend reads of its encoder (`bench.encode.encoder.Encoder` has it): the options it runs under, as one
    resolved value (device, precision, pooling: never copies of them), and what an ONNX export reads (name,
    progress, fingerprint, cache folder, the torch model loaded on first use)."""

    name: str
    options: BackendOptions
    show_progress: bool
    owns_weights: bool  # the encoder loaded the weights itself: a backend may cast them to the precision

    @property
    def fingerprint(self) -> str: ...

    @property
    def cache_dir(self) -> Path: ...

    @property
    def model(self) -> Any: ...  # the torch model, loaded on first use


class Backend(Protocol):
    """One way to run batches (see the module docstring). `cpu_batch_tokens`: token slots per batch on the CPU,
    where throughput peaks when a batch's activations stay in the CPU caches (None: batch_size alone)."""

    cpu_batch_tokens: ClassVar[int | None]

    def __init__(self, host: BackendHost) -> None: ...

    @property
    def name(self) -> str:
        """The backend that runs the batches, as recorded in a run's description."""
        ...

    @property
    def loaded(self) -> bool:
        """Whether the backend holds a runnable model of its own (an ONNX session), apart from the torch model."""
        ...

    @staticmethod
    def unusable(device: str, precision: str) -> str | None:
        """Why this backend cannot run on `device` at `precision` (one line naming the option to change), or None."""
        ...

    def place(self, model: Any) -> Any:
        """The torch model as this backend keeps it: on its device, in eval mode (and in whatever form it runs)."""
        ...

    def pooled(self, batch: Batch) -> Any:
        """(rows, dim) float32 pooled vectors, not normalised: numpy, or a tensor left on the model's device."""
        ...

    def pooled_fp32(self, batch: Batch) -> Any:
        """`pooled` at fp32 whatever the encoder's precision: what a batch whose output was not finite runs again as."""
        ...

    def tokens(self, batch: Batch) -> np.ndarray:
        """(rows, width, dim) float32 last hidden states on the host (padding rows included)."""
        ...

    def to_host(self, parts: list[Any]) -> np.ndarray:
        """One float32 host matrix of a chunk's `pooled` outputs, in order (one device-to-host copy)."""
        ...

    def host_copy(self, parts: list[Any]) -> Any:
        """`to_host` started, not waited for: an object whose `result()` is that matrix. On CUDA the copy is queued
        behind the batches (into pinned memory, an event after it), so the caller can queue more work first."""
        ...
