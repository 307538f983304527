"""Encoding throughput: bench's Encoder (cache off) vs sentence-transformers' `encode`, same model, same texts.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/encode.py [--model minilm] [--sts 1379] [--docs 300]

Texts: STS-B test sentences (short) and a SciFact slice (title + abstract, long; truncated at max_len by both).
Prints texts/s and tokens/s (non-special tokens after truncation, counted once with the model's tokenizer) for
each encoder and their ratio, and checks the embeddings agree: exit status 1 if any pair's cosine is below
MIN_COSINE. Data comes from ../shared/data (or --data-dir); each encoder encodes every set once after a warm-up
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
    docs = [beir.doc_text(d) for d in list(beir.corpus)[:n_docs]]
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
    args = parser.parse_args(argv)

    import torch
    from sentence_transformers import SentenceTransformer

    from bench.encoder import Encoder, resolve_model

    ours = Encoder.load(args.model, max_len=args.max_len, batch_size=args.batch_size, device=args.device,
                        use_cache=False, show_progress=False)  # fmt: skip
    st = SentenceTransformer(resolve_model(args.model), device=str(ours.device))
    st.max_seq_length = args.max_len
    texts = load_texts(args.data_dir, args.sts, args.docs)

    def run_ours(t: list[str]) -> np.ndarray:
        return ours.encode(t, use_cache=False)

    def run_st(t: list[str]) -> np.ndarray:
        return st.encode(t, batch_size=args.batch_size, normalize_embeddings=True, convert_to_numpy=True)

    print(f"model {args.model}  device {ours.device}  torch threads {torch.get_num_threads()}  batch {args.batch_size}  "
          f"max_len {args.max_len}")  # fmt: skip
    run_ours(texts["stsb-test sentences"][:32])  # warm-up (allocations, lazy init)
    run_st(texts["stsb-test sentences"][:32])
    worst = 1.0
    for i, (name, t) in enumerate(texts.items()):
        tokens = count_tokens(ours.tokenizer, t, args.max_len - 2)
        timings: dict[str, float] = {}
        embeddings: dict[str, np.ndarray] = {}
        order = [("bench", run_ours), ("sentence-transformers", run_st)]
        for label, fn in order if i % 2 == 0 else order[::-1]:
            start = time.perf_counter()
            embeddings[label] = fn(t)
            timings[label] = time.perf_counter() - start
        cos = np.einsum("ij,ij->i", embeddings["bench"], embeddings["sentence-transformers"])
        worst = min(worst, float(cos.min()))
        print(f"\n{name}: {len(t)} texts, {tokens} tokens")
        for label in ("bench", "sentence-transformers"):
            s = timings[label]
            print(f"  {label:22s} {s:7.2f}s  {len(t) / s:8.1f} texts/s  {tokens / s:9.0f} tokens/s")
        ratio = timings["sentence-transformers"] / timings["bench"]
        print(f"  speed ratio bench / sentence-transformers: {ratio:.2f}x   min cosine {cos.min():.6f}")
    if worst < MIN_COSINE:
        print(f"\nFAIL: embeddings disagree (min cosine {worst:.6f} < {MIN_COSINE})", file=sys.stderr)
        return 1
    print(f"\nembeddings agree: min cosine {worst:.6f} >= {MIN_COSINE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
