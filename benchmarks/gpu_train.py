"""The `train` part of benchmarks/gpu.py (issue 26): steady-state steps/s of lenbench's trainer against a minimal
hand-written loop of each method. `WARMUP_STEPS` is set by gpu.py's --warmup-steps."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

from gpu_common import LR, MAX_LEN, TEMPERATURE, Utilisation, free_gpu, sync


WARMUP_STEPS = 20


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
