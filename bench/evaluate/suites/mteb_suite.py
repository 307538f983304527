"""`mteb:<Task,...>`: tasks scored by the mteb package's own evaluator (mteb 2.x), our encoder plugged in.

Task names are MTEB's (STS12, STSBenchmark, SICK-R, SciFact, ...) or this harness's dataset names (stsb,
scifact, ...), case-insensitive. A task whose data is in the local catalog (`bench.data`) runs as a custom
mteb task (`AbsTaskSTS` / `AbsTaskRetrieval` subclass) built from the local files, so it works offline; its
metadata says type, main score and split, and mteb does the rest: encoding through our `encode`, similarity,
Spearman / pytrec_eval scoring. Other MTEB tasks are loaded by mteb from the Hugging Face hub, which needs
network: with HF_HUB_OFFLINE or HF_DATASETS_OFFLINE set they fail at once with an error naming the task.

Records: suite "mteb", dataset = the task name as written, metric = the task's main score name
(`cosine_spearman`, `ndcg_at_10`, ...), value x100 (as the other suites). mteb returns no per-item values.
An attacked suite (`@elong`, `@pad`, `@shuffle`) wraps the encoder so that mteb's inputs are attacked inside
`encode`: every input of STS (and other symmetric) tasks, only the documents of retrieval tasks (queries stay
clean, as in the `beir` suite). `@pad` draws its distractors from the other texts of the same `encode` call: mteb
hands over no relevance judgements there, so unlike the `beir` suite it cannot keep relevant documents out.
`--limit N` slices local data exactly as the `sts` and `beir` suites do, so their scores are comparable.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.data import CATALOG, DatasetInfo
from bench.encode.options import hashed_batch_size
from bench.data.errors import DataError, DatasetMissingError
from bench.evaluate.attacks import Attack, Distractors
from bench.evaluate.suites.base import EvalContext, SuiteError
from bench.evaluate.suites.variants import attack_with, variant_loop
from bench.runtime.hub import hub_offline, offline_variable
from results_db.records import ScoreRecord

logger = logging.getLogger(__name__)


# ------------------------------------------------------------------- encoder adapter
def _encoder_adapter_class():
    """The adapter class, built on first use so that `import bench.evaluate.suites.mteb_suite` never imports mteb."""
    from mteb.models.abs_encoder import AbsEncoder
    from mteb.models.model_meta import ModelMeta, ScoringFunction
    from mteb.types import PromptType

    class BenchMTEBEncoder(AbsEncoder):
        """A `bench.encode.encoder.Encoder` behind mteb's EncoderProtocol (encode + similarity + mteb_model_meta).

        `attack` (an `Attack`) changes the inputs mteb hands over: all of them, except for retrieval queries, which
        stay clean.
        """

        def __init__(self, encoder: Any, attack: Attack | None = None, seed: int = 0):
            self.model = encoder
            self.attack = attack
            self.seed = seed
            name = str(getattr(encoder, "name", "model")).strip("/") or "model"
            self.mteb_model_meta = ModelMeta.create_empty(
                overwrites={
                    # mteb wants "organisation/name"; results are never written to mteb's cache (cache=None)
                    "name": name if "/" in name else f"lenbench/{name}",
                    "revision": getattr(encoder, "fingerprint", None) or "local",
                    "embed_dim": int(encoder.dim),
                    "max_tokens": int(encoder.max_len),
                    "similarity_fn_name": ScoringFunction.COSINE,
                    "framework": ["PyTorch"],
                    "use_instructions": False,
                }
            )

        def encode(self, inputs, *, task_metadata, hf_split, hf_subset, prompt_type=None, **kwargs):  # noqa: ANN001
            texts = [text for batch in inputs for text in batch["text"]]
            if self.attack and not (task_metadata.type == "Retrieval" and prompt_type == PromptType.query):
                pool = Distractors.build(texts, self.seed) if self.attack.needs_pool else None
                texts = list(attack_with(self.model, self.attack, texts, self.seed, pool))
            return self.model.encode(texts, desc=f"mteb {task_metadata.name} {prompt_type.value if prompt_type else ''}")

    return BenchMTEBEncoder


def mteb_encoder(encoder: Any, attack: Attack | None = None, seed: int = 0) -> Any:
    """Wrap an Encoder for `mteb.evaluate`."""
    return _encoder_adapter_class()(encoder, attack=attack, seed=seed)


# --------------------------------------------------------------------- local tasks
_COMMON_METADATA: dict[str, Any] = {
    "reference": "https://github.com/embeddings-benchmark/mteb",
    "dataset": {"path": "local/lenbench", "revision": "local"},
    "category": "t2t",
    "eval_splits": ["test"],
    "eval_langs": ["eng-Latn"],
    "date": None,
    "dialect": [],
    "domains": None,
    "task_subtypes": None,
    "license": None,
    "annotations_creators": None,
    "modalities": ["text"],
    "sample_creation": None,
    "bibtex_citation": "",
}


def _metadata(task_type: str, name: str, main_score: str, description: str):
    from mteb.abstasks.task_metadata import TaskMetadata

    return TaskMetadata(type=task_type, name=name, main_score=main_score, description=description, **_COMMON_METADATA)


def local_sts_task(dataset: str, ctx: EvalContext) -> Any:
    """An mteb STS task over the local STS file of `dataset` (same rows, same --limit slice as the sts suite)."""
    from datasets import Dataset, DatasetDict
    from mteb.abstasks.sts import AbsTaskSTS

    from bench.evaluate.suites.sts import load_sts

    data = load_sts(dataset, ctx)
    rows = {"sentence1": data.sentences1, "sentence2": data.sentences2, "score": data.scores}
    lo, hi = float(min(data.scores)), float(max(data.scores))

    class LocalSTSTask(AbsTaskSTS):
        metadata = _metadata("STS", f"lenbench-{dataset}", "cosine_spearman", f"local copy of {dataset}: {data.files}")
        min_score = lo
        max_score = hi if hi > lo else lo + 1.0

        def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
            self.dataset = DatasetDict({"test": Dataset.from_dict(rows)})
            self.data_loaded = True

    task = LocalSTSTask()
    task.n_items = len(data.scores)
    return task


def local_retrieval_task(dataset: str, ctx: EvalContext) -> Any:
    """An mteb retrieval task over the local BEIR folder of `dataset` (same slice as the beir suite)."""
    from datasets import Dataset
    from mteb.abstasks.retrieval import AbsTaskRetrieval
    from mteb.abstasks.retrieval_dataset_loaders import RetrievalSplitData

    from bench.data.catalog import ignores_identical_ids
    from bench.evaluate.suites.retrieval import load_retrieval

    data = load_retrieval(dataset, ctx)
    # The document string is built here (title + " " + text) so mteb sees exactly what the beir suite encodes.
    doc_ids = list(data.corpus)
    corpus = [{"id": did, "title": "", "text": text} for did, text in zip(doc_ids, data.doc_texts(doc_ids))]
    queries = [{"id": qid, "text": data.queries[qid]} for qid in data.qrels]
    qrels = {q: dict(r) for q, r in data.qrels.items()}

    class LocalRetrievalTask(AbsTaskRetrieval):
        metadata = _metadata("Retrieval", f"lenbench-{dataset}", "ndcg_at_10", f"local copy of {dataset}: {data.files}")
        ignore_identical_ids = ignores_identical_ids(dataset)

        def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
            split = RetrievalSplitData(
                corpus=Dataset.from_list(corpus), queries=Dataset.from_list(queries), relevant_docs=qrels, top_ranked=None
            )
            self.dataset = {"default": {"test": split}}
            self.data_loaded = True

    task = LocalRetrievalTask()
    task.n_items = len(queries)
    return task


def local_dataset(task: str) -> DatasetInfo | None:
    """The catalog entry for an MTEB task name or a harness dataset name (case-insensitive), if any."""
    key = task.strip().lower()
    if key in CATALOG:
        return CATALOG[key]
    matches = [info for info in CATALOG.values() if info.mteb_task and info.mteb_task.lower() == key and info.split is None]
    # STSBenchmark's MTEB split is test: prefer the entry without a suffix (stsb over stsb-dev).
    matches.sort(key=lambda info: len(info.name))
    return matches[0] if matches else None


def build_task(task: str, ctx: EvalContext) -> Any:
    info = local_dataset(task)
    if info is not None and info.kind in ("sts", "beir"):
        try:
            return local_sts_task(info.name, ctx) if info.kind == "sts" else local_retrieval_task(info.name, ctx)
        except DatasetMissingError:
            if _offline():
                raise
            logger.info("no local copy of %s; letting mteb download it", task)
    return hub_task(task, ctx)


def _offline() -> bool:
    return bool(offline_variable(("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")))


def runnable_local_tasks(ctx: EvalContext | None) -> list[str]:
    """MTEB task names of the catalog datasets whose files are found now (the ones that run offline)."""
    from bench.data.catalog import find

    names = set()
    for info in CATALOG.values():
        if not info.mteb_task or info.kind not in ("sts", "beir"):
            continue
        try:
            find(info.name, ctx.data_dir if ctx else None, kind=info.kind)
        except DataError:
            continue
        names.add(info.mteb_task)
    return sorted(names)


def hub_task(task: str, ctx: EvalContext | None = None) -> Any:
    """A real MTEB task, its data fetched by mteb (needs network)."""
    import mteb

    try:
        t = mteb.get_task(task)
    except (KeyError, ValueError) as exc:
        raise SuiteError(f"mteb: unknown task {task!r} ({exc})") from None
    why = hub_offline(("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))
    if why:
        local = runnable_local_tasks(ctx)
        instead = (f"or use a task whose data is in the data folder now ({', '.join(local)})" if local else
                   "or put a catalog dataset in a data folder (`bench data list` names them) and run its task")
        raise DataError(
            f"mteb task {task!r} has no local copy in this harness's data catalog, and the Hugging Face hub is "
            f"offline ({why}), so mteb cannot download it. Run it online, {instead}."
        )
    return t


# --------------------------------------------------------------------------- suite
def run_mteb_task(model: Any, task: Any, ctx: EvalContext, attack: Attack | None = None, seed: int = 0) -> tuple[str, float]:
    """(main score name, value x100) of one task, by `mteb.evaluate`; nothing written to mteb's result cache."""
    import mteb

    wrapped = mteb_encoder(model, attack=attack, seed=seed)
    try:
        result = mteb.evaluate(
            wrapped,
            task,
            cache=None,
            overwrite_strategy="always",
            co2_tracker=False,
            show_progress_bar=False,
            # mteb's loader batches only how texts reach the wrapper, which encodes them all at once in its own batches
            encode_kwargs={"batch_size": hashed_batch_size(ctx.batch_size), "show_progress_bar": False},
        )
    except (OSError, ConnectionError) as exc:
        raise DataError(f"mteb task {task.metadata.name!r}: loading its data failed ({exc})") from exc
    (task_result,) = result.task_results
    main = task.metadata.main_score
    return main, 100.0 * float(task_result.get_score())


