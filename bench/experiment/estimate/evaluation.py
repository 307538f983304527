"""What an evaluation will cost before it starts (`bench eval ... --estimate`; `bench run --estimate` builds on it,
bench.experiment.estimate.run): per dataset its documents, queries, texts and tokens, the disk its caches will
take, the memory it needs, and its time on this machine; then the process's fixed costs and the totals.

Nothing heavy runs and nothing is recorded. The sizes come from the files (bench.experiment.estimate.data: newline
counts, qrels), or from the publishers' figures where a dataset is not here yet (then the line says what to
download and how big). The time comes from a calibration of a few seconds with the model, backend, precision and
batching the evaluation will use: every dataset is scored twice for real, by its own suite, on two random samples
(about PILOT_ITEMS items, then as many as CALIBRATION_SECONDS allow) written in its layout to a scratch folder, with
an empty scratch cache; the slope between the last two is the cost of one more text (reading, tokenising, the forward,
the cache writes, scoring), the rest is the dataset's fixed cost. Exact search, whose cost grows with queries x
documents, is timed apart on random vectors. The process's own costs are measured too: a fresh interpreter
importing lenbench's job modules (the start), and the model's first call (loading it, an ONNX export when the real
cache has none). Caches are assumed cold: texts the embedding or token-id cache already holds make the real run
faster than said.

    est = estimate_evaluation(EvalSpec("minilm", ["beir:scifact"]))
    print("\\n".join(est.lines())); est.seconds
"""

from __future__ import annotations

import contextlib

import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bench.evaluate.subsets import FIRST, SAMPLE
from bench.experiment.estimate.data import Member, filler_words, measure_member, members, write_sample

# The whole calibration of `bench eval/run --estimate` (--calibration-seconds): the process start, the model's first
# call, then an equal share of what is left for each dataset's samples (and, for a run, each method's steps).
CALIBRATION_BUDGET = 15.0
CALIBRATION_SECONDS = 2.5  # one dataset's samples, where no budget is given
MIN_DATASET_SECONDS = 0.0  # a dataset past the budget still gets its pilot: no dataset goes unmeasured
PILOT_ITEMS = 16  # the first sample
# The next sample is sized to take this share of what is left of a dataset's budget: a rate measured on smaller
# samples, on a shared machine, under-predicts as often as not, and a sample that overran took the whole budget
# past its end (21 s for a 15 s calibration of SciFact at a load of 4 on 2 cores, sized to fill it all).
FILL = 0.6
MAX_SAMPLE_ITEMS = 20_000
# Memory the cold path holds per document beyond its embedding row (its id, its corpus offsets, the run's share):
# benchmarks/scale.py --cold measures it (bytes_per_doc_beyond_embeddings; 839 at 100,000 documents, README).
COLD_BYTES_PER_DOC = 840
BM25_BYTES_PER_DOC = 756  # benchmarks/scale.py's BM25 slope (lazy corpus, chunked index)
JOB_MODULES = ("bench.cli", "bench.experiment.evaluation", "bench.evaluate.runner", "results_db", "numpy")


@dataclass
class DatasetEstimate:
    suite: str
    dataset: str
    documents: int  # documents of a BEIR set, pairs of an STS set, texts of a labelled set
    queries: int = 0
    unit: str = "documents"
    texts: int = 0  # model inputs encoded, every variant
    tokens: int = 0  # real tokens run through the model, every variant
    seconds: float | None = None
    cache_bytes: int = 0
    memory_bytes: int = 0
    download: list[tuple[str, str, int]] = field(default_factory=list)  # (dataset, url, approximate bytes)
    note: str = ""
    actual_seconds: float | None = None  # a finished run of this exact evaluation took (Run.runtime)

    @property
    def key(self) -> str:
        return f"{self.suite}/{self.dataset}"


