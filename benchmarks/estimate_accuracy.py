"""How close `bench eval --estimate` comes to a measured run: per dataset the estimated and the measured seconds and
cache bytes, and their ratios (docs/howto/estimate.md keeps the table this prints).

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/estimate_accuracy.py [--cases scifact,agnews,synthetic]
        [--model minilm] [--docs 100000] [--calibration-seconds 15] [--work /tmp/lenbench-estimate-accuracy] [--json FILE]
        [--measured FILE]

--measured takes an earlier --json's measured figures instead of running each evaluation again (an estimate changed,
the runs did not).

Cases (a case whose data is not here is skipped, with the reason):
    scifact    beir:scifact from ../shared/data (or --data-dir), with --model; estimated twice: with the data here, and
               with an empty data folder (BEIR's published size, made-up text at its mean lengths: "not here")
    agnews     knn:agnews from the same folder, with --model (no published size: estimated with the data here only)
    synthetic  beir:synthetic, --docs documents of wiki-offline sentences (benchmarks/scale_cold.py's corpus), with a
               near-free random BERT, so that lenbench's own pipeline is what is timed at that size

Each estimate runs in this process, with its default calibration (--calibration-seconds); each measured run is a whole
`bench eval` child with its own empty LENBENCH_CACHE (but for the model's ONNX export, made by a warm-up on 40 items:
the estimate reports the export apart) and database, and its time is the dataset's own
(runtime.evaluation_seconds, what the estimate's dataset line predicts); its cache bytes are the cache folder
afterwards less the ONNX export (the estimate reports exports apart). Run it alone: the timings are the machine's.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scale_cold import child_env, folder_bytes, near_free_model, wiki_sentences, write_corpus  # noqa: E402


@dataclass
class Row:
    case: str
    where: str  # "here" (the files counted and sampled) or "not here" (published size, made-up text)
    estimated_seconds: float
    measured_seconds: float
    estimated_cache_bytes: int
    measured_cache_bytes: int
    calibration_seconds: float

    @property
    def time_ratio(self) -> float:
        return self.estimated_seconds / max(self.measured_seconds, 1e-9)

    @property
    def cache_ratio(self) -> float:
        return self.estimated_cache_bytes / max(self.measured_cache_bytes, 1)


def estimate(model: str, suite: str, data_dir: Path, calibration_seconds: float) -> tuple[float, int, float]:
    """(seconds, cache bytes) of the one dataset of `suite`, and the calibration's wall time."""
    from bench.experiment.estimate.evaluation import estimate_evaluation
    from bench.experiment.eval_spec import EvalOptions, EvalSpec

    spec = EvalSpec.from_options(EvalOptions.from_options({"model": model, "suite": [suite], "data_dir": str(data_dir)}))
    est = estimate_evaluation(spec, calibration_seconds=calibration_seconds)
    (ds,) = est.datasets
    return float(ds.seconds or 0.0), int(ds.cache_bytes), est.calibration_seconds


def measure(model: str, suite: str, data_dir: Path, run_dir: Path) -> tuple[float, int]:
    """(the dataset's seconds, the cache bytes it wrote, export excluded) of one whole `bench eval` child."""
    from results_db import ResultsDB
    from results_db.records import json_column

    import shutil

    run_dir.mkdir(parents=True, exist_ok=True)
    cache, db = run_dir / "cache", run_dir / "runs.sqlite"
    cmd = [sys.executable, "-m", "bench", "eval", "--model", model, "--suite", suite, "--data-dir", str(data_dir),
           "--no-progress"]  # fmt: skip
    # The model's ONNX export first, in a warm-up on 40 items (10 a class of AG News) whose other cache files are
    # then removed: the estimate reports the export apart (in its model load and first call) and times each dataset
    # without it, so the dataset's measured seconds must not hold it either (it was 20-30 s of AG News' 74 s).
    warm = subprocess.run([*cmd, "--limit", "40", "--db", str(run_dir / "warm.sqlite")], env=child_env(cache),
                          capture_output=True, text=True)  # fmt: skip
    if warm.returncode != 0:
        raise SystemExit(f"bench eval (warm-up) failed ({warm.returncode}):\n{(warm.stdout + warm.stderr)[-3000:]}")
    for p in cache.iterdir():
        if p.name != "onnx":
            shutil.rmtree(p) if p.is_dir() else p.unlink()
    proc = subprocess.run([*cmd, "--db", str(db)], env=child_env(cache), capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"bench eval failed ({proc.returncode}):\n{(proc.stdout + proc.stderr)[-3000:]}")
    runtime = json_column(ResultsDB(db).runs().iloc[-1]["runtime"])
    seconds = float(next(iter(runtime["evaluation_seconds"].values())))
    return seconds, folder_bytes(cache) - folder_bytes(cache / "onnx")


