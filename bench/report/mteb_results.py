"""MTEB result files in and out: our runs as MTEB's result layout, and MTEB results as reference rows.

Layout (mteb's ResultCache and the embeddings-benchmark/results repository):
    DIR/<org>__<model>/<revision>/<TaskName>.json    a TaskResult (mteb's own class writes and reads it)
    DIR/<org>__<model>/<revision>/model_meta.json    mteb's ModelMeta.to_dict()

Dataset <-> task: the catalog's `mteb_task` (STS12-16, STSBenchmark, SICK-R, the 13 BEIR sets and the 12
CQADupStack forums; split "test"), and `mteb:TASK` suite rows, which are MTEB tasks already. Only clean scores are
exported: elongation-attacked variants are not MTEB tasks. MTEB stores fractions, we store x100.

Names: a trained run is `lenbench/<method>-<backbone>` at revision `<config hash[:12]>` (which covers how it
was scored); an evaluated model is at `<weights fingerprint[:12]>-<pooling>-len<max_len>` (`scoring_settings`);
an evaluated hub model keeps its id (the packaged all-MiniLM-L6-v2 is `sentence-transformers/all-MiniLM-L6-v2`), a local folder becomes
`lenbench/<folder name>`. Imported files become one Run per (model, revision) with kind "reference", model and method
= the MTEB model name, no training, and their scores under our own (suite, dataset, metric) names where a task maps
to one, so they line up with our runs in comparisons (`mteb`, TASK, main score name otherwise).
"""

from __future__ import annotations

import datetime as dt
import functools
import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from bench.data.catalog import CATALOG, CQADUPSTACK_FORUMS
from bench.runtime.errors import ConfigError
from results_db.records import ScoreRecord
from results_db.redact import redact

REFERENCE_KIND = "reference"
MTEB_ORG = "lenbench"
PACKAGED_MINILM = "sentence-transformers/all-MiniLM-L6-v2"
# our metric name -> MTEB's, where they differ (the retrieval metrics and `mteb:` rows already use MTEB's names)
TO_MTEB_METRIC = {"spearman": "cosine_spearman"}
FROM_MTEB_METRIC = {v: k for k, v in TO_MTEB_METRIC.items()}
SUITE_OF_KIND = {"sts": "sts", "beir": "beir"}
EXPORT_SPLIT = "test"


@functools.lru_cache(maxsize=1)
def dataset_tasks() -> dict[str, str]:
    """Our dataset name -> MTEB task name, for the datasets whose whole test split is that task."""
    out = {}
    for name, info in CATALOG.items():
        if info.mteb_task and info.kind in SUITE_OF_KIND and info.split is None and not name.endswith(("-dev", "-train")):
            out[name] = info.mteb_task
    return out


def task_of(suite: str, dataset: str) -> str | None:
    if suite == "mteb":
        return dataset
    if suite in SUITE_OF_KIND.values():
        return dataset_tasks().get(dataset)
    return None


@functools.lru_cache(maxsize=None)  # a results repository names the same tasks thousands of times
def _get_task(name: str) -> Any:
    import mteb

    try:
        return mteb.get_task(name)
    except Exception:  # noqa: BLE001 - a task this mteb version does not know
        return None


# ------------------------------------------------------------------------------------------- export
def model_identity(run: dict[str, Any]) -> tuple[str, str]:
    """(MTEB model name 'org/model', revision) of one of our runs."""
    config = run.get("config") or {}
    if run.get("kind") == "train":
        backbone = Path(str(run.get("backbone", "")).rstrip("/")).name or "backbone"
        return f"{MTEB_ORG}/{run['method']}-{backbone}", str(run.get("config_hash", ""))[:12] or f"run-{run['id']}"
    model = str(run.get("model", ""))
    revision = str(config.get("model_fingerprint") or "")[:12] or _weights_fingerprint(model) or "no_revision_available"
    revision = "-".join([revision, *scoring_settings(config)])  # a max_len-16 score is not the max_len-256 model's
    if model.lower() in ("minilm", "all-minilm-l6-v2"):
        return PACKAGED_MINILM, revision
    if len(model.split("/")) == 2 and not Path(model).exists():
        return model, revision  # a hub id
    return f"{MTEB_ORG}/{Path(model.rstrip('/')).name or model}", revision