@dataclass
class Estimate:
    datasets: list[DatasetEstimate]
    start_seconds: float  # a fresh interpreter importing the job's modules
    load_seconds: float  # the model's first call: loading it (an export)
    base_memory_bytes: int  # this process with the model loaded
    calibration_seconds: float
    device: str
    cache_dir: str
    config_hash: str | None = None  # of the evaluation (None for BM25 or when it could not be computed)
    actual_wall_seconds: float | None = None

    @property
    def seconds(self) -> float:
        return self.start_seconds + self.load_seconds + sum(d.seconds or 0.0 for d in self.datasets)

    @property
    def peak_memory_bytes(self) -> int:
        return self.base_memory_bytes + max((d.memory_bytes for d in self.datasets), default=0)

    @property
    def cache_bytes(self) -> int:
        return sum(d.cache_bytes for d in self.datasets)

    @property
    def downloads(self) -> dict[str, tuple[list[str], int]]:
        """url -> (the datasets it holds, its approximate bytes): each file once, however many datasets it holds
        (cqadupstack.zip: 12 forums, fetched once; bench.data.download unpacks them all)."""
        out: dict[str, tuple[list[str], int]] = {}
        for d in self.datasets:
            for name, url, size in d.download:
                names, _ = out.setdefault(url, ([], size))
                if name not in names:
                    names.append(name)
        return out

    @property
    def download_bytes(self) -> int:
        return sum(size for _, size in self.downloads.values())

    def lines(self) -> list[str]:
        """The table `bench eval --estimate` prints (bench.experiment.estimate.report)."""
        from bench.experiment.estimate.report import estimate_lines

        return estimate_lines(self)


def process_start_seconds() -> float:
    """Seconds a fresh interpreter takes to import the modules an evaluation job starts with."""
    t0 = time.monotonic()
    code = "import " + ", ".join(JOB_MODULES)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    try:
        subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return 0.0
    return time.monotonic() - t0


def rss_bytes() -> int:
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import resource

        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def settled_bytes(folder: Path) -> int:
    """The folder's size as a finished run leaves it: each SQLite cache's write-ahead log checkpointed into its file
    first. An open cache keeps what it wrote in its log, where a page rewritten by each batch's transaction is there
    once per rewrite (about twice the settled size on AG News); the run's close folds the log into the file."""
    import sqlite3

    for wal in folder.rglob("*.sqlite-wal"):
        try:
            with contextlib.closing(sqlite3.connect(wal.with_name(wal.name[: -len("-wal")]), timeout=5)) as con:
                con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error:  # busy or not a database: counted as it lies
            pass
    return sum(p.stat().st_size for p in folder.rglob("*")
               if p.is_file() and not p.is_symlink() and not p.name.endswith("-shm"))  # fmt: skip - shm: an index, removed at close


def link_exports(real_cache: Path, scratch: Path) -> None:
    """The real cache's ONNX exports, linked into the scratch cache: a model exported before is not exported (and
    timed) again; a new export goes to the scratch folder, as the real run would make it."""
    source = real_cache / "onnx"
    if not source.is_dir():
        return
    (scratch / "onnx").mkdir(parents=True, exist_ok=True)
    for f in source.iterdir():
        if f.is_file():
            (scratch / "onnx" / f.name).symlink_to(f.resolve())


def find_members(dataset: str, kind: str, ctx: Any) -> list[Member]:
    """Each dataset `dataset` reads, counted here or taken from its published figures."""
    from bench.data import find, get_info
    from bench.data.errors import DatasetMissingError

    out = []
    for name in members(dataset):
        try:
            located = find(name, ctx.data_dir, kind=kind)
        except DatasetMissingError:
            located = None
        out.append(measure_member(get_info(name, kind=kind), located))
    return out


