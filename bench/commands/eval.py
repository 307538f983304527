"""`bench eval`: score one model on one or more suites and record the run."""

from __future__ import annotations

import argparse
import time

from bench.runtime import distributed
from bench.commands.common import (
    add_data_dir,
    add_db,
    add_encoder_options,
    add_eval_options,
    add_nproc,
    attack_settings,
    command_line,
    fingerprint_files,
    merge_runtime,
    open_db,
    record_failure,
    start_processes,
)
from bench.evaluate.runner import check_model, evaluate, locate_datasets
from bench.runtime.heartbeat import Heartbeat
from bench.encode.model_info import model_info
from bench.evaluate.models import LEXICAL_MODELS, load_model
from bench.runtime.provenance import code_version, config_hash, package_versions
from bench.report.tables import comparison_report
from bench.evaluate.suites import EvalContext, parse_suites
from bench.evaluate.suites.registry import split_suite_args


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
    suite_args = split_suite_args(args.suite)
    suites = parse_suites(suite_args)  # unknown suite: error before anything is written
    elong, attack_params = attack_settings(args)
    if args.needle_lengths:
        from bench.evaluate.suites.needle import parse_lengths

        parse_lengths(args.needle_lengths)  # a bad list: one clear error before anything is recorded
    launched = start_processes(args)
    if launched is not None:
        return launched
    main = distributed.is_main()
    ctx = EvalContext(
        data_dir=args.data_dir,
        max_len=args.max_len,
        seed=args.seed,
        elong=elong,
        attack_params=attack_params,
        options={"needle_lengths": args.needle_lengths} if args.needle_lengths else {},
        limit=args.limit,
        fetch=args.download,
        batch_size=args.batch_size,
    )
    for located in locate_datasets(suites, ctx):  # a missing dataset: one error, before anything is recorded
        if main:
            print(f"data  {located.describe()}")
    db = open_db(args) if main else None
    model = load_model(
        args.model,
        pooling=args.pooling,
        max_len=args.max_len,
        batch_size=args.batch_size,
        device=args.device,
        use_cache=not args.no_cache,
        backend=args.backend,
        emb_dtype=args.emb_dtype,
    )
    check_model(model, suites)  # e.g. bm25 on sts: refused before a run is recorded
    describe = model.describe()
    from bench.encode.encoder import resolve_model

    # a folder's info is read from its files; the torch module is passed only when already loaded (hub ids), so a warm
    # run over cached texts still loads no model
    loaded = getattr(model, "model", None) if getattr(model, "model_loaded", False) else None
    info = {} if args.model.lower() in LEXICAL_MODELS else model_info(resolve_model(args.model), loaded)
    config = {
        "model": args.model,
        "suite": suite_args,
        "pooling": describe.get("pooling"),
        "max_len": args.max_len,
        "batch_size": args.batch_size,
        "elong": elong,
        **({"attacks": attack_params} if attack_params else {}),  # only when asked: older configs hash as they did
        **({"needle_lengths": args.needle_lengths} if args.needle_lengths else {}),
        "limit": args.limit,
        "seed": args.seed,
        "model_fingerprint": describe.get("fingerprint"),
        **({"bm25": describe["bm25"]} if "bm25" in describe else {}),  # BM25's settings (stemmer, k1, b...)
    }
    if args.emb_dtype != "fp32":  # fp16 matrices can move scores in the last digits: part of what was run
        config["emb_dtype"] = args.emb_dtype
    run_method = "vanilla" if args.model.lower() != "bm25" else "bm25"
    run_id = None if db is None else db.create_run(
        kind="eval",
        model=args.model,
        method=run_method,
        backbone=args.model,
        suite="+".join(suite_args),
        config=config,
        config_hash=config_hash(config),
        seed=args.seed,
        code_version=code_version(),
        package_versions=package_versions(),
        command=command_line(),
        status="running",
        model_info=info,
        runtime={**distributed.describe(), "device": describe.get("device"),  # "backend" there: gloo/nccl
                 **({"encoder_backend": describe["backend"], "emb_dtype": describe["emb_dtype"]} if "emb_dtype" in describe else {})},
    )
    t0 = time.time()
    beat = Heartbeat(db, run_id).start()  # `bench results` tells this row from one whose process died
    try:
        records = evaluate(model, suites, ctx, db=db, run_id=run_id)
        encoded = distributed.all_gather_object(getattr(model, "texts_encoded", None))
    except BaseException as exc:
        record_failure(db, run_id, exc, ctx.files_read)
        raise
    finally:
        beat.stop()
    if db is None:
        return 0
    if encoded[0] is not None:
        merge_runtime(db, run_id, {"texts_encoded_per_rank": encoded})
    db.finish_run(run_id, data_fingerprint=fingerprint_files(ctx.files_read))
    print(f"run {run_id}  model={args.model}  suites={'+'.join(suite_args)}  ({time.time() - t0:.0f}s)")
    print(comparison_report(db, {run_method: [run_id]}, profile=True) if records else "(no scores)")
    return 0
