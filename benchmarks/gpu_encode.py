"""The encoding parts of benchmarks/gpu.py: `encode`, `base`, `ceiling` and `passes` (texts/s of sentence-transformers
and of lenbench's Encoder at each precision, the ceiling of a bare forward pass, first against second pass)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from gpu_common import MAX_LEN, Utilisation, free_gpu, sync


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


def base_model_folder(work: Path) -> str:
    """A base-size BERT (12 layers, 768 wide) with random weights and MiniLM's tokenizer: no download needed."""
    from bench.encode.backbones import make_random_bert

    return str(make_random_bert(work / "bert-base-random", size="base", seed=0))
