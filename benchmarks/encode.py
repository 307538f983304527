"""Encoding throughput: bench's Encoder (cache off; each backend) vs sentence-transformers' `encode`, same model,
same texts, same process.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/encode.py [--model minilm] [--sts 1379] [--docs 300]
        [--backends torch,onnx]

Texts: STS-B test sentences (short) and a SciFact slice (title + abstract, long; truncated at max_len by all).
Prints wall seconds, CPU seconds (process time: all threads), texts/s and tokens/s (non-special tokens after
truncation) for each encoder, and each backend's speed-up over sentence-transformers in CPU time and in wall time
(target >= 1.5x), and checks the embeddings agree: exit status 1 if any pair's cosine is below MIN_COSINE. Data
comes from ../shared/data (or --data-dir); each encoder encodes every set `--repeat` times after a warm-up batch
(the fastest run counts: on a shared machine the others measure the neighbours), alternating order so neither side
always runs on a cold cache.

Roofline: the benchmark also measures this machine's fp32 matrix-multiply throughput (torch, the same threads, on
the model's own matrix shapes; the best shape is the "peak") and counts each text set's arithmetic from the real
token counts and the config (per layer: 2n(4h^2 + 2hi) FLOPs in the projections and feed-forward, 4n^2h in
attention; embeddings, norms, softmax and GELU are left out, so the count is a lower bound). FLOPs / peak is the
least wall time any exact fp32 encoder needs here (times the threads: the least CPU time), and
sentence-transformers' time divided by it is the largest speed-up possible: the ceiling printed next to the measured one. Token slots: real tokens vs the padded slots that
each encoder runs (bench's batch plans are counted; sentence-transformers' length-sorted batches of --batch-size
are replayed from its sort by character length).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
# TOKENIZERS_PARALLELISM is left unset: both encoders tokenise on the tokenizer's own threads, as they do by default

import numpy as np  # noqa: E402

MIN_COSINE = 0.9999


def load_texts(data_dir: str | None, n_sts: int, n_docs: int) -> dict[str, list[str]]:
    from bench.data import locate, read_beir, read_sts

    sts = read_sts(locate("stsb", data_dir))
    sentences = list(dict.fromkeys(sts.sentences1 + sts.sentences2))[:n_sts]
    beir = read_beir(locate("scifact", data_dir))
    docs = beir.doc_texts(list(beir.corpus)[:n_docs])
    return {"stsb-test sentences": sentences, "scifact docs": docs}


def count_tokens(tokenizer, texts: list[str], max_len: int) -> int:  # noqa: ANN001
    enc = tokenizer(texts, truncation=True, max_length=max_len, add_special_tokens=False)
    return sum(len(ids) for ids in enc["input_ids"])


def matmul_peak_gflops(config, seconds: float = 0.3) -> tuple[float, dict[str, float]]:  # noqa: ANN001
    """Best fp32 GFLOPS of torch.mm (this process's threads) over the model's matrix shapes at a few token counts."""
    import torch

    h, i = int(config.hidden_size), int(config.intermediate_size)
    rates: dict[str, float] = {}
    for tokens in (256, 1024, 4096, 16384):
        for k, n in ((h, 3 * h), (h, i), (i, h)):
            a, b = torch.randn(tokens, k), torch.randn(k, n)
            torch.mm(a, b)
            best, reps = float("inf"), max(1, int(seconds * 50e9 / (2 * tokens * k * n) / 5))
            for _ in range(5):  # the best of five: a neighbour's load only ever slows a round down
                t = time.perf_counter()
                for _ in range(reps):
                    torch.mm(a, b)
                best = min(best, (time.perf_counter() - t) / reps)
            rates[f"{tokens}x{k}x{n}"] = 2 * tokens * k * n / best / 1e9
    return max(rates.values()), rates


def encoder_flops(lengths: list[int], config) -> float:  # noqa: ANN001
    """Matrix-multiply FLOPs of one forward pass over texts of these token counts (no padding): see the docstring."""
    h, i, layers = int(config.hidden_size), int(config.intermediate_size), int(config.num_hidden_layers)
    n = np.asarray(lengths, dtype=np.float64)
    return float(layers * (2 * n * (4 * h * h + 2 * h * i) + 4 * n * n * h).sum())


def st_token_slots(texts: list[str], lengths: list[int], batch_size: int) -> int:
    """Padded slots of sentence-transformers' batches: sorted by -len(text) (characters), runs of batch_size."""
    order = np.argsort([-len(t) for t in texts], kind="stable")
    widths = np.asarray(lengths)[order]
    return int(sum(len(widths[s : s + batch_size]) * widths[s : s + batch_size].max() for s in range(0, len(widths), batch_size)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--sts", type=int, default=1379, help="number of unique STS-B test sentences")
    parser.add_argument("--docs", type=int, default=300, help="number of SciFact documents")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-len", type=int, default=256)
    parser.add_argument("--device", default=None)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--backends", default="torch,onnx", help="Encoder backends to time (default torch,onnx)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per encoder and set; the fastest counts (default 1)")
    args = parser.parse_args(argv)

    import torch
    from sentence_transformers import SentenceTransformer

    from bench.encode.encoder import Encoder
    from bench.encode.loading import resolve_model

    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    ours = {b: Encoder.load(args.model, max_len=args.max_len, batch_size=args.batch_size, device=args.device,
                            use_cache=False, show_progress=False, backend=b) for b in backends}  # fmt: skip
    first = ours[backends[0]]
    st = SentenceTransformer(resolve_model(args.model), device=first.device_name)
    st.max_seq_length = args.max_len
    texts = load_texts(args.data_dir, args.sts, args.docs)

    runners = {f"bench[{b}]": (lambda t, e=e: e.encode(t, use_cache=False)) for b, e in ours.items()}
    runners["sentence-transformers"] = lambda t: st.encode(t, batch_size=args.batch_size, normalize_embeddings=True,
                                                            convert_to_numpy=True)  # fmt: skip

    print(f"model {args.model}  device {first.device_name}  torch threads {torch.get_num_threads()}  "
          f"batch {args.batch_size}  max_len {args.max_len}  batch token slots "
          + ", ".join(f"{b} {e.batch_tokens}" for b, e in ours.items()))  # fmt: skip
    for fn in runners.values():  # warm-up (allocations, lazy init, the one-off ONNX export)
        fn(texts["stsb-test sentences"][:32])
    config = st[0].auto_model.config
    peak, rates = matmul_peak_gflops(config)
    print(f"fp32 matmul peak {peak:.1f} GFLOPS (torch.mm, {torch.get_num_threads()} thread(s), best of the model's "
          f"shapes: " + ", ".join(f"{k} {v:.0f}" for k, v in rates.items()) + ")")  # fmt: skip
    worst = 1.0
    summary = []
    for i, (name, t) in enumerate(texts.items()):
        tokens = count_tokens(first.tokenizer, t, args.max_len - 2)
        lengths = [len(x) for x in first.tokenize(t).ids]  # what the model sees: special tokens, cut at max_len
        wall: dict[str, float] = {}
        cpu: dict[str, float] = {}
        slots: dict[str, int] = {"sentence-transformers": st_token_slots(t, lengths, args.batch_size)}
        embeddings: dict[str, np.ndarray] = {}
        order = list(runners.items())
        for r in range(args.repeat):
            for label, fn in order if (i + r) % 2 == 0 else order[::-1]:  # alternate: nobody always runs first
                encoder = ours.get(label[6:-1]) if label.startswith("bench[") else None
                before = encoder.token_slots if encoder is not None else 0
                w0, c0 = time.perf_counter(), time.process_time()
                embeddings[label] = np.asarray(fn(t), dtype=np.float32)
                w, c = time.perf_counter() - w0, time.process_time() - c0
                wall[label], cpu[label] = min(wall.get(label, w), w), min(cpu.get(label, c), c)
                if encoder is not None:
                    slots[label] = encoder.token_slots - before
        flops = encoder_flops(lengths, config)
        floor = flops / (peak * 1e9)
        print(f"\n{name}: {len(t)} texts, {tokens} tokens ({sum(lengths)} with special tokens), "
              f"{flops / 1e12:.3f} TFLOP; at the matmul peak: {floor:.2f}s")  # fmt: skip
        for label in runners:
            print(f"  {label:22s} wall {wall[label]:7.2f}s  cpu {cpu[label]:7.2f}s  {len(t) / wall[label]:8.1f} texts/s  "
                  f"{tokens / wall[label]:9.0f} tokens/s  {flops / cpu[label] / 1e9:5.1f} GFLOPS/cpu-s  "
                  f"slots {slots[label]} ({slots[label] / sum(lengths):.3f} x real)")  # fmt: skip
        ref = "sentence-transformers"
        cpu_floor = floor * torch.get_num_threads()  # the peak is of all threads together: per CPU-second it is /threads
        ceiling = f"ceiling {cpu[ref] / cpu_floor:.2f}x CPU time, {wall[ref] / floor:.2f}x wall"
        print(f"  best possible for an exact fp32 encoder here (FLOPs / peak) vs {ref}: {ceiling}")
        for label in runners:
            if label == ref:
                continue
            cos = np.einsum("ij,ij->i", embeddings[label], embeddings[ref])
            worst = min(worst, float(cos.min()))
            line = (f"  {label} vs {ref}: {cpu[ref] / cpu[label]:.2f}x CPU time, {wall[ref] / wall[label]:.2f}x wall, "
                    f"min cosine {cos.min():.6f}")  # fmt: skip
            print(line)
            summary.append(f"{name:22s}{line}  ({ceiling})")
    print("\nsummary (speed-up = sentence-transformers time / bench time; target >= 1.5x; the ceiling is "
          "sentence-transformers time / (FLOPs / matmul peak))")  # fmt: skip
    print("\n".join(summary))
    if worst < MIN_COSINE:
        print(f"\nFAIL: embeddings disagree (min cosine {worst:.6f} < {MIN_COSINE})", file=sys.stderr)
        return 1
    print(f"\nembeddings agree: min cosine {worst:.6f} >= {MIN_COSINE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
