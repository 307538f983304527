"""What a score carries besides its value (Score.info), measured by the runner around each dataset's scoring:

    suite_version       its suite's scoring version (SuiteMeta.version): the leaderboard keeps versions apart
    data_fingerprint    sha256[:16] of the sorted (file name, file sha256) of the data files this dataset read
    seconds             wall time of the dataset's scoring, all its variants
    texts_per_s         model inputs encoded per second (an embedding model; cached texts are not encoded)
    tokens_per_s        real (non-padding) tokens run through the model per second
    device, device_name where the encoder ran ("cuda:0", and the GPU's or CPU's model name)
    dtype, emb_dtype    the encoder's compute precision, and the stored vectors' precision
    attention           the attention implementation (transformers' config; "onnx" for the ONNX backend)
    attention_kernels   the attention kernels the device policy allows ("sdpa without cuDNN" on CUDA: bench.runtime.device)
    attention_path      "padded" batches, or "unpadded (flash-attn varlen)" tokens (bench.encode.backends)
    fp32_reruns         texts run again at fp32 because their vector at a reduced precision was not finite
                        (bench.encode.finite; only at bf16/fp16)
    batch_shapes        distinct (rows, width) batch shapes the encoder has run so far (bounded on accelerators)
    batch_rows          texts per encoding batch at most (the asked --batch-size, else the device's)
    batch_tokens        token slots per encoding batch at most (the asked --batch-tokens, else the device's)
    seconds_by_stage    thread-seconds per pipeline stage (read, tokenise, forward, cache reads and writes, search,
                        scoring: bench.runtime.stages); they overlap, so they may add up to more than `seconds`
    texts_encoded       model inputs encoded (a resumed evaluation encodes only what the cache lacks), texts_asked:
                        texts the encoder was asked for
    peak_memory_mb      peak CUDA memory allocated during the dataset (reset before it), or on the CPU the process's
                        peak resident memory so far (`peak_memory_kind` says which)

Keys a suite set itself (changed_frac, limit...) are kept. Nothing here changes a score.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from dataclasses import dataclass
from typing import Any


@dataclass
class Snapshot:
    started: float
    texts: int
    tokens: int
    fp32_reruns: int = 0
    asked: int = 0
    stages: dict[str, float] | None = None


def _inner(model: Any) -> Any:
    return getattr(model, "inner", None) or model


def device_label(device: str) -> str:
    """The hardware's name: the GPU's (torch.cuda.get_device_name) on CUDA, else the CPU's model name."""
    if device.startswith("cuda") and "torch" in sys.modules:
        import torch

        if torch.cuda.is_available():
            return torch.cuda.get_device_name(torch.device(device))
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine() or "cpu"


def start(model: Any) -> Snapshot:
    """Counters before a dataset (and the CUDA peak reset, when the model runs on CUDA)."""
    enc = _inner(model)
    if str(getattr(enc, "device_name", "")).startswith("cuda") and "torch" in sys.modules:
        import torch

        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
    from bench.runtime import stages

    return Snapshot(time.monotonic(), int(getattr(enc, "texts_encoded", 0) or 0), int(getattr(enc, "tokens_run", 0) or 0),
                    int(getattr(enc, "fp32_reruns", 0) or 0), int(getattr(enc, "texts_asked", 0) or 0),
                    stages.snapshot())  # fmt: skip


def fingerprint(files: set[str]) -> str | None:
    """One hash of the data files read (names and contents), None when none was read or one cannot be read."""
    if not files:
        return None
    from bench.runtime.provenance import file_sha256

    h = hashlib.sha256()
    try:
        for path in sorted(files):
            h.update(os.path.basename(path).encode())
            h.update(file_sha256(path).encode())
    except OSError:
        return None
    return h.hexdigest()[:16]


def _attention(enc: Any) -> str | None:
    if getattr(enc, "backend", None) == "onnx":
        return "onnx"
    model = getattr(enc, "_model", None)
    config = getattr(model, "config", None)
    return getattr(config, "_attn_implementation", None) if config is not None else None


def _peak_memory(device: str) -> tuple[float | None, str]:
    if device.startswith("cuda") and "torch" in sys.modules:
        import torch

        if torch.cuda.is_available():
            return round(torch.cuda.max_memory_allocated() / 2**20, 1), "cuda_allocated"
    try:
        import resource

        return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1), "process_rss"
    except (ImportError, OSError):
        return None, ""


def measure(model: Any, before: Snapshot, suite: str, files: set[str]) -> dict[str, Any]:
    """The info keys for every score of one dataset, after its scoring (see the module docstring)."""
    from bench.evaluate.suites.metadata import suite_meta

    seconds = max(time.monotonic() - before.started, 1e-9)
    enc = _inner(model)
    meta = suite_meta(suite)
    info: dict[str, Any] = {"suite_version": getattr(meta, "version", 1) if meta is not None else 1,
                            "seconds": round(seconds, 3)}  # fmt: skip
    digest = fingerprint(files)
    if digest:
        info["data_fingerprint"] = digest
    if hasattr(enc, "texts_encoded"):
        info["texts_per_s"] = round((int(enc.texts_encoded) - before.texts) / seconds, 1)
        info["tokens_per_s"] = round((int(getattr(enc, "tokens_run", 0) or 0) - before.tokens) / seconds, 1)
        info["texts_encoded"] = int(enc.texts_encoded) - before.texts
        info["texts_asked"] = int(getattr(enc, "texts_asked", 0) or 0) - before.asked
    if before.stages is not None:
        from bench.runtime import stages

        info["seconds_by_stage"] = stages.since(before.stages)
    device = str(getattr(enc, "device_name", "") or "cpu")
    info["device"] = device
    info["device_name"] = device_label(device)
    if hasattr(enc, "precision"):
        info["dtype"] = enc.precision
        if enc.precision != "fp32" and isinstance(getattr(enc, "fp32_reruns", None), int):
            info["fp32_reruns"] = enc.fp32_reruns - before.fp32_reruns
    if hasattr(enc, "emb_dtype"):
        info["emb_dtype"] = enc.emb_dtype
    attention = _attention(enc)
    if attention:
        info["attention"] = attention
    if callable(getattr(enc, "attention_info", None)):
        info.update(enc.attention_info())
    if getattr(enc, "shapes", None) is not None:
        info["batch_shapes"] = len(enc.shapes)
    if isinstance(getattr(enc, "batch_size", None), int):  # what ran (the config hashes an unasked size as the CPU's)
        info["batch_rows"] = enc.batch_size
        if isinstance(getattr(enc, "batch_tokens", None), int):
            info["batch_tokens"] = enc.batch_tokens
    peak, kind = _peak_memory(device)
    if peak is not None:
        info["peak_memory_mb"], info["peak_memory_kind"] = peak, kind
    return info
