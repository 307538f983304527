"""The corpus-scale parts of benchmarks/gpu.py (issue 41): `search` and `scale`. Run through gpu.py, which passes its
GPU sampler; nothing here runs on its own.

search  exact top-1,000 search (bench.evaluate.search) of the SciFact queries over the SciFact corpus, encoded once by
        lenbench at the default precision: the CUDA path (float16 matrices, float32 sums) against the CPU path (numpy
        BLAS, float32): the share of top-10 places that are the same document, the mean overlap of the top-1,000
        sets, the largest score difference and nDCG@10 of each; then the CUDA search alone at scale: random unit
        vectors of --scale-docs documents x 384 and --scale-queries queries (FEVER: 5.4 M x 6,666), seconds.
scale   a synthetic BEIR-layout corpus of --scale-docs documents (2-5 sentences of the STS-B and SciFact texts of
        --data-dir each, about 80 words as FEVER's; a 3-word title) and --scale-queries queries (8 words of a
        sentence of the one document judged relevant), written under the work folder by parallel processes (the
        time to write it is printed, not counted), then the whole cold
        `bench eval --model <MiniLM> --suite beir:synthetic --device cuda` process (empty caches and database):
        wall seconds, peak resident memory (the process's own, wait4, and the sum over its process tree sampled
        every 0.5 s: the tokenizer pool's workers are processes), the GPU's utilisation sampled every 250 ms over
        the whole process and over its busy window (first to last sample at >= 5%: model load and corpus reading
        before it, scoring after it), the score's info (seconds, texts/s, fp32 reruns). Targets (issue 41): wall
        <= 5 minutes, peak RSS <= 16 GB, GPU >= 80% busy while encoding.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
FEVER_DOCS = 5_416_568
FEVER_QUERIES = 6_666
SCALE_TARGETS = {"wall_s": 300.0, "peak_rss_gb": 16.0, "gpu_busy": 80.0}


# ------------------------------------------------------------------------------------------------ search
def measure_search(folder: str, device: str, data_dir: str | None, docs: int, queries: int,
                   limit: int | None = None) -> dict[str, Any]:  # fmt: skip
    """The CUDA search against the CPU search on SciFact (`limit`: its first queries only, the smoke run's), then the
    CUDA search alone at `docs` x `queries`."""
    from bench.encode.encoder import Encoder
    from bench.evaluate.search import exact_search
    from bench.evaluate.suites import EvalContext
    from bench.evaluate.suites.retrieval import TOP_K, load_retrieval, retrieval_metrics, to_run

    data = load_retrieval("scifact", EvalContext(data_dir=data_dir, limit=limit))
    qids, dids = list(data.qrels), list(data.corpus)
    enc = Encoder.load(folder, device=device, use_cache=False, show_progress=False, max_len=256)
    q = enc.encode([data.queries[x] for x in qids])
    d = enc.encode(data.doc_texts(dids))
    runs = {}
    for where in ("cpu", device):
        start = time.perf_counter()
        scores, idx = exact_search(q, d, TOP_K, device=where)
        seconds = time.perf_counter() - start
        per_query = retrieval_metrics(data.qrels, to_run(qids, dids, scores, idx, False, TOP_K))
        runs[where] = (scores, idx, seconds, float(np.mean([m["ndcg_at_10"] for m in per_query.values()])))
    (cs, ci, ct, cn), (gs, gi, gt, gn) = runs["cpu"], runs[device]
    overlap = np.mean([len(set(a) & set(b)) / len(a) for a, b in zip(ci, gi)])
    row = {"precision": enc.precision, "top10_same_place": round(float(np.mean(ci[:, :10] == gi[:, :10])), 4),
           "top1000_overlap": round(float(overlap), 4), "max_score_diff": float(np.abs(cs - gs).max()),
           "ndcg_cpu": round(cn, 4), "ndcg_accelerator": round(gn, 4), "cpu_s": round(ct, 3), "accelerator_s": round(gt, 3)}  # fmt: skip
    print(f"  SciFact ({len(qids)} queries x {len(dids)} documents, {enc.precision} vectors): top-10 places the same "
          f"{100 * row['top10_same_place']:.2f}%, top-1000 overlap {100 * overlap:.2f}%, largest score difference "
          f"{row['max_score_diff']:.2e}, nDCG@10 CPU {cn:.4f} / {device} {gn:.4f}; {ct:.2f} s / {gt:.2f} s", flush=True)  # fmt: skip
    del enc
    row["at_scale"] = search_at_scale(device, docs, queries, q.shape[1])
    return row


def search_at_scale(device: str, docs: int, queries: int, dim: int) -> dict[str, Any]:
    """Seconds of one exact top-1,000 search of random unit vectors (float16 documents in host memory)."""
    import torch

    from bench.evaluate.search import exact_search

    gen = torch.Generator(device=device).manual_seed(0)
    parts = []
    for start in range(0, docs, 1 << 20):  # made on the device a million rows at a time, kept as float16 on the host
        rows = torch.randn((min(1 << 20, docs - start), dim), generator=gen, device=device)
        parts.append(torch.nn.functional.normalize(rows, dim=1).half().cpu().numpy())
    d = np.concatenate(parts)
    del parts
    q = torch.nn.functional.normalize(torch.randn((queries, dim), generator=gen, device=device), dim=1).cpu().numpy()
    start = time.perf_counter()
    _, idx = exact_search(q, d, 1000, device=device)
    seconds = time.perf_counter() - start
    row = {"docs": docs, "queries": queries, "seconds": round(seconds, 2), "k": int(idx.shape[1])}
    print(f"  exact top-1000 on {device}: {queries:,} queries x {docs:,} documents (float16, {dim} wide) in "
          f"{seconds:.2f} s", flush=True)  # fmt: skip
    return row


# ------------------------------------------------------------------------------------------------- scale
def corpus_sentences(data_dir: str | None) -> list[str]:
    """The sentences documents are drawn from: STS-B's and those of the SciFact documents (split at sentence ends by a
    regular expression: pysbd over SciFact takes minutes), 20-300 characters, distinct."""
    from bench.data import locate, read_beir, read_sts
    from bench.data.sentences import regex_split

    sts = read_sts(locate("stsb", data_dir))
    out = sts.sentences1 + sts.sentences2
    beir = read_beir(locate("scifact", data_dir))
    for doc in beir.documents(list(beir.corpus)):
        out += regex_split(doc["text"])
    return [x for x in dict.fromkeys(" ".join(x.split()) for x in out) if 20 <= len(x) <= 300]


_SENTENCES: list[str] = []  # each worker's copy (set by _init_worker)


def _init_worker(sentences: list[str]) -> None:
    global _SENTENCES  # noqa: PLW0603 - the worker's own
    _SENTENCES = sentences


def _write_part(task: tuple[str, int, int, list[int]]) -> list[tuple[int, str]]:
    """Documents start..stop-1 into `path` (2-5 sentences, a title of the first one's first 3 words, as FEVER's
    Wikipedia leads: about 80 words); returns (document, query) of the judged ones: the first 8 words of one of its
    sentences."""
    import random

    path, start, stop, judged = task
    rng = random.Random(start)
    wanted = set(judged)
    queries = []
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(start, stop):
            picked = [rng.choice(_SENTENCES) for _ in range(rng.randint(2, 5))]
            title = " ".join(picked[0].split()[:3])
            fh.write(json.dumps({"_id": f"d{i}", "title": title, "text": " ".join(picked)}) + "\n")
            if i in wanted:
                queries.append((i, " ".join(rng.choice(picked).split()[:8])))
    return queries


def write_scale_corpus(root: Path, docs: int, queries: int, data_dir: str | None, workers: int | None = None) -> Path:
    """root/beir/synthetic/{corpus.jsonl, queries.jsonl, qrels/test.tsv}: `docs` documents written by `workers`
    processes in parts (a minute for FEVER's size on 16 cores), `queries` queries each judged relevant to the
    document it was cut from. benchmarks/scale.py and scale_cold.py draw from the STS/AG News files and the
    wiki-offline package, which the GPU machine lacks; this reads STS-B and SciFact only."""
    import multiprocessing
    import random
    import shutil

    folder = root / "beir" / "synthetic"
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    sentences = corpus_sentences(data_dir)
    judged = sorted(random.Random(0).sample(range(docs), min(queries, docs)))
    workers = workers or max(1, min(os.cpu_count() or 1, 16))
    step = -(-docs // (workers * 4))
    tasks = [(str(folder / f"part-{s}.jsonl"), s, min(s + step, docs), [j for j in judged if s <= j < s + step])
             for s in range(0, docs, step)]  # fmt: skip
    # spawned, not forked: this process holds CUDA and tokenizer threads
    with multiprocessing.get_context("spawn").Pool(workers, initializer=_init_worker, initargs=(sentences,)) as pool:
        picked = [q for part in pool.map(_write_part, tasks) for q in part]
    with open(folder / "corpus.jsonl", "wb") as out:
        for path, *_ in tasks:
            with open(path, "rb") as part:
                shutil.copyfileobj(part, out, 1 << 24)
            os.remove(path)
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": f"q{n}", "text": q}) + "\n"
                                                  for n, (_, q) in enumerate(picked)), encoding="utf-8")  # fmt: skip
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"q{n}\td{d}\t1\n" for n, (d, _) in enumerate(picked)), encoding="utf-8")  # fmt: skip
    return root


class TreeMemory:
    """Peak of the summed resident memory of a process and its descendants, sampled every `period` seconds."""

    def __init__(self, pid: int, period: float = 0.5):
        self.pid, self.period, self.peak = pid, period, 0
        self.largest = 0  # the largest single process seen (a rank, under torchrun)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> "TreeMemory":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()

    def _poll(self) -> None:
        while not self._stop.is_set():
            each = [rss_bytes(p) for p in descendants(self.pid)]
            self.peak = max(self.peak, sum(each))
            self.largest = max(self.largest, max(each, default=0))
            self._stop.wait(self.period)


def descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    todo += [int(c) for c in fh.read().split()]
        except OSError:  # gone, or no children file on this kernel
            continue
    return out


def rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


def busy_window(samples: list[float], floor: float = 5.0) -> list[float]:
    """The samples from the first to the last at >= floor % (the GPU's working stretch of the process)."""
    on = [i for i, s in enumerate(samples) if s >= floor]
    return samples[on[0] : on[-1] + 1] if on else []


def measure_scale(folder: str, device: str, data_dir: str | None, work: Path, docs: int, queries: int, util: Any) -> dict[str, Any]:
    """The whole cold `bench eval` process on a synthetic corpus of `docs` documents (see the module docstring)."""
    root = work / "scale-data"
    start = time.perf_counter()
    write_scale_corpus(root, docs, queries, data_dir)
    written = time.perf_counter() - start
    corpus_bytes = (root / "beir" / "synthetic" / "corpus.jsonl").stat().st_size
    print(f"  corpus: {docs:,} documents, {queries:,} queries ({corpus_bytes / 1e9:.2f} GB) written in {written:.0f} s "
          "(not counted)", flush=True)  # fmt: skip
    run = work / "scale-run"
    run.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("TOKENIZERS_PARALLELISM", "LENBENCH_DB")}
    env.update(LENBENCH_CACHE=str(run / "cache"), LENBENCH_PROGRESS="off", HF_HUB_OFFLINE="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))  # fmt: skip
    cmd = [sys.executable, "-m", "bench", "eval", "--model", folder, "--suite", "beir:synthetic", "--data-dir", str(root),
           "--device", device, "--db", str(run / "runs.sqlite"), "--no-progress", "--max-len", "256"]  # fmt: skip
    with open(run / "log.txt", "w") as log, util.sampling() as samples:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
        with TreeMemory(proc.pid) as tree:
            _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    row: dict[str, Any] = {"docs": docs, "queries": queries, "returncode": code, "wall_s": round(wall, 1),
                           "peak_rss_bytes": usage.ru_maxrss * 1024, "tree_peak_rss_bytes": tree.peak,
                           "corpus_write_s": round(written, 1)}  # fmt: skip
    window = busy_window(samples)
    row["gpu_util_mean"] = round(float(np.mean(samples)), 1) if samples else None
    row["gpu_busy_window_mean"] = round(float(np.mean(window)), 1) if window else None
    row["gpu_busy_window_s"] = round(len(window) * 0.25, 1) if window else None
    if code != 0:
        row["log_tail"] = (run / "log.txt").read_text(errors="replace")[-2000:]
        print(f"  bench eval failed ({code}): {row['log_tail'][-800:]}", flush=True)
        return row
    row.update(read_score(run / "runs.sqlite"))
    peak = max(row["peak_rss_bytes"], tree.peak)
    print(f"  whole cold bench eval, {docs:,} documents: {wall:.0f} s (target <= {SCALE_TARGETS['wall_s']:.0f}), peak "
          f"RSS {row['peak_rss_bytes'] / 1e9:.2f} GB, process tree {tree.peak / 1e9:.2f} GB (target <= "
          f"{SCALE_TARGETS['peak_rss_gb']:.0f}), GPU {row['gpu_util_mean']}% busy over the process, "
          f"{row['gpu_busy_window_mean']}% over its {row['gpu_busy_window_s']} s busy window (target >= 80); "
          f"nDCG@10 {row.get('ndcg_at_10')}; {docs / wall:,.0f} documents/s", flush=True)  # fmt: skip
    row["peak_memory_bytes"] = peak
    return row


def read_score(db: Path) -> dict[str, Any]:
    """nDCG@10 of the clean variant and its score info (seconds, texts/s, fp32 reruns...)."""
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT value, info FROM scores WHERE metric = 'ndcg_at_10' AND variant = 'clean' "
                           "ORDER BY rowid DESC LIMIT 1").fetchone()  # fmt: skip
    if row is None:
        return {}
    info = json.loads(row[1]) if row[1] else {}
    return {"ndcg_at_10": round(float(row[0]), 4), "score_info": info}


def scale_checks(row: dict[str, Any]) -> list[tuple[str, float | None, str, bool | None]]:
    """(check, measured, target, passed) of the scale part (issue 41's GPU lines)."""
    if not row or row.get("returncode") != 0:
        return [("scale: the whole cold bench eval finished", None, "exit 0", False)] if row else []
    docs = f"{row['docs']:,}"
    busy = row.get("gpu_busy_window_mean")
    return [
        (f"scale: whole cold bench eval of {docs} documents, MiniLM (s)", row["wall_s"], "<= 300", row["wall_s"] <= 300),
        ("scale: peak RSS, process tree (GB)", row["peak_memory_bytes"] / 1e9, "<= 16", row["peak_memory_bytes"] / 1e9 <= 16),
        ("scale: GPU busy over the busy window (%)", busy, ">= 80", None if busy is None else busy >= 80),
    ]