@dataclass
class MTEBSuite:
    tasks: tuple[str, ...]
    name: str = "mteb"

    def datasets(self) -> list[str]:
        return list(self.tasks)

    def evaluate(self, model: Any, dataset: str, ctx: EvalContext) -> list[ScoreRecord]:
        if not callable(getattr(model, "encode", None)):
            raise SuiteError("the mteb suite needs an embedding model (bm25 is not one)")
        records = []
        for v in variant_loop(model, ctx, measure=False):
            variant = v.name
            task = build_task(dataset, ctx)  # fresh task per variant: mteb keeps state on task objects
            metric, value = run_mteb_task(model, task, ctx, attack=v.attack, seed=v.seed(f"mteb|{dataset}|{variant}"))
            if not np.isfinite(value):
                raise DataError(f"mteb task {dataset!r} gave a non-finite {metric}")
            n = int(getattr(task, "n_items", 0))  # known for local tasks; mteb does not report it
            records.append(ScoreRecord(self.name, dataset, metric, value, n=n, variant=variant))
        return records


def make_suite(arg: str | None) -> MTEBSuite:
    if not arg:
        raise SuiteError("mteb: name the tasks, e.g. mteb:STS12,SciFact")
    tasks = tuple(t.strip() for t in arg.split(",") if t.strip())
    if not tasks:
        raise SuiteError("mteb: name the tasks, e.g. mteb:STS12,SciFact")
    return MTEBSuite(tasks)
