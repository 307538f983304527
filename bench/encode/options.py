"""`EncoderOptions`: how an encoder is loaded and run, as one value carried whole from the command line (`bench eval`,
`bench run`, a sweep point) or the Python API to the encoder, and the values each option may take. Defaults and
checks are written here once; the parsers take their defaults from `ENCODER_DEFAULTS`, and nothing between the command
and the encoder relays the options one by one. Importing this module loads neither numpy nor torch.

`auto` (device, precision, backend) is resolved by bench.encode.auto.resolve_auto, the one function every reader of
a resolved value calls (`EncoderOptions.resolved` here), and the encoder keeps and records the resolved value (its
`describe()`).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, replace

from bench.encode import backends
from bench.encode.pooling import POOLINGS
from bench.runtime.device import PRECISIONS
from bench.runtime.errors import ConfigError
from bench.runtime.ranges import INT64_MAX, Range, check_ranges

# inference backend (bench.encode.backends); auto: onnx on the CPU when onnxruntime is installed, else torch
BACKENDS = ("auto", *backends.BACKENDS)
EMB_DTYPES = ("fp32", "fp16")  # precision of the returned embedding matrix
CPU_ROWS = 64  # texts per batch on the CPU when no batch size is asked (also what an unasked size hashes as)
ACCELERATOR_ROWS = 1024  # texts per batch on an accelerator when none is asked (the token budget bounds it first)


# The numbers' allowed values, checked when an EncoderOptions is made; `bench eval`'s and `bench run`'s options that
# fill these fields check their values against the same ranges (bench.experiment.options reads them here).
RANGES: dict[str, Range] = {
    "max_len": Range(4, 100_000, "256"),
    "batch_size": Range(1, 65_536, "64"),
    "batch_tokens": Range(1, INT64_MAX, "16384"),
}


@dataclass(frozen=True)
class EncoderOptions:
    """The encoder's options (see the module docstring); a bad value is a ConfigError when the value is made."""

    pooling: str | None = None  # None: the model folder's own (its sentence-transformers config), else mean
    max_len: int = 256  # tokens an encoder reads of each text, special tokens included (elongated texts fit)
    # texts per encoding batch (capped by token slots); None: the device's (bench.encode.batching.device_batching: 64
    # on the CPU, up to 1,024 within the token budget on an accelerator, where 64 rows of sentences leave a GPU idle)
    batch_size: int | None = None
    batch_tokens: int | None = None  # token slots (rows x width) per batch; None: the device's (bench.encode.batching)
    device: str | None = None  # None: cuda when this torch can use a GPU, else cpu
    backend: str = "auto"  # auto: onnx on the CPU at fp32 when onnxruntime is installed, else torch
    precision: str = "auto"  # fp32, bf16, fp16 or auto: the fastest that keeps fp32's scores (bench.runtime.device)
    emb_dtype: str = "fp32"  # precision of the returned embedding matrix
    use_cache: bool = True  # read and write the embedding cache
    allow_pickle: bool = False  # also load pickle-only weights (pytorch_model.bin), with torch's weights_only loader

    def __post_init__(self) -> None:
        for name, allowed in (("pooling", POOLINGS), ("backend", BACKENDS), ("precision", PRECISIONS),
                              ("emb_dtype", EMB_DTYPES)):  # fmt: skip
            value = getattr(self, name)
            if (value is not None or name != "pooling") and value not in allowed:
                raise ConfigError(f"{name} {value!r} is not one of {', '.join(allowed)}")
        for name, rule in RANGES.items():
            value = getattr(self, name)
            if value is None and name != "max_len":  # the device's default (bench.encode.batching.device_batching)
                continue
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise ConfigError(f"{name} {value!r} is not a whole number ({rule.describe()})")
            object.__setattr__(self, name, int(value))  # numpy's integers too
        check_ranges(self, RANGES)
        if self.device is not None and not isinstance(self.device, str):
            object.__setattr__(self, "device", str(self.device))  # a torch.device
        for name in ("use_cache", "allow_pickle"):
            object.__setattr__(self, name, bool(getattr(self, name)))

    def resolved(self) -> "EncoderOptions":
        """Device, precision and backend as they will run: `auto` and None replaced by bench.runtime.device's policy
        (a backend that cannot run here is a ConfigError). Resolving a resolved value changes nothing."""
        from bench.encode.auto import resolve_auto

        auto = resolve_auto(self.device, self.precision, self.backend)
        return replace(self, device=auto.device, precision=auto.precision, backend=auto.backend)


def hashed_batch_size(rows: int | None) -> int:
    """The evaluation batch size a run's config records: the one asked, else CPU_ROWS (the default before the
    device chose it), so rows keep pooling with earlier ones. The rows that ran are in each score's info
    (`batch_rows`); like the device, they change no embedding beyond float rounding (padding is masked)."""
    return int(rows) if rows is not None else CPU_ROWS


ENCODER_DEFAULTS = EncoderOptions()  # the parsers' and settings' defaults (`ENCODER_DEFAULTS.max_len`, ...)

__all__ = ["ACCELERATOR_ROWS", "BACKENDS", "CPU_ROWS", "EMB_DTYPES", "ENCODER_DEFAULTS", "POOLINGS", "RANGES", "EncoderOptions",
           "hashed_batch_size"]
