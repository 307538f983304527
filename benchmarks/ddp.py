"""Data-parallel scaling: the same training job on 1 process and on N processes (torch.distributed, gloo on CPU).

    .venv/bin/python benchmarks/ddp.py [--nproc 2] [--steps 20] [--batch-size 32] [--backbone minilm] [--method simcse]

Both runs train the same method from the same backbone on the same texts with the same global batch and step
count (the trainer splits the batch over the processes and gathers in-batch negatives), so they do the same
work; each uses `--threads` torch threads per process in all (one process: `--threads`; N: `--threads / N`
each, default 1 apiece, i.e. the same cores), plus 1 process x 1 thread as the per-core reference. Prints each run's steps/s (training loop only, rank 0's clock: start-up
and model loading excluded), the scaling ratio (N-process steps/s / 1-process steps/s; ideal N when the cores
are free and communication is cheap) and the mean training loss of each run (close, not equal: the same global
batches and updates, but the dropout masks of the N processes are drawn differently; tests/test_distributed_train.py
checks exact equality with dropout off).

Scale case (issue 41): `--scale [--scale-docs 40000] [--ranks 1,2,4]` runs the whole cold `bench eval --suite
beir:synthetic` (a random tiny BERT on MiniLM's tokenizer, gloo on CPU, one thread a rank; the corpus of
benchmarks/gpu_scale.py from the STS-B and SciFact files of ../shared/data) at each number of ranks and prints the
largest single process's peak resident memory (a rank's), sampled every 0.5 s, with the wall time and nDCG@10 (the
same at every number of ranks), and the documents each rank indexed: each rank reads only its byte range of
corpus.jsonl (bench.data.corpus_share) and encodes and searches that share (bench.evaluate.sharded_search), so a
rank's index of ids and offsets shrinks as 1/N and its memory stays flat, or falls, as ranks are added.

On CPU the gain is bounded by the cores: on a 2-core machine 2 processes x 1 thread against 1 process x 2 threads
mostly measures how well torch's intra-op threading uses the second core. On GPUs the launcher is torchrun
(README: Scaling out) and each rank has its own device (nccl).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def corpus(n: int) -> list[str]:
    try:
        from bench.data.corpus import load_corpus

        return list(load_corpus("wiki-offline").texts[:n])
    except Exception:  # noqa: BLE001 - the packaged corpus is optional here
        return [f"Sentence {i} is about topic {i % 17}. It continues with detail {i} and more words." for i in range(n)]


def train_job(args: argparse.Namespace, model_dir: str, out: str) -> dict:
    import torch

    from bench.runtime import distributed
    from bench.train.registry import get_method
    from bench.train import Budget, TrainConfig, TrainJob, train
    from bench.train.backbone import load_backbone

    model, tok, _ = load_backbone(model_dir)
    cfg = TrainConfig(max_len=args.max_len, batch_size=args.batch_size, progress=False, checkpoint_every=0, seed=0,
                      device="cpu")
    adapter = get_method(args.method).build(tokenizer=tok, max_len=args.max_len, seed=0)
    texts = corpus(args.batch_size * (args.steps + 2))
    result = train(adapter, model, tok, TrainJob(texts, Budget(steps=args.steps), cfg, out, save_encoder_dir=None))
    return {"seconds": result.consumed.seconds, "losses": result.losses, "world": distributed.world_size(),
            "threads": torch.get_num_threads()}


def _worker(rank: int, world: int, port: int, args: argparse.Namespace, model_dir: str, out: str) -> None:
    import torch

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world))
    torch.set_num_threads(max(1, args.threads // world))
    from bench.runtime import distributed

    distributed.init_from_env("cpu")
    try:
        result = train_job(args, model_dir, f"{out}/rank{rank}")
        if rank == 0:
            torch.save(result, f"{out}/result.pt")
    finally:
        distributed.shutdown()


def indexed_per_rank(log: str) -> list[int]:
    """The documents each rank indexed, from rank 0's line (bench.data.corpus_share); [] when one process read all."""
    import re

    found = re.search(r"documents indexed over \d+ ranks.*\(documents per rank: ([0-9, ]+)\)", log)
    return [int(n.replace(",", "")) for n in found.group(1).split(", ")] if found else []


