"""`resolve_auto`: the one place `auto` (and an unset device) becomes what runs: the device, the evaluation's
precision, the training autocast's and the inference backend, by bench.runtime.device's policy and the backends'
availability (bench.encode.backends). Everything that needs a resolved value calls it: the encoder
(`EncoderOptions.resolved`), the identity before a config hash is taken (bench.experiment.identity), the trainer,
and the run's runtime record (`Resolved.runtime`), so what a row records is what its hash was taken over and what
ran. Resolving a resolved value changes nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Resolved:
    """What `auto` means on this machine for one set of options."""

    device: str  # cpu, cuda, cuda:1 ...
    precision: str  # the evaluation's: fp32, bf16 or fp16 (weights cast to it)
    train_precision: str  # the training autocast's: fp32 or bf16 (fp16 is for evaluation only)
    backend: str | None = None  # the inference backend (torch, onnx, flash); None where none was asked (training)

    def runtime(self) -> dict[str, str]:
        """What a run's runtime records of it: the device, both precisions, the backend (when resolved) and the
        attention kernels of that device (the choice the encoder records in each score's info)."""
        from bench.runtime.device import attention_policy

        return {"device": self.device, "precision": self.precision, "train_precision": self.train_precision,
                **({"encoder_backend": self.backend} if self.backend else {}),
                "attention": attention_policy(self.device).name}  # fmt: skip


def resolve_auto(device: Any = None, precision: str | None = "auto", backend: str | None = None) -> Resolved:
    """`device` (None: cuda when this torch can use a GPU, else cpu), `precision` (auto: the fastest that keeps the
    fp32 scores on that device, for scoring and for training) and, when given, `backend` (auto: the first usable of
    bench.encode.backends.AUTO_ORDER; a named one that cannot run there is a ConfigError) as they will run."""
    from bench.encode import backends
    from bench.runtime.device import resolve_device, resolve_precision

    name = resolve_device(device)
    scoring = resolve_precision(precision, name)
    training = resolve_precision(precision, name, training=True)
    return Resolved(name, scoring, training, None if backend is None else backends.resolve_backend(backend, name, scoring))
