"""Corpus-scale memory: peak RSS of retrieval evaluation on a synthetic BEIR-layout corpus, extrapolated to FEVER.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/scale.py --cold --docs N [--json FILE] [--minilm]
        the whole cold `bench eval` process instead (empty caches): benchmarks/scale_cold.py says what it measures.

The warm path (the default):

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/scale.py [--docs 1000000] [--queries 200] [--work /tmp/lenbench-scale]
        [--models bm25,minilm] [--emb-dtype fp16]

The corpus is made of short documents (1-3 sentences drawn from the STS, AG News and SciFact texts in
../shared/data, with a short title), written as corpus.jsonl / queries.jsonl / qrels/test.tsv at two sizes
(--docs/4 and --docs) under --work (outside the repository). Each model is evaluated in a fresh child process on
the whole corpus with only the first --queries queries (the `--limit` of the issue on queries only: the corpus is
never cut), through `bench.evaluate.suites.retrieval.score_retrieval`, the code `bench eval` runs:

    bm25    bench's BM25: tokenise (bm25s) and index the whole corpus chunk by chunk, search (bm25s).
    minilm  the dense path with a warm cache: the embedding cache is first filled with random vectors keyed by the
            real token ids (the model's forward pass is replaced, everything else - tokenisation, keys, SQLite -
            is real), so the measured child reads all vectors from the cache into one matrix (--emb-dtype), reads
            the corpus, and searches exactly; encoding cost is measured by benchmarks/encode.py instead.

Printed: peak RSS (ru_maxrss) of each child at both sizes, the per-document slope between them, and the
extrapolation to 5.4M documents (FEVER / Climate-FEVER): targets <= 8 GB dense (fp16) and <= 12 GB BM25.
Measured for BM25 (2 shared cores, lazy corpus): 756 bytes/document -> 4.3 GB (bm25s's whole-corpus index before:
2,758 bytes/document -> 15.0 GB).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parent.parent
FEVER_DOCS = 5_400_000
TARGET_GB = {"minilm": 8.0, "bm25": 12.0}


# ------------------------------------------------------------------------------------- synthetic corpus
def source_sentences(data_dir: str | None) -> list[str]:
    from bench.data import locate, read_beir, read_labelled, read_sts
    from bench.data.sentences import split_sentences

    out: list[str] = []
    sts = read_sts(locate("stsb", data_dir))
    out += sts.sentences1 + sts.sentences2
    try:
        out += read_labelled(locate("agnews", data_dir)).texts
    except Exception:  # noqa: BLE001 - AG News is optional here
        pass
    beir = read_beir(locate("scifact", data_dir))
    for doc in beir.documents(list(beir.corpus)[:3000]):
        out += split_sentences(doc["text"])
    return [s for s in dict.fromkeys(" ".join(s.split()) for s in out) if 10 <= len(s) <= 300]


def write_corpus(folder: Path, n_docs: int, n_queries: int, sentences: list[str], seed: int = 0) -> Path:
    if (folder / "qrels" / "test.tsv").exists():
        return folder
    rng = random.Random(seed)
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    with open(folder / "corpus.jsonl", "w") as fh:
        for i in range(n_docs):
            text = " ".join(rng.choice(sentences) for _ in range(rng.randint(1, 3)))
            title = " ".join(rng.choice(sentences).split()[:3])
            fh.write(json.dumps({"_id": f"doc{i}", "title": title, "text": text}) + "\n")
    queries = [rng.choice(sentences) for _ in range(n_queries)]
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": f"q{i}", "text": q}) + "\n" for i, q in enumerate(queries)))
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\tdoc{rng.randrange(n_docs)}\t1\n" for i in range(n_queries))
    )
    return folder


# ------------------------------------------------------------------------------------------ children
def child_fill(folder: str, cache: str, emb_dtype: str) -> None:
    """Fill the embedding cache with random vectors for every document and query of the folder."""
    import numpy as np

    from bench.data.beir import read_beir
    from bench.encode.encoder import Encoder
    from bench.evaluate.models import load_model
    from bench.evaluate.suites.retrieval import CorpusTexts

    rng = np.random.default_rng(0)

    def random_forward(self, batch):  # noqa: ANN001, ANN202
        self.forward_calls += 1
        return rng.standard_normal((len(batch["input_ids"]), self.dim)).astype(np.float32)

    Encoder._forward = random_forward
    model = load_model("minilm", cache_dir=cache, emb_dtype=emb_dtype)
    data = read_beir(folder)
    t0 = time.time()
    model.encode_into_cache(CorpusTexts(data, list(data.corpus)), desc="fill corpus")
    model.encode_into_cache(list(data.queries.values()), desc="fill queries")
    print(json.dumps({"filled": model.texts_encoded, "seconds": time.time() - t0}))


def child_measure(model_name: str, folder: str, cache: str, n_queries: int, emb_dtype: str) -> None:
    from bench.data.beir import read_beir
    from bench.evaluate.models import load_model
    from bench.evaluate.suites.base import EvalContext
    from bench.evaluate.suites.retrieval import keep_positive_queries, score_retrieval

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.time()
    model = load_model(model_name, cache_dir=cache, emb_dtype=emb_dtype)
    data = keep_positive_queries(read_beir(folder, name="synthetic"))
    qids = list(data.qrels)[:n_queries]  # the limit is on queries only: the corpus stays whole
    data = replace(data, queries={q: data.queries[q] for q in qids}, qrels={q: data.qrels[q] for q in qids})
    records = score_retrieval(model, data, "synthetic", EvalContext(data_dir=None), "beir")
    ndcg = next(r.value for r in records if r.metric == "ndcg_at_10")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    encoded = getattr(model, "texts_encoded", None)
    print(json.dumps({"peak_kb": peak, "base_kb": base, "seconds": time.time() - t0, "docs": len(data.corpus),
                      "ndcg": ndcg, "texts_encoded": encoded,
                      "torch_imported": "torch" in sys.modules}))  # fmt: skip


def run_child(*args: str) -> dict:
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"child {args} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -------------------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--work", default="/tmp/lenbench-scale", help="where the synthetic corpora and cache go")
    parser.add_argument("--models", default="bm25,minilm")
    parser.add_argument("--emb-dtype", default="fp16", choices=["fp32", "fp16"])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--cold", action="store_true", help="the whole cold bench eval process (benchmarks/scale_cold.py)")
    parser.add_argument("--json", default=None, help="--cold: write the figures to this JSON file")
    parser.add_argument("--minilm", action="store_true", help="--cold: MiniLM too (slow on a CPU)")
    parser.add_argument("--no-resume", action="store_true", help="--cold: skip the resume check")
    args = parser.parse_args(argv)
    if args.cold:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import scale_cold

        if args.work == "/tmp/lenbench-scale":
            args.work = "/tmp/lenbench-scale-cold"
        return scale_cold.main(args)
    if args.child:
        kind, *rest = args.child
        if kind == "fill":
            child_fill(rest[0], rest[1], rest[2])
        else:
            child_measure(kind, rest[0], rest[1], int(rest[2]), rest[3])
        return 0

    work = Path(args.work)
    sentences = source_sentences(args.data_dir)
    sizes = [args.docs // 4, args.docs]
    folders = {}
    for n in sizes:
        t0 = time.time()
        folders[n] = write_corpus(work / f"synthetic-{n}", n, args.queries, sentences)
        print(f"corpus of {n:,} documents: {folders[n]} ({time.time() - t0:.0f}s)", flush=True)
    cache = str(work / "cache")
    results: dict[str, dict[int, dict]] = {}
    for model in [m.strip() for m in args.models.split(",") if m.strip()]:
        results[model] = {}
        for n in sizes:
            if model != "bm25":
                fill = run_child("fill", str(folders[n]), cache, args.emb_dtype)
                print(f"  cache filled with {fill['filled']:,} random vectors in {fill['seconds']:.0f}s", flush=True)
            r = run_child(model, str(folders[n]), cache, str(args.queries), args.emb_dtype)
            results[model][n] = r
            print(f"{model:8s} {n:>9,} docs: peak RSS {r['peak_kb'] / 2**20:6.2f} GiB (start {r['base_kb'] / 2**20:.2f} GiB), "
                  f"{r['seconds']:.0f}s, texts encoded {r['texts_encoded']}, torch imported {r['torch_imported']}",
                  flush=True)  # fmt: skip
    print(f"\nextrapolation to {FEVER_DOCS:,} documents (peak = peak at {sizes[1]:,} + slope x extra documents)")
    ok = True
    for model, by_n in results.items():
        lo, hi = by_n[sizes[0]], by_n[sizes[1]]
        slope = (hi["peak_kb"] - lo["peak_kb"]) * 1024 / (sizes[1] - sizes[0])
        peak = hi["peak_kb"] * 1024 + slope * (FEVER_DOCS - sizes[1])
        target = TARGET_GB.get(model, TARGET_GB["minilm"])
        verdict = "OK" if peak / 1e9 <= target else "OVER"
        ok &= verdict == "OK"
        label = f"{model} ({args.emb_dtype})" if model != "bm25" else model
        print(f"  {label:16s} {slope:7.0f} bytes/document -> {peak / 1e9:5.2f} GB at 5.4M (target <= {target:.0f} GB): {verdict}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