def scoring_settings(config: dict[str, Any]) -> list[str]:
    """How an evaluated model was scored, as revision parts: pooling, `len<max_len>`, and a non-default embedding
    dtype or precision (`bench eval` keeps them at the top of its config, `bench run`'s untrained row under "eval").
    The same weights scored at max_len 16 and 256 are two revisions: their scores must not share a folder."""
    where = config.get("eval") if isinstance(config.get("eval"), dict) else config
    parts = [str(where.get("pooling") or config.get("pooling") or "")]
    max_len = where.get("max_len")
    parts.append(f"len{max_len}" if max_len else "")
    parts += [str(v) for v in (config.get("emb_dtype"), where.get("precision") or config.get("precision"))
              if v and v not in ("fp32", "auto")]
    return [p for p in parts if p]


def _weights_fingerprint(model: str) -> str:
    """The weights' fingerprint of a model folder (or 'minilm'), as the encoder computes it: the revision of an
    evaluation row that did not record one (the untrained backbone of `bench run`). '' when it cannot be read."""
    try:
        from bench.encode.loading import folder_fingerprint, resolve_model

        source = resolve_model(model)
        return folder_fingerprint(source)[:12] if Path(source).is_dir() else ""
    except Exception:  # noqa: BLE001 - a folder moved or deleted since the run: no fingerprint, said by the fallback
        return ""


def official_size_problem(task: Any, split: str, rows: pd.DataFrame, run: dict[str, Any], dataset: str) -> str | None:
    """Why these scores do not stand for MTEB's task (None when they do): an STS file with another number of pairs,
    a retrieval set with other queries or another corpus size than MTEB's descriptive statistics of the split
    (a local subset such as a 200-pair stsb-test.tsv or a 244-document SciFact). Exported files would carry the
    task's official dataset revision, so such scores are not exported."""
    stats = (getattr(task.metadata, "descriptive_stats", None) or {}).get(split) or {}
    n = int(rows["n"].max()) if "n" in rows and len(rows) else None
    queries = stats.get("num_queries")
    expected = queries if queries is not None else stats.get("num_samples")
    if expected is not None and n is not None and n != int(expected):
        unit = "queries" if queries is not None else "pairs"
        return f"{n} {unit}, MTEB's {task.metadata.name} {split} has {int(expected)}"
    documents = stats.get("num_documents")
    if documents is not None:
        counted = _corpus_size(run, dataset)
        if counted is not None and counted != int(documents):
            return f"a corpus of {counted} documents, MTEB's {task.metadata.name} {split} has {int(documents)}"
    return None


def _corpus_size(run: dict[str, Any], dataset: str) -> int | None:
    """Lines of the corpus.jsonl[.gz] the run read for `dataset` (its data fingerprint names the files), or None."""
    import gzip

    for path in (run.get("data_fingerprint") or {}):
        p = Path(path)
        if p.name.startswith("corpus.jsonl") and dataset.replace("cqadupstack-", "") in p.parts and p.is_file():
            opener = gzip.open if p.suffix == ".gz" else open
            with opener(p, "rb") as fh:
                return sum(1 for line in fh if line.strip())
    return None


def _evaluation_times(scores: pd.DataFrame, started: dt.datetime | None) -> dict[str, float | None]:
    """Seconds the run spent on each dataset (all its variants): from the previous dataset's last score (the run's
    start for the first) to this dataset's last score. Per-dataset timing is not stored otherwise."""
    times: dict[str, float | None] = {}
    last = scores.groupby("dataset")["created_at"].max().sort_values()
    previous = pd.Timestamp(started) if started is not None else None
    for dataset, stamp in last.items():
        times[str(dataset)] = None if previous is None else max(0.0, (stamp - previous).total_seconds())
        previous = stamp
    return times


def evaluation_start(run: dict[str, Any]) -> dt.datetime | None:
    """When a run (stored before per-dataset times were) began scoring: its start, after the training it timed."""
    started = run.get("started_at")
    trained = (run.get("budget_consumed") or {}).get("seconds")
    if started is None or not trained:
        return started
    return pd.Timestamp(started) + pd.Timedelta(seconds=float(trained))


def subset_limit(run: dict[str, Any], info: Any = None) -> int | None:
    """The --limit a score was computed under (Score.info, else the run's config), None for the whole dataset."""
    if isinstance(info, str):
        try:
            info = json.loads(info)
        except ValueError:
            info = None
    if isinstance(info, dict) and info.get("limit"):
        return int(info["limit"])
    if isinstance(info, dict) and info.get("limit_above_size"):  # --limit reached the whole set: a full-set score
        return None
    config = run.get("config") or {}
    limit = config.get("limit") or (config.get("eval") or {}).get("limit")
    return int(limit) if limit else None


