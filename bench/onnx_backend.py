"""ONNX Runtime inference for `Encoder(backend="onnx")`: the transformer plus pooling, exported once per weights.

The graph maps (input_ids, attention_mask) -> pooled vectors (mean over the mask, or [CLS]), the same pooling as
`bench.encoder.pool`; the encoder normalises. It is exported with torch's TorchScript-based exporter
(`torch.onnx.export(dynamo=False)`: the dynamo exporter needs onnxscript, which is not a dependency) from the torch
model, with a padded example batch so the attention-mask path is traced, and stored as
`<cache dir>/onnx/<fingerprint>-<pooling>.onnx`: the weights' fingerprint names it, so a later run (or another
process) loads the file without touching torch. Files are written to a temporary name and renamed, so a crash
never leaves a half-written model behind.
"""

from __future__ import annotations

import os
import warnings
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from bench.encoder import Encoder

OPSET = 17


@lru_cache(maxsize=1)
def onnxruntime_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("onnxruntime") is not None


def onnx_path(cache_dir: str | os.PathLike[str], fingerprint: str, pooling: str) -> Path:
    return Path(cache_dir) / "onnx" / f"{fingerprint}-{pooling}.onnx"


def export_pooled(model: Any, pooling: str, path: Path) -> Path:
    """Export model + pooling to `path` (atomically). The model is left in the mode it was in."""
    import torch

    from bench.encoder import pool

    class Pooled(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            hidden = self.inner(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            return pool(hidden, attention_mask, pooling)

    was_training = model.training
    wrapper = Pooled(model).eval()  # eval on the wrapper: the exporter restores the wrapper's mode afterwards
    ids = torch.full((2, 8), 100, dtype=torch.long)
    mask = torch.ones((2, 8), dtype=torch.long)
    mask[1, 5:] = 0  # padding in the example: the traced graph keeps applying the mask
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracer notes on shape checks that are constant for an encoder
            torch.onnx.export(
                wrapper.cpu(),
                (ids, mask),
                str(tmp),
                input_names=["input_ids", "attention_mask"],
                output_names=["pooled"],
                dynamic_axes={"input_ids": {0: "batch", 1: "length"}, "attention_mask": {0: "batch", 1: "length"},
                              "pooled": {0: "batch"}},  # fmt: skip
                opset_version=OPSET,
                dynamo=False,
            )
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
        model.train(was_training)
    return path


def _threads() -> int:
    """ONNX Runtime ignores OMP_NUM_THREADS; honour it (0 = onnxruntime's default, one per physical core)."""
    try:
        return max(0, int(os.environ.get("OMP_NUM_THREADS", "0")))
    except ValueError:
        return 0


class OnnxPooledModel:
    """An onnxruntime session over an exported pooled graph: `run(batch) -> (batch, dim) float32`."""

    def __init__(self, path: Path):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = _threads()
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # warnings about unused initialisers are noise here
        self.path = path
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.inputs = {i.name for i in self.session.get_inputs()}

    @classmethod
    def for_encoder(cls, encoder: "Encoder") -> "OnnxPooledModel":
        """Load the encoder's exported graph, exporting it first (from its torch model) when there is none."""
        path = onnx_path(encoder._cache_dir, encoder.fingerprint, encoder.pooling)
        if not path.is_file():
            from tqdm.auto import tqdm

            tqdm.write(f"exporting {encoder.name} to ONNX once: {path}") if encoder.show_progress else None
            export_pooled(encoder.model, encoder.pooling, path)
        return cls(path)

    def run(self, batch: dict[str, np.ndarray]) -> np.ndarray:
        feeds = {k: np.ascontiguousarray(v, dtype=np.int64) for k, v in batch.items() if k in self.inputs}
        return np.asarray(self.session.run(None, feeds)[0], dtype=np.float32)
