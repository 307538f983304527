"""The unpadded torch backend: attention over the batch's real tokens only, as variable-length sequences packed one
after another (flash-attn's varlen kernel, what sentence-transformers' `flash_attention_2` path and
text-embeddings-inference run). Padding costs nothing there: a batch is its real tokens, whatever their lengths.

It runs when the optional `flash-attn` package is installed (`pip install lenbench[flash]`), on CUDA, at bf16 or fp16
(flash-attn has no fp32 kernel); `--backend auto` then picks it. Each padded batch the encoder plans is unpadded here:
the real tokens of all rows as one sequence of shape (1, tokens), position ids restarting at every row, and the rows'
cumulative lengths handed to transformers' flash-attention path (`cu_seq_lens_q/k`, `max_length_q/k`), which calls
`flash_attn_varlen_func`. Mean pooling sums each row's token vectors in float32 (`index_add_`); cls pooling takes
each row's first token. Everything else (weights cast, attention policy, pinned copies, `to_host`) is the padded
torch backend's. A model handed in from elsewhere (not loaded by the encoder) keeps its attention implementation and
runs padded: switching it would change a model being trained."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from bench.encode.backends.base import Batch
from bench.encode.backends.torch_eager import TorchBackend
from bench.encode.pooling import eval_mode


def flash_attn_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("flash_attn") is not None


class VarlenBackend(TorchBackend):
    implementation: ClassVar[str] = "flash_attention_2"  # transformers' attention function that takes cu_seq_lens

    def __init__(self, host: Any):
        super().__init__(host)
        self.unpadded = False  # True once the model runs the varlen implementation

    @property
    def name(self) -> str:
        return "flash"

    @property
    def attention_path(self) -> str:  # type: ignore[override]
        return "unpadded (flash-attn varlen)" if self.unpadded else "padded (flash-attn not used: a model handed in)"

    @staticmethod
    def unusable(device: str, precision: str) -> str | None:
        if not flash_attn_installed():
            return "--backend flash needs the flash-attn package (pip install lenbench[flash]); or use --backend torch"
        if not device.startswith("cuda"):
            return f"--backend flash runs on CUDA only; use --backend torch for device {device!r}"
        if precision not in ("bf16", "fp16"):
            return f"--backend flash runs at bf16 or fp16 (flash-attn has no fp32 kernel); use --backend torch for {precision}"
        return None

    def place(self, model: Any) -> Any:
        model = super().place(model)
        if self.host.owns_weights:
            model.set_attn_implementation(self.implementation)
            self.unpadded = True
        return model

    def pooled(self, batch: Batch) -> Any:
        self.host.model  # noqa: B018 - placed (and switched to the varlen implementation) on first use
        if not self.unpadded:
            return super().pooled(batch)
        import torch

        mask = batch["attention_mask"].astype(bool)
        lengths = mask.sum(axis=1)
        cu = np.zeros(len(lengths) + 1, dtype=np.int32)
        np.cumsum(lengths, out=cu[1:])
        total = int(cu[-1])
        positions = np.arange(total, dtype=np.int64) - np.repeat(cu[:-1].astype(np.int64), lengths)
        rows = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
        with eval_mode(self.host.model) as model, torch.inference_mode(), self._context():
            ids = self._to_device(np.ascontiguousarray(batch["input_ids"][mask])[None, :])
            cu_t = self._to_device(cu)
            width = int(lengths.max())
            hidden = model(input_ids=ids, position_ids=self._to_device(positions[None, :]), cu_seq_lens_q=cu_t,
                           cu_seq_lens_k=cu_t, max_length_q=width, max_length_k=width).last_hidden_state[0].float()  # fmt: skip
            if self.host.options.pooling == "cls":
                pooled = hidden[cu_t[:-1].long()]
            else:
                sums = torch.zeros((len(lengths), hidden.shape[-1]), dtype=torch.float32, device=hidden.device)
                sums.index_add_(0, self._to_device(rows), hidden)
                pooled = sums / self._to_device(lengths.astype(np.float32)).clamp(min=1)[:, None]
        return pooled.numpy() if pooled.device.type == "cpu" else pooled
