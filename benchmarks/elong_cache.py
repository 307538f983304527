"""How much of an @elong retrieval run the token-id cache key saves: texts asked vs texts encoded, per variant.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/elong_cache.py [--dataset scifact] [--elong 2,4,8,rand]
        [--model minilm] [--limit N] [--count-only]

Runs the retrieval suite (`beir:<dataset>@elong`, clean then each variant) with a fresh embedding cache and records,
for every corpus encode, the texts asked for and the texts the encoder actually ran through the model ("after":
the cache keyed by truncated token ids). "before" is what the previous cache, keyed by the raw text, would have
encoded for the same sequence of calls: every distinct text string not asked for earlier. --count-only skips the
model: it tokenises the same texts and counts distinct model inputs (identical to what the encoder would encode).
Target: an attacked text whose model input equals the clean one is never re-encoded (after = distinct new inputs).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="scifact")
    parser.add_argument("--elong", default="2,4,8,rand")
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--max-len", type=int, default=256)
    parser.add_argument("--limit", type=int, default=None, help="first N queries (and their slice of the corpus)")
    parser.add_argument("--count-only", action="store_true", help="tokenise and count; do not run the model")
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args(argv)

    import numpy as np

    from bench.evaluate.attacks import parse_elong_variants
    from bench.encode.cache import ids_key
    from bench.encode.encoder import Encoder
    from bench.evaluate.suites.base import EvalContext
    from bench.evaluate.suites.retrieval import load_retrieval, score_retrieval

    elong = parse_elong_variants(args.elong)
    ctx = EvalContext(data_dir=args.data_dir, attacked=True, elong=elong, limit=args.limit)
    data = load_retrieval(args.dataset, ctx)
    cache_dir = tempfile.mkdtemp(prefix="elong-cache-")
    enc = Encoder.load(args.model, max_len=args.max_len, cache_dir=cache_dir, show_progress=not args.count_only)
    if args.count_only:  # the forward pass returns zeros: tokenisation, keys and cache lookups are the real ones
        Encoder._forward = lambda self, batch: (setattr(self, "forward_calls", self.forward_calls + 1),
                                                np.zeros((len(batch["input_ids"]), self.dim), np.float32))[1]  # fmt: skip

    calls: list[dict] = []
    seen_texts: set[str] = set()
    original = enc.encode

    def counting(texts, **kw):  # noqa: ANN001, ANN003, ANN202
        texts = list(texts)
        before_new = len(set(texts) - seen_texts)
        seen_texts.update(texts)
        encoded0 = enc.texts_encoded
        out = original(texts, **kw)
        calls.append({"desc": kw.get("desc", ""), "asked": len(texts), "before": before_new,
                      "after": enc.texts_encoded - encoded0})  # fmt: skip
        return out

    enc.encode = counting
    t0 = time.time()
    records = score_retrieval(enc, data, args.dataset, ctx, "beir")
    elapsed = time.time() - t0
    # Model inputs equal to the clean cut, per variant (the inputs the old cache re-encoded for nothing).
    docs = data.doc_texts(list(data.corpus))
    clean_keys = {ids_key(i) for i in enc.tokenize(docs).ids}
    print(f"{args.dataset}: {len(data.queries)} queries, {len(docs)} documents, max_len {args.max_len}, "
          f"variants {','.join(elong)}{'  (count only: no model)' if args.count_only else ''}")  # fmt: skip
    print(f"{'encode call':34s} {'asked':>7s} {'before':>7s} {'after':>7s}")
    for c in calls:
        print(f"{c['desc']:34s} {c['asked']:7d} {c['before']:7d} {c['after']:7d}")
    asked, before, after = (sum(c[k] for c in calls) for k in ("asked", "before", "after"))
    print(f"{'total':34s} {asked:7d} {before:7d} {after:7d}")
    n = len(docs)
    print(f"corpus encodes: before {before / n:.2f}, after {after / n:.2f} (queries included; 1.00 = one clean corpus)")
    ndcg = {r.variant: r.value for r in records if r.metric == "ndcg_at_10"}
    print("nDCG@10: " + ", ".join(f"{v} {s:.2f}" for v, s in ndcg.items()) + f"   ({elapsed:.0f}s)")
    # The target: every attacked document whose model input equals its clean input was a cache hit.
    from bench.evaluate.attacks import attack_texts

    for variant in [v for v in ndcg if v != "clean"]:
        seed = ctx.rng(f"{args.dataset}|{variant}|docs").getrandbits(32)
        attacked = attack_texts(docs, variant.split("-", 1)[1], enc.tokenizer, args.max_len, seed=seed)
        keys = [ids_key(i) for i in enc.tokenize(attacked).ids]
        same = sum(k in clean_keys for k in keys)
        print(f"  {variant}: {same} of {n} attacked documents are their clean model input ({same / n:.0%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