@dataclass
class Calibrator:
    """Scores samples of a dataset with the real suite and model, and times it (see the module docstring)."""

    model: Any
    ctx: Any
    scratch: Path
    words: list[str]
    device: str = "cpu"
    search_rates: dict[int, float] = field(default_factory=dict)  # dim -> query-document pairs searched per second
    taken: dict[str, set[int]] = field(default_factory=dict)  # file -> the lines a sample has used (never reused)

    def run(self, suite: Any, dataset: str, sub: Any, group: list[Member], items: int, tag: str,
            skip: int = 0) -> tuple[float, int, int, int, int]:  # fmt: skip
        """Score `items` sampled items: (seconds, texts written, texts encoded, tokens run, cache bytes written)."""
        root = self.scratch / "data" / tag
        total = sum(m.items for m in group) or 1
        rng = random.Random(f"estimate|{dataset}|{tag}")
        written = sum(write_sample(m, root, max(1, round(items * m.items / total)), rng, self.words, skip=skip,
                                   taken=self.taken)
                      for m in group)  # fmt: skip
        enc = getattr(self.model, "inner", None) or self.model
        texts0, tokens0 = int(getattr(enc, "texts_encoded", 0) or 0), int(getattr(enc, "tokens_run", 0) or 0)
        bytes0 = settled_bytes(self.scratch / "cache")
        mine = replace(sub, data_dir=str(root), files_read=set(), sources={}, limit=None, limit_applies=None,
                       fetch=False)  # fmt: skip
        started = time.monotonic()
        suite.evaluate(self.model, dataset, mine)
        seconds = time.monotonic() - started
        return (seconds, written, int(getattr(enc, "texts_encoded", 0) or 0) - texts0,
                int(getattr(enc, "tokens_run", 0) or 0) - tokens0, settled_bytes(self.scratch / "cache") - bytes0)

    def search_seconds(self, queries: int, documents: int, dim: int) -> float:
        """Exact top-k search of `queries` over `documents` vectors of `dim`, from a timed search on random ones."""
        if dim not in self.search_rates:
            import numpy as np

            from bench.evaluate.search import exact_search
            from bench.evaluate.suites.retrieval import TOP_K

            rng = np.random.default_rng(0)
            q = rng.standard_normal((256, dim), dtype=np.float32)
            d = rng.standard_normal((32_768, dim), dtype=np.float32)
            started = time.monotonic()
            exact_search(q, d, TOP_K, device=self.device)
            self.search_rates[dim] = q.shape[0] * d.shape[0] / max(time.monotonic() - started, 1e-6)
        return queries * documents / self.search_rates[dim]


@dataclass
class Fit:
    """What the samples of one dataset say: seconds and cache bytes per text, the fixed rest of each, and the
    largest sample's texts written, texts encoded and tokens run (to scale the counts from)."""

    text_seconds: float
    fixed_seconds: float
    text_cache_bytes: float
    fixed_cache_bytes: float
    sample: tuple[float, int, int, int, int]


def fit(cal: Calibrator, target: tuple[Any, str, Any, list[Member]], items: int, texts: int, disjoint: bool,
        budget: float) -> Fit:  # fmt: skip
    """`target`: what `Calibrator.run` samples (the suite, the dataset, its context, its members). A pilot of
    PILOT_ITEMS items, then samples sized by the rate measured so far to fill FILL of what is left of `budget`
    seconds, each at least twice the one before (three at most; none when the budget has no room for one). Time and
    cache bytes are each a line through the pilot and the largest sample: far apart, so that the noise of a shared machine
    moves the slope least, and what every evaluation pays once (an index, a database file's pages) stays out of
    the per-text cost that is multiplied up to the whole dataset."""
    n = min(PILOT_ITEMS, items)
    pilot = cal.run(*target, n, "s0")
    used, spent = n, pilot[0]  # samples never overlap (STS and kNN: consecutive slices; BEIR: lines not taken before)
    # Each next sample is sized by the largest sample's whole rate, fixed costs included: the slope between two small
    # samples is mostly noise (0.0015 s a text where 0.012 was so, on AG News: a 24 s sample), and the whole rate is
    # never below the marginal one, so a sample sized by it does not overrun.
    cur, rate = pilot, pilot[0] / max(pilot[1], 1)
    for round_ in range(1, 4):
        room, left = items - used, budget - spent
        if room <= n or left < pilot[0] or (cur is not pilot and cur[0] >= left):
            break
        wanted = int(min(FILL * left / max(rate, 1e-9) * items / max(texts, 1), MAX_SAMPLE_ITEMS, room))
        if wanted < 2 * n:  # no room for a sample far enough from this one to move the line: what is, is the fit
            break
        n = wanted
        cur = cal.run(*target, n, f"s{round_}", skip=used if disjoint else 0)
        used, spent = used + n, spent + cur[0]
        rate = cur[0] / max(cur[1], 1)
    if cur is pilot:  # the dataset is no larger than its pilot, or the budget allowed no more: the pilot's rates
        return Fit(rate, 0.0, pilot[4] / max(pilot[1], 1), 0.0, pilot)
    wider = cur[1] - pilot[1]
    grew = wider > 0 and cur[0] > pilot[0]
    slope = (cur[0] - pilot[0]) / wider if grew else rate
    cache_slope = max(0.0, (cur[4] - pilot[4]) / wider) if wider > 0 else cur[4] / max(cur[1], 1)
    return Fit(slope, max(0.0, pilot[0] - slope * pilot[1]), cache_slope, max(0.0, pilot[4] - cache_slope * pilot[1]),
               cur)  # fmt: skip