def cases(args: argparse.Namespace, work: Path) -> list[tuple[str, str, str, Path, bool]]:
    """(case, model, suite, data folder, has a published size) for each case asked whose data is here."""
    shared = Path(args.data_dir)
    out = []
    for case in args.cases.split(","):
        if case == "scifact":
            if (shared / "beir" / "scifact" / "corpus.jsonl").exists():
                out.append(("SciFact", args.model, "beir:scifact", shared, True))
            else:
                print(f"skipped scifact: no {shared}/beir/scifact")
        elif case == "agnews":
            if (shared / "knn" / "agnews_test.jsonl").exists():
                out.append(("AG News (kNN)", args.model, "knn:agnews", shared, False))
            else:
                print(f"skipped agnews: no {shared}/knn/agnews_test.jsonl")
        elif case == "synthetic":
            root = write_corpus(work / f"synthetic-{args.docs}", args.docs, wiki_sentences())
            model = str(near_free_model(work / "near-free-model"))
            out.append((f"synthetic {args.docs:,} docs (near-free model)", model, "beir:synthetic", root, False))
        else:
            raise SystemExit(f"unknown case {case!r}: scifact, agnews, synthetic")
    return out


def table(rows: list[Row]) -> str:
    def mib(n: int) -> str:
        return f"{n / 2**20:.1f} MiB"

    lines = ["| dataset | data | estimated s | measured s | time ratio | estimated cache | measured cache | cache ratio "
             "| calibration s |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for r in rows:
        lines.append(f"| {r.case} | {r.where} | {r.estimated_seconds:.0f} | {r.measured_seconds:.0f} | "
                     f"{r.time_ratio:.2f} | {mib(r.estimated_cache_bytes)} | {mib(r.measured_cache_bytes)} | "
                     f"{r.cache_ratio:.2f} | {r.calibration_seconds:.0f} |")  # fmt: skip
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", default="scifact,agnews,synthetic")
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--calibration-seconds", type=float, default=15.0)
    parser.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data"))
    parser.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "lenbench-estimate-accuracy"))
    parser.add_argument("--json")
    parser.add_argument("--measured", help="an earlier --json: its measured seconds and cache bytes, not run again")
    args = parser.parse_args()
    earlier = {r["case"]: r for r in json.loads(Path(args.measured).read_text())} if args.measured else {}
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    for case, model, suite, data_dir, published in cases(args, work):
        wheres = [("here", data_dir)]
        if published:
            (work / "empty").mkdir(exist_ok=True)
            wheres.append(("not here", work / "empty"))
        stamp = time.strftime("%H%M%S")
        if case in earlier:
            measured_s, measured_cache = earlier[case]["measured_seconds"], earlier[case]["measured_cache_bytes"]
        else:
            measured_s, measured_cache = measure(model, suite, data_dir, work / "runs" / f"{suite.replace(':', '-')}-{stamp}")
        for where, folder in wheres:
            est_s, est_cache, calibration = estimate(model, suite, folder, args.calibration_seconds)
            rows.append(Row(case, where, est_s, measured_s, est_cache, measured_cache, calibration))
            print(f"{case} ({where}): time {est_s:.0f} s / {measured_s:.0f} s = {rows[-1].time_ratio:.2f}; cache "
                  f"{rows[-1].cache_ratio:.2f}; calibrated in {calibration:.0f} s", flush=True)  # fmt: skip
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) | {"time_ratio": r.time_ratio, "cache_ratio": r.cache_ratio}
                                               for r in rows], indent=2))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
