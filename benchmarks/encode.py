"""Encoding throughput: bench's Encoder (cache off; each backend) vs sentence-transformers' `encode`, same model,
same texts, same process.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/encode.py [--model minilm] [--sts 1379] [--docs 300]
        [--backends torch,onnx]

Texts: STS-B test sentences (short) and a SciFact slice (title + abstract, long; truncated at max_len by all).
Prints wall seconds, CPU seconds (process time: all threads), texts/s and tokens/s (non-special tokens after
truncation) for each encoder, and each backend's speed-up over sentence-transformers in CPU time and in wall time
(target >= 1.5x), and checks the embeddings agree: exit status 1 if any pair's cosine is below MIN_COSINE. Data comes from ../shared/data (or --data-dir); each encoder encodes every set once after a warm-up
batch, alternating order per set so neither side always runs on a cold cache.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

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
    args = parser.parse_args(argv)

    import torch
    from sentence_transformers import SentenceTransformer

    from bench.encoder import Encoder, resolve_model

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
          f"batch {args.batch_size}  max_len {args.max_len}")  # fmt: skip
    for fn in runners.values():  # warm-up (allocations, lazy init, the one-off ONNX export)
        fn(texts["stsb-test sentences"][:32])
    worst = 1.0
    summary = []
    for i, (name, t) in enumerate(texts.items()):
        tokens = count_tokens(first.tokenizer, t, args.max_len - 2)
        wall: dict[str, float] = {}
        cpu: dict[str, float] = {}
        embeddings: dict[str, np.ndarray] = {}
        order = list(runners.items())
        for label, fn in order if i % 2 == 0 else order[::-1]:  # alternate: nobody always runs first
            w0, c0 = time.perf_counter(), time.process_time()
            embeddings[label] = np.asarray(fn(t), dtype=np.float32)
            wall[label], cpu[label] = time.perf_counter() - w0, time.process_time() - c0
        print(f"\n{name}: {len(t)} texts, {tokens} tokens")
        for label in runners:
            print(f"  {label:22s} wall {wall[label]:7.2f}s  cpu {cpu[label]:7.2f}s  {len(t) / wall[label]:8.1f} texts/s  "
                  f"{tokens / wall[label]:9.0f} tokens/s")  # fmt: skip
        ref = "sentence-transformers"
        for label in runners:
            if label == ref:
                continue
            cos = np.einsum("ij,ij->i", embeddings[label], embeddings[ref])
            worst = min(worst, float(cos.min()))
            line = (f"  {label} vs {ref}: {cpu[ref] / cpu[label]:.2f}x CPU time, {wall[ref] / wall[label]:.2f}x wall, "
                    f"min cosine {cos.min():.6f}")  # fmt: skip
            print(line)
            summary.append(f"{name:22s}{line}")
    print("\nsummary (speed-up = sentence-transformers time / bench time; target >= 1.5x)")
    print("\n".join(summary))
    if worst < MIN_COSINE:
        print(f"\nFAIL: embeddings disagree (min cosine {worst:.6f} < {MIN_COSINE})", file=sys.stderr)
        return 1
    print(f"\nembeddings agree: min cosine {worst:.6f} >= {MIN_COSINE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