def task_results(run: dict[str, Any], scores: pd.DataFrame, refused: list[str] | None = None) -> list[Any]:
    """mteb TaskResults for the clean scores of one run that map to an MTEB task. Scores of a subset (--limit)
    are left out: an MTEB result stands for the whole evaluation split; so are scores on a local file whose size is
    not the task's (`official_size_problem`; why goes into `refused`)."""
    from mteb.results import TaskResult

    clean = scores[scores["variant"] == "clean"].copy()
    if "info" in clean:
        clean = clean[[subset_limit(run, i) is None for i in clean["info"]]]
    elif subset_limit(run) is not None:
        clean = clean.iloc[0:0]
    if clean.empty:
        return []
    clean["created_at"] = pd.to_datetime(clean["created_at"])
    measured = (run.get("runtime") or {}).get("evaluation_seconds") or {}
    times = _evaluation_times(clean, evaluation_start(run))
    out = []
    for (suite, dataset), rows in clean.groupby(["suite", "dataset"], sort=True):
        name = task_of(str(suite), str(dataset))
        task = _get_task(name) if name else None
        if task is None:
            continue
        values = {TO_MTEB_METRIC.get(m, m): float(v) / 100.0 for m, v in zip(rows["metric"], rows["value"])}
        main = task.metadata.main_score
        if main not in values:
            continue
        split = EXPORT_SPLIT if EXPORT_SPLIT in task.metadata.eval_splits else task.metadata.eval_splits[0]
        problem = official_size_problem(task, split, rows, run, str(dataset))
        if problem is not None:
            if refused is not None:
                refused.append(f"run {run.get('id')} {dataset}: {problem}")
            continue
        result = TaskResult.from_task_results(
            task,
            {split: {"default": {**values, "main_score": values[main]}}},
            evaluation_time=measured.get(f"{suite}/{dataset}", times.get(str(dataset))),
            date=rows["created_at"].max().to_pydatetime().replace(tzinfo=dt.timezone.utc),
        )
        out.append(result)
    return out


def model_meta(run: dict[str, Any], name: str, revision: str) -> dict[str, Any]:
    """mteb ModelMeta.to_dict() for one of our runs (size from Run.model_info)."""
    from mteb.models.model_meta import ModelMeta

    info = run.get("model_info") or {}
    trained = run.get("kind") == "train"
    meta = ModelMeta(
        loader=None,
        name=name,
        revision=revision,
        release_date=None,  # unknown: the run's date is not the model's release (mteb leaves it empty too)
        languages=["eng-Latn"],
        n_parameters=info.get("parameters"),
        memory_usage_mb=round(info["parameters"] * 4 / 2**20, 1) if info.get("parameters") else None,
        max_tokens=info.get("max_tokens"),
        embed_dim=info.get("embedding_dim"),
        license=None,
        open_weights=True,
        public_training_code=redact(run.get("command") or "") or None if trained else None,
        public_training_data=run.get("train_corpus") or None if trained else None,
        framework=["Sentence Transformers", "PyTorch"],
        similarity_fn_name="cosine",
        use_instructions=False,
        training_datasets=None,
        adapted_from=str(run.get("backbone")) if trained else None,
    )
    return meta.to_dict()


@dataclass
class ExportSummary:
    files: list[Path] = field(default_factory=list)
    skipped_runs: list[int] = field(default_factory=list)  # runs with nothing MTEB-shaped
    refused: list[str] = field(default_factory=list)  # scores on data that is not the task's split, and why
    replaced: list[str] = field(default_factory=list)  # files a later run of the same model revision wrote again


def export_runs(db: Any, run_ids: list[int], out_dir: str | Path) -> ExportSummary:
    from bench.runtime.writes import atomic_file

    out = Path(out_dir)
    summary = ExportSummary()
    for run_id in run_ids:
        run = db.get_run(run_id)
        results = task_results(run, db.scores([run_id]), summary.refused)
        if not results:
            summary.skipped_runs.append(run_id)
            continue
        name, revision = model_identity(run)
        folder = out / name.replace("/", "__") / revision
        folder.mkdir(parents=True, exist_ok=True)
        for result in results:
            path = folder / f"{result.task_name}.json"
            if path in summary.files:  # an earlier run of the same model revision wrote it: the later run's stays
                summary.replaced.append(f"{path.relative_to(out)} (run {run_id} over an earlier run)")
            else:
                summary.files.append(path)
            with atomic_file(path, f"the MTEB result {path.name}") as tmp:  # whole, or one line and no partial file
                result.to_disk(tmp)
        meta_path = folder / "model_meta.json"
        with atomic_file(meta_path, "the MTEB model_meta.json") as tmp:
            tmp.write_text(json.dumps(model_meta(run, name, revision), default=str, indent=4))
        if meta_path not in summary.files:
            summary.files.append(meta_path)
    return summary


