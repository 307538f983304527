"""How far a `--limit N` score lands from the full set's: the first N items against the seeded samples lenbench
draws (bench.evaluate.subsets), for an STS set with all-MiniLM-L6-v2 (the packaged `minilm`). Every pair is encoded
once; each subset's Spearman is then taken over its pairs' cosines, so the subsets differ only in which items.

    .venv/bin/python benchmarks/limit_sample.py [--dataset stsb] [--n 500] [--seeds 20] [--data-dir ../shared/data]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main(argv: list[str] | None = None) -> int:
    from scipy.stats import spearmanr

    from bench.evaluate.subsets import FIRST, draw
    from bench.evaluate.suites import EvalContext
    from bench.evaluate.suites.sts import load_sts
    from bench.evaluate.models import load_model

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="stsb")
    p.add_argument("--n", type=int, default=500, help="the --limit")
    p.add_argument("--seeds", type=int, default=20, help="limit seeds 0..S-1")
    p.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data"))
    p.add_argument("--model", default="minilm")
    args = p.parse_args(argv)
    data = load_sts(args.dataset, EvalContext(data_dir=args.data_dir))
    encoder = load_model(args.model)
    a = encoder.encode(list(data.sentences1))
    b = encoder.encode(list(data.sentences2))
    cos = np.sum(np.asarray(a) * np.asarray(b), axis=1)  # the encoder's vectors are unit length
    gold = np.asarray(data.scores, dtype=np.float64)

    def score(indices: tuple[int, ...] | range) -> float:
        idx = list(indices)
        return float(spearmanr(cos[idx], gold[idx]).statistic) * 100

    total = len(gold)
    full = score(range(total))
    first = score(draw(total, args.n, 0, args.dataset, FIRST).indices)
    samples = [score(draw(total, args.n, seed, args.dataset).indices) for seed in range(args.seeds)]
    errors = [s - full for s in samples]
    mean_abs = statistics.mean(abs(e) for e in errors)
    print(f"{args.model} on {args.dataset}: {total} pairs, --limit {args.n}")
    print(f"full set                 {full:6.2f}")
    print(f"first {args.n:<5d}              {first:6.2f}  ({first - full:+.2f} from the full set)")
    print(f"sample, {args.seeds} limit seeds  {statistics.mean(samples):6.2f}  (mean error {statistics.mean(errors):+.2f}, "
          f"mean |error| {mean_abs:.2f}, largest |error| {max(abs(e) for e in errors):.2f})")
    print(f"ratio |first - full| / mean |sample - full|: "
          f"{abs(first - full) / max(mean_abs, 1e-9):.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
