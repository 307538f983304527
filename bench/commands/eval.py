"""`bench eval`: score one model on one or more suites and record the run."""

from __future__ import annotations

import argparse
import time

from bench.commands.common import (
    add_data_dir,
    add_db,
    add_encoder_options,
    add_eval_options,
    add_nproc,
    open_db,
    start_processes,
)
from bench.experiment.eval_spec import EvalSpec
from bench.experiment.record import Recording, command_line, merge_runtime, resume_row
from bench.runtime import distributed


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "eval",
        help="evaluate an encoder (or bm25) on suites, clean and @elong",
        description="Evaluate a model on suites: sts, beir14, beir:NAME[,NAME], knn[:NAME], mteb:TASK[,TASK], diag, "
        "needle, heldout; append @elong, @pad, @shuffle (or several: @elong,pad) for attacked variants; several suites "
        "with '+' or repeated --suite.",
    )
    p.add_argument("--model", required=True, help="local model folder, hub id, 'minilm' (packaged all-MiniLM-L6-v2) or 'bm25'")
    p.add_argument("--suite", action="append", required=True, help="suite string, e.g. sts@elong or beir:scifact")
    add_encoder_options(p)
    add_eval_options(p)
    add_nproc(p)
    add_data_dir(p)
    add_db(p, writes=True)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Under torchrun every rank runs this; texts to encode are sharded over ranks (bench.encode.sharded) and rank 0
    alone opens the database, writes the run row and its scores, and prints."""
    from dataclasses import replace

    from bench.encode.encoder import resolve_model
    from bench.encode.model_info import model_info
    from bench.evaluate.models import LEXICAL_MODELS
    from bench.evaluate.runner import check_model, evaluate, locate_datasets
    from bench.evaluate.suites import parse_suites
    from bench.report.tables import comparison_report
    from bench.runtime.provenance import code_version, package_versions

    spec = EvalSpec.from_args(args)
    suites = parse_suites(spec.suite_args)  # unknown suite: error before anything is written
    launched = start_processes(args)
    if launched is not None:
        return launched
    spec.settings = replace(spec.settings, device=args.device)  # this rank's device (start_processes sets it)
    main = distributed.is_main()
    ctx = spec.settings.context()
    for located in locate_datasets(suites, ctx):  # a missing dataset: one error, before anything is recorded
        if main:
            print(f"data  {located.describe()}")
    db = open_db(args) if main else None
    model = spec.settings.load(spec.model)
    check_model(model, suites)  # e.g. bm25 on sts: refused before a run is recorded
    describe = model.describe()
    # a folder's info is read from its files; the torch module is passed only when already loaded (hub ids), so a warm
    # run over cached texts still loads no model
    loaded = getattr(model, "model", None) if getattr(model, "model_loaded", False) else None
    info = {} if spec.model.lower() in LEXICAL_MODELS else model_info(resolve_model(spec.model), loaded)
    runtime = {**distributed.describe(), "device": describe.get("device"),  # "backend" there: gloo/nccl
               **({"encoder_backend": describe["backend"], "emb_dtype": describe["emb_dtype"],
                   "precision": describe.get("precision")} if "emb_dtype" in describe else {})}
    # A run of this exact evaluation that died (killed, failed, interrupted) is continued: its scores are kept and
    # the datasets it finished are skipped (bench.evaluate.runner), instead of a second row scoring them again.
    resumed = None if db is None else resume_row(db, "eval", spec.config_hash(describe), command=command_line(), runtime=runtime)
    if resumed is not None:
        print(f"resuming run {int(resumed['id'])} ({resumed['status']}): the datasets it finished are kept and skipped")
    run_id = None if db is None else int(resumed["id"]) if resumed is not None else db.create_run(
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
        command=command_line(),
        status="running",
        model_info=info,
        runtime=runtime,
    )
    t0 = time.time()
    with Recording(db, run_id, files=lambda: ctx.files_read,
                   earlier_fingerprint=resumed.get("data_fingerprint") if resumed is not None else None):
        records = evaluate(model, suites, ctx, db=db, run_id=run_id,
                           earlier_fingerprint=resumed.get("data_fingerprint") if resumed is not None else None)
        encoded = distributed.all_gather_object(getattr(model, "texts_encoded", None))
        if db is not None and encoded[0] is not None:
            merge_runtime(db, run_id, {"texts_encoded_per_rank": encoded})
    if db is None:
        return 0
    print(f"run {run_id}  model={spec.model}  suites={'+'.join(spec.suite_args)}  ({time.time() - t0:.0f}s)")
    print(comparison_report(db, {spec.method: [run_id]}, profile=True) if records else "(no scores)")
    return 0