def limited(member: Member, limit: int | None, mode: str = SAMPLE) -> Member:
    """The part of a dataset `--limit N` scores: N pairs or texts; N judged queries of a BEIR set, against its whole
    corpus for a sample, with their judged documents and LIMIT_DISTRACTORS_PER_QUERY others each for the first N
    (bench.evaluate.suites.retrieval.limit_slice)."""
    if not limit:
        return member
    if member.info.kind != "beir":
        return replace(member, items=min(member.items, limit))
    from bench.evaluate.suites.retrieval import LIMIT_DISTRACTORS_PER_QUERY

    queries = min(member.queries, limit)
    if mode != FIRST:
        return replace(member, queries=queries)
    return replace(member, items=min(member.items, queries * (1 + LIMIT_DISTRACTORS_PER_QUERY)), queries=queries)


def estimate_dataset(cal: Calibrator, suite: Any, families: tuple[str, ...], dataset: str,
                     emb_bytes: int, budget: float = CALIBRATION_SECONDS) -> DatasetEstimate:  # fmt: skip
    """One dataset of one suite: its size, and the costs scaled from timed samples that take about `budget`
    seconds together."""
    from bench.evaluate.runner import suite_variants

    kind = getattr(suite, "data_kind", None)
    group = [limited(m, cal.ctx.limit, cal.ctx.limit_mode) for m in find_members(dataset, kind, cal.ctx)]
    unit = {"beir": "documents", "sts": "pairs"}.get(kind, "texts")
    est = DatasetEstimate(suite.name, dataset, sum(m.items for m in group), sum(m.queries for m in group), unit)
    est.download = [(m.info.name, m.info.source, m.figures.download_bytes if m.figures else 0)
                    for m in group if m.located is None]  # fmt: skip - one file per url (Estimate.downloads)
    if est.documents == 0:
        est.note = "its size is not known here: " + "; ".join(m.info.source for m in group)
        return est
    sub = replace(cal.ctx, attacked=bool(families), families=tuple(families) or cal.ctx.families)
    total_texts = sum(m.texts for m in group)
    disjoint = all(m.rows is not None for m in group)  # STS and kNN samples are slices of one order
    fitted = fit(cal, (suite, dataset, sub, group), est.documents, total_texts, disjoint, budget)
    scale = total_texts / max(fitted.sample[1], 1)
    est.texts, est.tokens = (int(v * scale) for v in fitted.sample[2:4])
    est.cache_bytes = int(fitted.fixed_cache_bytes + fitted.text_cache_bytes * total_texts)
    est.seconds = fitted.fixed_seconds + fitted.text_seconds * total_texts
    dim = _dim(cal.model)
    if kind == "beir" and dim:
        variants = len(suite_variants(suite, sub))
        est.seconds += variants * sum(cal.search_seconds(m.queries, m.items, dim) for m in group)
    per_doc = BM25_BYTES_PER_DOC if not dim else dim * emb_bytes + COLD_BYTES_PER_DOC
    biggest = max(group, key=lambda m: m.items)
    est.memory_bytes = biggest.items * per_doc + biggest.queries * (dim or 0) * 4
    if est.download:
        est.note = "timed on a made-up sample at its published lengths"
    return est