# ------------------------------------------------------------------------------------------- import
@dataclass
class ReferenceModel:
    """The MTEB results of one (model, revision), ready to become one reference Run and its scores."""

    name: str
    revision: str
    folder: Path
    records: list[ScoreRecord]
    model_info: dict[str, Any]
    files: list[str]


@functools.lru_cache(maxsize=1)
def _task_datasets() -> dict[str, str]:
    return {task: dataset for dataset, task in dataset_tasks().items()}


def records_of(result: Any) -> list[ScoreRecord]:
    """Our score rows for one mteb TaskResult: its eval split, main score (and the retrieval metrics) x100."""
    task = _get_task(result.task_name)
    splits = list(task.metadata.eval_splits) if task is not None else []
    split = next((s for s in [*splits, "test"] if s in result.scores), None) or next(iter(result.scores), None)
    if split is None:
        return []
    entries = result.scores[split]
    main_name = task.metadata.main_score if task is not None else "main_score"
    info = {"source": "mteb", "split": split, "hf_subsets": sorted(str(e.get("hf_subset")) for e in entries),
            "mteb_version": result.mteb_version, "dataset_revision": result.dataset_revision, "main_score": main_name}
    main = result.get_score(splits=[split])  # mean over subsets, as mteb reports a task
    check_fraction(main_name, main)
    dataset = _task_datasets().get(result.task_name)
    if dataset is None:
        return [ScoreRecord("mteb", result.task_name, main_name, 100.0 * float(main), info=info)]
    suite = SUITE_OF_KIND[CATALOG[dataset].kind]
    metrics = {FROM_MTEB_METRIC.get(main_name, main_name): float(main)}
    if suite == "beir":
        for metric in ("ndcg_at_10", "recall_at_100", "mrr_at_10"):
            values = [e[metric] for e in entries if isinstance(e.get(metric), (int, float))]
            if len(values) == len(entries):
                metrics[metric] = sum(values) / len(values)
    for metric, value in metrics.items():
        check_fraction(metric, value)
    return [ScoreRecord(suite, dataset, metric, 100.0 * value, info=info) for metric, value in metrics.items()]


class ScoreRangeError(ValueError):
    """An MTEB score that is no number or outside what a fraction can be (a percentage, 80.6, stored as 0.806)."""


def check_fraction(metric: str, value: Any) -> None:
    """MTEB stores every score as a fraction: accuracies, nDCG, MAP in [0, 1], correlations in [-1, 1]. A NaN, an
    infinity or a value past 1 (a percentage written by hand) is refused, never stored x100 (8060)."""
    import math

    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ScoreRangeError(f"{metric} {value!r} is not a number") from None
    if not math.isfinite(number):
        raise ScoreRangeError(f"{metric} is {number}: no score to import")
    if not -1.0 <= number <= 1.0:
        raise ScoreRangeError(f"{metric} {number:g} is outside [-1, 1]: MTEB stores fractions (0.806, not 80.6)")


def _cqadupstack_mean(records: list[ScoreRecord]) -> list[ScoreRecord]:
    """With all 12 forums present: the 'cqadupstack' mean row, as our beir suite writes it."""
    forums = {f"cqadupstack-{f}" for f in CQADUPSTACK_FORUMS}
    by_metric: dict[str, list[float]] = defaultdict(list)
    for r in records:
        if r.dataset in forums:
            by_metric[r.metric].append(r.value)
    return [
        ScoreRecord("beir", "cqadupstack", metric, sum(v) / len(v), info={"source": "mteb", "mean_of": "12 forums"})
        for metric, v in by_metric.items() if len(v) == len(forums)
    ]


def _identity(folder: Path) -> tuple[str, str, dict[str, Any]]:
    meta_path = folder / "model_meta.json"
    meta: dict[str, Any] = {}
    if meta_path.exists():
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8-sig"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{meta_path}: not readable as JSON ({exc})") from None
    name = str(meta.get("name") or folder.parent.name.replace("__", "/"))
    revision = str(meta.get("revision") or folder.name)
    return name, revision, meta


