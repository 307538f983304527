"""The evaluation job: one model scored on suites, recorded as one run row. `bench eval` parses its options into an
`EvalSpec` and hands it here; the Python API (`lenbench.evaluate`) builds the EvalSpec itself and calls the same
function, so both write the same row and the same scores.

    result = run_evaluation(EvalSpec("minilm", ["sts:stsb@elong"]), db)
    print(result.report())

Checked before a row is written: the suites, the data they read (one error naming every missing dataset), the model
(it loads, and it can run these suites). A run of this exact evaluation that died (killed, failed, interrupted) is
continued: its scores are kept and the datasets it finished skipped. The row's results.json (beside the database,
`evals/<run id>-<model>/`: bench.experiment.eval_files) is written before the row is marked finished. Under torchrun
every rank calls it; encoding is sharded over ranks and rank 0 alone (the one given `db`) writes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.encode.opaque import DECLARED
from bench.experiment.eval_files import check_reused, write_eval_results
from bench.experiment.eval_spec import EvalSpec
from bench.experiment.record import Recording, command_line, resume_row
from bench.experiment.run_lease import lease_run, release_run
from bench.runtime import distributed


@dataclass
class EvaluationResult:
    run_id: int | None  # None on ranks other than 0
    method: str  # the row's method label
    records: list[Any] = field(default_factory=list)  # ScoreRecords of this call (a resumed run: the new ones)
    db: Any = None
    seconds: float = 0.0
    reused: bool = False  # a finished row of this evaluation was reused: nothing was scored

    def report(self, profile: bool = True) -> str:
        """The table `bench eval` prints (bench.report.tables)."""
        from bench.report.tables import comparison_report

        if self.db is None or self.run_id is None:
            return ""
        return comparison_report(self.db, {self.method: [self.run_id]}, profile=profile)


def run_evaluation(spec: EvalSpec, db: Any = None, *, say: Callable[..., None] | None = None,
                   command: str | None = None, open_db: Callable[[], Any] | None = None) -> EvaluationResult:  # fmt: skip
    """Score `spec.model` on `spec.suite_args` and record it (see the module docstring). db: a results_db.ResultsDB
    on rank 0 (None: nothing recorded), or `open_db`, called once the inputs are checked (a bad input never creates
    a database file); command: what Run.command records (default: this process's command line)."""
    from bench.encode.loading import resolve_model
    from bench.encode.model_info import model_info
    from bench.evaluate.models import LEXICAL_MODELS
    from bench.evaluate.runner import check_model, evaluate, locate_datasets
    from bench.evaluate.suites import parse_suites
    from bench.runtime.provenance import code_version, package_versions

    main = distributed.is_main()
    if say is None:
        say = print if main else (lambda *a, **k: None)
    suites = parse_suites(spec.suite_args)  # unknown suite: error before anything is written
    ctx = spec.settings.context()
    located = locate_datasets(suites, ctx)  # a missing dataset: one error, before anything is recorded
    for found in located:
        say(f"data  {found.describe()}")
    if spec.source is not None:  # an object: an unusable one is refused before a database file is made
        spec, model = spec.load()
    if db is None and open_db is not None and main:
        db = open_db()
    if spec.source is None:
        spec, model = spec.load()
    check_model(model, suites)  # e.g. bm25 on sts: refused before a run is recorded
    describe = model.describe()
    # a folder's info is read from its files; the torch module is passed only when already loaded (hub ids), so a warm
    # run over cached texts still loads no model
    loaded = getattr(model, "model", None) if getattr(model, "model_loaded", False) else None
    if spec.source is not None:
        from bench.encode.objects import object_info

        info = object_info(model, spec.source)
    else:
        info = {} if spec.model.lower() in LEXICAL_MODELS else model_info(resolve_model(spec.model), loaded)
    runtime = {**distributed.describe(), "device": describe.get("device"),  # "backend" there: gloo/nccl
               **({"encoder_backend": describe["backend"], "emb_dtype": describe["emb_dtype"],
                   "precision": describe.get("precision")} if "emb_dtype" in describe else {}),
               **(model.attention_info() if callable(getattr(model, "attention_info", None)) else {})}  # fmt: skip
    command = command if command is not None else command_line()
    chash = spec.config_hash(describe)
    # this evaluation's lease (a second process asking for it waits), then its finished row if one scored these data
    held = None if db is None else lease_run(db, "eval", chash, spec.method, say, f"[{spec.label}]")
    try:
        done = None if db is None or spec.rerun else finished_evaluation(db, chash, spec.method, located, say)
        declared = describe.get("identity") == DECLARED
        if done is not None and declared and not spec.reuse_declared:
            say(f"run {done} scored a model of this declared name ({spec.model!r}) with these settings on the same "
                "data, but its identity is declared, not derived: lenbench cannot check the object is the same, so "
                f"it scores a new row (reuse_declared=True / --reuse-declared reuses run {done})")  # fmt: skip
            done = None
        if done is not None:  # its results.json is there (written again if not) before it is reused
            check_reused(db, done, spec.label, say)
    except BaseException:
        release_run(db, held)
        raise
    if distributed.broadcast_from_main(done) is not None:
        release_run(db, held)
        if db is not None and declared:
            say(f"run {done} scored a model declared as {spec.model!r} with these settings on the same data; reusing "
                "it by declared identity, as asked (nothing scored; the identity is declared, not derived: lenbench "
                "did not check the object is the same)")  # fmt: skip
        elif db is not None:
            say(f"run {done} already scored this model with these settings on the same data; reusing it (nothing "
                "scored; the same command on changed data, weights or settings scores a new row)")  # fmt: skip
        return EvaluationResult(done if db is not None else None, spec.label, [], db, 0.0, reused=True)
    try:
        # a declared identity resumes only when asked: the object that died may not be this one
        resumed = None if db is None or (declared and not spec.reuse_declared) else resume_row(
            db, "eval", chash, command=command, runtime=runtime)
    except BaseException:
        release_run(db, held)
        raise
    if resumed is not None:
        say(f"resuming run {int(resumed['id'])} ({resumed['status']}): the datasets it finished are kept and skipped")
    run_id = None if db is None else int(resumed["id"]) if resumed is not None else _create_row(
        db, held,
        kind="eval",
        model=spec.model,
        method=spec.method,
        backbone=spec.model,
        suite="+".join(spec.suite_args),
        config=spec.config(describe),
        config_hash=spec.config_hash(describe),
        seed=spec.settings.seed,
        code_version=code_version(),
        package_versions=package_versions(),
        command=command,
        status="running",
        model_info=info,
        runtime=runtime,
    )
    t0 = time.time()
    with Recording(db, run_id, files=lambda: ctx.files_read, lease=held,
                   earlier_fingerprint=resumed.get("data_fingerprint") if resumed is not None else None,
                   artifacts=lambda at: write_eval_results(db, run_id, spec.label, at)):
        records = evaluate(model, suites, ctx, db=db, run_id=run_id,
                           earlier_fingerprint=resumed.get("data_fingerprint") if resumed is not None else None, say=say)
        encoded = distributed.all_gather_object(getattr(model, "texts_encoded", None))
        reruns = distributed.all_gather_object(getattr(model, "fp32_reruns", None))  # non-finite at bf16/fp16
        if db is not None and encoded[0] is not None:
            db.merge_runtime(run_id, {"texts_encoded_per_rank": encoded,
                                      **({"fp32_reruns": sum(r or 0 for r in reruns)} if describe.get("precision", "fp32") != "fp32" else {})})
    return EvaluationResult(run_id, spec.label, records, db, time.time() - t0)


def _create_row(db: Any, held: Any, **fields: Any) -> int:
    try:
        return db.create_run(**fields)
    except BaseException:
        release_run(db, held)
        raise


def finished_evaluation(db: Any, config_hash: str, method: str, located: list[Any], say: Callable[..., None]) -> int | None:
    """The newest finished row of this evaluation (same config hash: model fingerprint and settings) whose data are
    the data located now, unchanged (every file it read has the same hash; every dataset found now is among them);
    None when there is none (a row on other or changed data is named, and a new row is scored)."""
    from bench.runtime.provenance import file_sha256
    from results_db.records import json_column

    runs = db.runs()
    if runs.empty:
        return None
    same = runs[(runs["kind"] == "eval") & (runs["config_hash"] == config_hash) & (runs["method"] == method)
                & (runs["status"] == "finished")].sort_values("id")  # fmt: skip
    for row in reversed(same.to_dict("records")):
        read = json_column(row.get("data_fingerprint"))
        changed = _changed_data(read, located, file_sha256)
        if changed is None:
            return int(row["id"])
        say(f"run {int(row['id'])} scored this model with these settings, but {changed}; scoring a new row")
        return None
    return None


def _changed_data(read: dict[str, str], located: list[Any], sha: Callable[[Any], str]) -> str | None:
    """Why the files a finished evaluation read are not the data located now (None: they are)."""
    import os

    for path, digest in read.items():
        try:
            if sha(path)[: len(str(digest))] != str(digest):
                return f"its data file {path} changed since"
        except OSError:
            return f"its data file {path} is not there any more"
    files = [os.path.abspath(p) for p in read]
    for found in located:
        where = os.path.abspath(str(found.path))
        if not any(f == where or f.startswith(where.rstrip(os.sep) + os.sep) for f in files):
            return f"it did not read {found.path} (other data)"
    return None
