"""The ONNX backend: ONNX Runtime on the CPU, on a graph exported once from the same weights (model + pooling, or
the token-level graph for `tokens`) by `bench.encode.backends.onnx_export`, stored beside the embedding cache and
keyed by the weights' fingerprint and the pooling. fp32 only. When the export cannot be written (disk full, read-only
cache) the same model runs in torch instead, and the encoder's description says so."""

from __future__ import annotations

import logging
from typing import Any, ClassVar

import numpy as np

from bench.encode.backends.base import Batch, BackendHost
from bench.encode.backends.torch_eager import TorchBackend

log = logging.getLogger(__name__)


class OnnxBackend:
    # One-thread throughput of all-MiniLM-L6-v2 peaks at small batches that stay in the CPU caches (README speed).
    cpu_batch_tokens: ClassVar[int | None] = 256

    def __init__(self, host: BackendHost):
        self.host = host
        self._session: Any = None  # the pooled graph's session, loaded (or exported) on first use
        self._tokens: Any = None  # the token-level graph's session, for `tokens`
        self._fallback: TorchBackend | None = None  # set when the export cannot be written

    @property
    def name(self) -> str:
        return "onnx" if self._fallback is None else self._fallback.name

    @property
    def loaded(self) -> bool:
        return self._session is not None

    @staticmethod
    def unusable(device: str, precision: str) -> str | None:
        from bench.encode.backends.onnx_export import onnxruntime_available

        if precision != "fp32":
            return f"--backend onnx runs in fp32 only; use --backend torch for --precision {precision}"
        if device.split(":")[0] != "cpu":
            return f"--backend onnx runs on the CPU only; use --backend torch for device {device!r}"
        if not onnxruntime_available():
            return "--backend onnx needs the onnxruntime package (pip install onnxruntime), or use --backend torch"
        return None

    def place(self, model: Any) -> Any:
        return model.to(self.host.options.device).eval()  # the export traces it where it is

    def session(self) -> Any:
        """The pooled graph's `OnnxPooledModel`, exported from the torch model when there is no usable file."""
        if self._session is None:
            from bench.encode.backends.onnx_export import OnnxPooledModel

            self._session = OnnxPooledModel.for_encoder(self.host)
        return self._session

    def pooled(self, batch: Batch) -> Any:
        if self._fallback is None:
            try:
                return self.session().run(batch)
            except OSError as exc:  # the export cannot be written: the same model in torch
                log.warning("cannot write the ONNX export into %s (%s); encoding with torch instead",
                            self.host.cache_dir / "onnx", exc.strerror or exc)  # fmt: skip
                self._fallback = TorchBackend(self.host)
        return self._fallback.pooled(batch)

    def pooled_fp32(self, batch: Batch) -> Any:
        return self.pooled(batch)  # fp32 is the only precision it runs

    def tokens(self, batch: Batch) -> np.ndarray:
        if self._fallback is not None:
            return self._fallback.tokens(batch)
        if self._tokens is None:
            from bench.encode.backends.onnx_export import TOKENS, OnnxPooledModel

            self._tokens = OnnxPooledModel.for_encoder(self.host, pooling=TOKENS)
        return self._tokens.run(batch)

    def to_host(self, parts: list[Any]) -> np.ndarray:
        if self._fallback is not None:
            return self._fallback.to_host(parts)
        return np.concatenate(parts).astype(np.float32, copy=False)

    def host_copy(self, parts: list[Any]) -> Any:
        from bench.encode.chunks import Done

        return Done(self.to_host(parts))  # on the host already
