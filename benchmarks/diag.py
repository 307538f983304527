"""How long the `diag` suite takes against a plain clean STS-B evaluation of the same model, in one process.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/diag.py [--model minilm] [--limit N] [--elong 2,4,8,rand]
        [--data-dir DIR] [--backend auto|torch|onnx]

Both run the suite's own `evaluate` on STS-B test (`sts:stsb` clean, then `diag`) with the same encoder settings and
each with a fresh, empty embedding cache, after the model's ONNX exports exist (a one-off either command would
pay once). Prints both times and the ratio diag / clean. Target (issue "What a new user trips on"): <= 10.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--limit", type=int, default=None, help="first N pairs (default: all 1,379)")
    parser.add_argument("--elong", default="2,4,8,rand")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--backend", default="auto")
    args = parser.parse_args(argv)

    from bench.encode.encoder import Encoder
    from bench.evaluate.attacks import parse_elong_variants
    from bench.evaluate.suites import EvalContext, parse_suites
    from bench.runtime import progress

    progress.configure(quiet=True)
    onnx_dir = tempfile.mkdtemp(prefix="diag-bench-onnx-")
    timings = {}
    for suite_arg in ("sts:stsb", "diag"):
        cache = tempfile.mkdtemp(prefix="diag-bench-cache-")
        os.makedirs(os.path.join(cache, "onnx"), exist_ok=True)
        enc = Encoder.load(args.model, cache_dir=cache, backend=args.backend, show_progress=False)
        if enc.backend == "onnx":  # share the exports between the two caches: made once, outside the timings
            os.rmdir(os.path.join(cache, "onnx"))
            os.symlink(onnx_dir, os.path.join(cache, "onnx"))
            enc.encode(["warm up ."])
            enc.token_embeddings(["warm up ."])
            enc = Encoder.load(args.model, cache_dir=cache, backend=args.backend, show_progress=False)
        ctx = EvalContext(data_dir=args.data_dir, elong=parse_elong_variants(args.elong), limit=args.limit)
        ((suite, _attacked),) = parse_suites(suite_arg)
        start = time.perf_counter()
        records = suite.evaluate(enc, "stsb", ctx)
        timings[suite_arg] = time.perf_counter() - start
        print(f"{suite_arg:9s} {timings[suite_arg]:7.1f} s  {len(records)} scores, {enc.texts_encoded} texts encoded, "
              f"{enc.forward_calls} forward calls (backend {enc.backend})")  # fmt: skip
    ratio = timings["diag"] / timings["sts:stsb"]
    print(f"diag / clean STS-B = {ratio:.1f} (target <= 10; elong {args.elong}, "
          f"{args.limit or 'all'} pairs, model {args.model})")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
