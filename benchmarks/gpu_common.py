"""What every part of benchmarks/gpu.py shares: its settings (MiniLM at max_len 256), the GPU utilisation sampler,
the data it reads, and freeing the GPU between parts."""

from __future__ import annotations

import os
import subprocess
import threading
from contextlib import contextmanager
from typing import Any, Iterator

import numpy as np


MAX_LEN = 256


LR = 3e-5


TEMPERATURE = 0.05


METHODS = ("simcse", "laser3-self", "crop")


# --------------------------------------------------------------------------------------- GPU utilisation
class Utilisation:
    """Samples the GPU's utilisation (%) every `period` seconds while active: `with util.sampling() as samples:`."""

    def __init__(self, index: int, period: float = 0.25):
        self.index, self.period = index, period
        self.how = "none"
        try:
            import pynvml

            pynvml.nvmlInit()
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            self._nvml = pynvml
            self.how = "pynvml"
        except Exception:  # noqa: BLE001 - no pynvml, or no NVML: fall back to nvidia-smi
            self._nvml = None
            import shutil

            if shutil.which("nvidia-smi") and subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0:
                self.how = "nvidia-smi"

    @contextmanager
    def sampling(self) -> Iterator[list[float]]:
        samples: list[float] = []
        if self.how == "pynvml":
            stop = threading.Event()

            def poll() -> None:
                while not stop.is_set():
                    samples.append(float(self._nvml.nvmlDeviceGetUtilizationRates(self._handle).gpu))
                    stop.wait(self.period)

            thread = threading.Thread(target=poll, daemon=True)
            thread.start()
            try:
                yield samples
            finally:
                stop.set()
                thread.join()
        elif self.how == "nvidia-smi":
            proc = subprocess.Popen(["nvidia-smi", "-i", str(self.index), "--query-gpu=utilization.gpu",
                                     "--format=csv,noheader,nounits", f"-lms={int(self.period * 1000)}"],
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)  # fmt: skip
            lines: list[str] = []
            reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)
            reader.start()
            try:
                yield samples
            finally:
                proc.terminate()
                proc.wait()
                reader.join(timeout=2)
                samples.extend(float(x) for x in (line.strip() for line in lines) if x.replace(".", "", 1).isdigit())
        else:
            yield samples

    @staticmethod
    def summary(samples: list[float]) -> str:
        if not samples:
            return "n/a"
        s = np.asarray(samples)
        return f"{s.mean():5.1f}% mean, {100 * (s >= 80).mean():3.0f}% of {len(s)} samples >= 80%"


def nvml_index() -> int:
    """NVML's index of the GPU torch calls cuda:0 (CUDA_VISIBLE_DEVICES may remap it)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return int(visible) if visible.isdigit() else 0


def sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


# ---------------------------------------------------------------------------------------------- data
def load_data(data_dir: str | None) -> dict[str, Any]:
    from bench.evaluate.suites import EvalContext
    from bench.evaluate.suites.retrieval import load_retrieval
    from bench.evaluate.suites.sts import load_sts

    ctx = EvalContext(data_dir=data_dir)
    sts = load_sts("stsb", ctx)
    scifact = load_retrieval("scifact", ctx)
    doc_ids = list(scifact.corpus)
    return {
        "ctx": ctx,
        "texts": {"scifact": scifact.doc_texts(doc_ids) + [scifact.queries[q] for q in scifact.qrels],
                  "stsb": sts.sentences1 + sts.sentences2},  # fmt: skip
        "corpus": scifact.doc_texts(doc_ids),
        "queries": [scifact.queries[q] for q in scifact.qrels],
    }


def free_gpu() -> None:
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