def scale_case(args: argparse.Namespace) -> int:
    """Per-rank peak memory of the whole cold bench eval as ranks grow (see the module docstring)."""
    import subprocess

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import gpu_scale

    from bench.encode.backbones import make_random_bert

    data_dir = args.data_dir  # None: the usual search (./data, ../shared/data, $LENBENCH_DATA)
    with tempfile.TemporaryDirectory(prefix="lenbench-ddp-scale-") as tmp:
        root = gpu_scale.write_scale_corpus(Path(tmp) / "data", args.scale_docs, 200, data_dir)
        model = str(make_random_bert(Path(tmp) / "tiny", size="tiny", seed=0))
        print(f"{args.scale_docs:,} documents, 200 queries; a random tiny BERT; gloo on CPU, 1 thread a rank")
        for ranks in [int(r) for r in args.ranks.split(",")]:
            run = Path(tmp) / f"ranks-{ranks}"
            env = {**os.environ, "OMP_NUM_THREADS": "1", "LENBENCH_CACHE": str(run / "cache"),
                   "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}  # fmt: skip
            cmd = [sys.executable, "-m", "bench", "eval", "--model", model, "--suite", "beir:synthetic", "--data-dir",
                   str(root), "--db", str(run / "runs.sqlite"), "--no-progress", "--max-len", "64",
                   *(["--nproc", str(ranks)] if ranks > 1 else [])]  # fmt: skip
            run.mkdir(parents=True)
            t0 = time.time()
            with open(run / "log.txt", "w") as log:
                proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
                with gpu_scale.TreeMemory(proc.pid) as tree:
                    code = proc.wait()
            wall = time.time() - t0
            if code != 0:
                print(f"{ranks} rank(s): bench eval failed ({code}):\n{(run / 'log.txt').read_text()[-2000:]}")
                return 1
            score = gpu_scale.read_score(run / "runs.sqlite").get("ndcg_at_10")
            indexed = indexed_per_rank((run / "log.txt").read_text()) or [args.scale_docs]
            print(f"{ranks} rank(s): peak RSS of a rank {tree.largest / 2**20:7.0f} MiB, all processes "
                  f"{tree.peak / 2**20:7.0f} MiB, documents a rank indexes {max(indexed):>9,} "
                  f"({', '.join(f'{n:,}' for n in indexed)}), wall {wall:6.1f} s, nDCG@10 {score}", flush=True)  # fmt: skip
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scale", action="store_true", help="the scale case: per-rank memory of bench eval as ranks grow")
    p.add_argument("--scale-docs", type=int, default=40_000, help="--scale: documents of the synthetic corpus")
    p.add_argument("--ranks", default="1,2,4", help="--scale: numbers of ranks (default 1,2,4)")
    p.add_argument("--data-dir", default=None, help="--scale: folder with sts/ and beir/scifact (default: the usual search)")
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=32, help="global batch (default 32)")
    p.add_argument("--max-len", type=int, default=64)
    p.add_argument("--backbone", default="minilm", help="model folder, minilm, or random-bert-tiny|mini|small")
    p.add_argument("--method", default="simcse")
    p.add_argument("--threads", type=int, default=None, help="torch threads in all (default: --nproc)")
    args = p.parse_args()
    args.threads = args.threads or args.nproc
    if args.scale:
        return scale_case(args)

    import torch
    import torch.multiprocessing as mp

    from bench.train.backbone import load_backbone

    with tempfile.TemporaryDirectory() as tmp:
        # Resolve once (a random backbone is written to disk here) so both runs load the same folder.
        model_dir = load_backbone(args.backbone, cache_dir=Path(tmp) / "backbones")[2]
        torch.set_num_threads(1)
        single = train_job(args, model_dir, f"{tmp}/single")
        print(f"1 process  x 1 thread: {args.steps / single['seconds']:.2f} steps/s ({single['seconds']:.1f}s)")
        torch.set_num_threads(args.threads)
        t0 = time.time()
        one = train_job(args, model_dir, f"{tmp}/one")
        print(f"1 process  x {args.threads} threads: {args.steps / one['seconds']:.2f} steps/s "
              f"({one['seconds']:.1f}s; wall with loading {time.time() - t0:.1f}s)")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        Path(f"{tmp}/multi").mkdir()
        t0 = time.time()
        mp.spawn(_worker, args=(args.nproc, port, args, model_dir, f"{tmp}/multi"), nprocs=args.nproc, join=True)
        many = torch.load(f"{tmp}/multi/result.pt")
        print(f"{args.nproc} processes x {max(1, args.threads // args.nproc)} threads: "
              f"{args.steps / many['seconds']:.2f} steps/s ({many['seconds']:.1f}s; wall with start-up {time.time() - t0:.1f}s)")
    ratio = one["seconds"] / many["seconds"]
    print(f"scaling ratio ({args.nproc} processes / 1 process, same threads in all): {ratio:.2f}x (ideal {args.nproc}x); "
          f"against 1 process x 1 thread: {single['seconds'] / many['seconds']:.2f}x; "
          f"method {args.method}, global batch {args.batch_size}, max_len {args.max_len}, {args.steps} steps")
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    print(f"mean training loss: 1 process {mean(one['losses']):.4f}, {args.nproc} processes {mean(many['losses']):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