def _dim(model: Any) -> int:
    enc = getattr(model, "inner", None) or model
    if not callable(getattr(enc, "encode", None)):
        return 0
    try:
        return int(enc.dim)
    except Exception:  # noqa: BLE001 - a model without a dimension: memory is estimated without it
        return 0


def estimate_evaluation(spec: Any, *, calibration_seconds: float = CALIBRATION_BUDGET,
                        say: Callable[..., None] = lambda *a, **k: None) -> Estimate:  # fmt: skip
    """The estimate of `spec` (an EvalSpec) on this machine, its calibration taking about `calibration_seconds` in
    all (more: larger samples, a tighter estimate); see the module docstring. `say` hears progress."""
    from bench.encode.cache import default_cache_dir
    from bench.evaluate.runner import check_model
    from bench.evaluate.suites import parse_suites

    suites = parse_suites(spec.suite_args)
    started = time.monotonic()
    start = process_start_seconds()
    with tempfile.TemporaryDirectory(prefix="lenbench-estimate-") as tmp:
        scratch = Path(tmp)
        link_exports(default_cache_dir(), scratch / "cache")
        spec, model = spec.load(cache_dir=scratch / "cache")  # a model object: its encoder, and `model` its name
        check_model(model, suites)
        t0 = time.monotonic()
        if callable(getattr(model, "encode", None)):
            model.encode(["A first text loads the model."], desc="estimate")
        load = time.monotonic() - t0
        base = rss_bytes()
        cal = Calibrator(model, spec.settings.context(), scratch, filler_words(), str(getattr(model, "device_name", "cpu")))
        deadline = started + calibration_seconds
        out = estimate_suites(cal, suites, 2 if spec.settings.encoder.emb_dtype == "fp16" else 4, say, deadline)
        config_hash = _config_hash(spec, model)
        close_caches(model)
    return Estimate(out, start, load, base, time.monotonic() - started, cal.device, str(default_cache_dir()), config_hash)


def estimate_suites(cal: Calibrator, suites: list[tuple[Any, tuple[str, ...]]], emb_bytes: int,
                    say: Callable[..., None], deadline: float | None = None) -> list[DatasetEstimate]:  # fmt: skip
    """Every dataset of every suite, calibrated with progress bars off (the samples' bars would be noise), each
    with an equal share of the time left before `deadline` (time.monotonic()); at least MIN_DATASET_SECONDS."""
    from bench.runtime import progress

    out: list[DatasetEstimate] = []
    remaining = sum(len(suite.datasets()) for suite, _ in suites if getattr(suite, "data_kind", None) is not None)
    for suite, families in suites:
        if getattr(suite, "data_kind", None) is None:
            out.append(DatasetEstimate(suite.name, "*", 0, note="not estimated: this suite finds its own data"))
            continue
        for dataset in suite.datasets():
            left = CALIBRATION_SECONDS * remaining if deadline is None else deadline - time.monotonic()
            budget = max(MIN_DATASET_SECONDS, left / remaining)
            remaining -= 1
            say(f"estimate  calibrating {suite.name}:{dataset} ...")
            progress.configure(quiet=True)
            try:
                out.append(estimate_dataset(cal, suite, tuple(families), dataset, emb_bytes, budget))
            finally:
                progress.restore()
    return out


def close_caches(model: Any) -> None:
    """Close the model's token-id cache while its scratch folder is still there: left to the process's exit, it
    would write its sorted index into a deleted folder and log that it could not."""
    enc = getattr(model, "inner", None) or model
    token_ids = getattr(enc, "token_ids", None)
    if token_ids is not None:
        token_ids.close()


def _config_hash(spec: Any, model: Any) -> str | None:
    try:
        return spec.config_hash(model.describe())
    except Exception:  # noqa: BLE001 - the comparison with an earlier run is a courtesy
        return None