def read_mteb_results(directory: str | Path) -> tuple[list[ReferenceModel], list[str]]:
    """Every <model>/<revision>/<Task>.json under `directory` (any depth), read with mteb's TaskResult.from_disk.
    Returns the models and one line per file that could not be read (those are skipped)."""
    from mteb.results import TaskResult

    root = Path(directory)
    if not root.is_dir():
        raise ConfigError(f"bench import: {root} is not a folder; give the folder that holds <org>__<model>/<revision>/<Task>.json")
    grouped: dict[Path, list[Path]] = defaultdict(list)
    for path in sorted(root.rglob("*.json")):
        if path.name != "model_meta.json":
            grouped[path.parent].append(path)
    from bench.runtime import progress

    problems: list[str] = []
    models = []
    n_files = sum(len(p) for p in grouped.values())
    bar = progress.bar(total=n_files, desc="reading MTEB results", unit="file", disable=n_files < 200)
    for folder, paths in grouped.items():
        name, revision, meta = _identity(folder)
        records: list[ScoreRecord] = []
        files = []
        for path in paths:
            try:
                result = TaskResult.from_disk(path)
                new = records_of(result)
            except Exception as exc:  # noqa: BLE001 - one unreadable file must not stop a whole results repository
                problems.append(f"{path}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
                continue
            finally:
                bar.update()
            records.extend(new)
            files.append(str(path.relative_to(root)))
        records.extend(_cqadupstack_mean(records))
        if records:
            info = {k: meta[m] for k, m in (("parameters", "n_parameters"), ("embedding_dim", "embed_dim"),
                                             ("max_tokens", "max_tokens")) if meta.get(m) is not None}
            models.append(ReferenceModel(name, revision, folder, records, info, files))
    bar.close()
    return models, problems


def import_references(db: Any, models: list[ReferenceModel], command: str) -> list[tuple[ReferenceModel, int | None, str]]:
    """One finished Run (kind 'reference') per model; returns (model, run id, outcome) for every model:

    - "imported": a new row;
    - "already imported": a finished row with the same scores exists (not duplicated);
    - "finished an unfinished import": a row of these scores left unfinished (a killed import) is taken over;
    - "being imported by another process": a live process holds that row (left alone);
    - "failed: ...": its scores could not be written (its row is marked failed); the next models still import.
    """
    from bench.runtime.provenance import code_version, config_hash, package_versions
    from results_db.liveness import with_liveness
    from results_db.store import liveness_fields

    existing = with_liveness(db.runs())
    out: list[tuple[ReferenceModel, int | None, str]] = []
    for model in models:
        scores = sorted((r.suite, r.dataset, r.metric, round(r.value, 6)) for r in model.records)
        config = {"source": "mteb", "model": model.name, "revision": model.revision, "scores": scores}
        chash = config_hash(config)
        same = existing[(existing["kind"] == REFERENCE_KIND) & (existing["config_hash"] == chash)] if not existing.empty else existing
        done = same[same["status"] == "finished"] if not same.empty else same
        if not done.empty:
            out.append((model, int(done["id"].iloc[0]), "already imported"))
            continue
        live = same[same["status"] == "running"] if not same.empty else same
        if not live.empty:
            out.append((model, int(live["id"].iloc[-1]), "being imported by another process (left alone)"))
            continue
        if not same.empty:  # failed, interrupted or stale (a killed import): finished now, on the same row
            run_id = int(same.sort_values("id")["id"].iloc[-1])
            db.update_run(run_id, status="running", error="", finished_at=None, command=command, **liveness_fields())
            outcome = "finished an unfinished import"
        else:
            run_id = db.create_run(
                kind=REFERENCE_KIND, model=model.name, method=model.name, backbone="", suite="mteb",
                config={"source": "mteb", "model": model.name, "revision": model.revision, "folder": str(model.folder),
                        "files": model.files},
                config_hash=chash, seed=0, code_version=code_version(), package_versions=package_versions(),
                command=command, output_dir=str(Path(model.folder).resolve()), status="running", model_info=model.model_info,
            )
            outcome = "imported"
        try:
            db.add_scores(run_id, model.records)
        except Exception as exc:  # noqa: BLE001 - this model's row fails; the other models still import
            db.finish_run(run_id, status="failed", error=f"{type(exc).__name__}: {exc}")
            out.append((model, run_id, f"failed: {exc}"))
            continue
        except BaseException as exc:
            db.finish_run(run_id, status="interrupted", error=f"{type(exc).__name__}: {exc}")
            raise
        db.finish_run(run_id)
        out.append((model, run_id, outcome))
    return out


def reference_runs(runs: pd.DataFrame, name: str) -> pd.DataFrame:
    """The imported reference rows of one model, newest first: `name` is the MTEB model name ('org/model', matched
    against Run.model and Run.method, case-insensitive) or its folder form 'org__model'. For `--reference NAME`."""
    if runs.empty or "kind" not in runs:
        return runs.iloc[0:0]
    wanted = name.replace("__", "/").lower()
    refs = runs[runs["kind"] == REFERENCE_KIND]
    hit = refs["model"].str.lower().eq(wanted) | refs["method"].str.lower().eq(wanted)
    return refs[hit].sort_values("id", ascending=False)
