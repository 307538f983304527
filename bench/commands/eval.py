"""`bench eval`: score one model on one or more suites and record the run."""

from __future__ import annotations

import argparse

from bench.commands.common import RegistryHelp, declared_command, existing_db, open_db, start_processes
from bench.experiment.eval_spec import EvalSpec


def register(sub: argparse._SubParsersAction) -> None:
    declared_command(sub, "eval", run, formatter_class=RegistryHelp,
                     help="evaluate an encoder (or bm25) on suites, clean and @elong",
                     description="Evaluate a model on suites: {suites}; append {attacks} (or several: @elong,pad) for "
                     "attacked variants; several suites with '+' or repeated --suite.")


def run(args: argparse.Namespace) -> int:
    """Parse into an EvalSpec and hand it to the evaluation job (bench.experiment.evaluation), which the Python API
    calls too. Under torchrun every rank runs this; texts to encode are sharded over ranks (bench.encode.sharded)
    and rank 0 alone opens the database, writes the run row and its scores, and prints."""
    from dataclasses import replace

    from bench.evaluate.suites import parse_suites
    from bench.experiment.eval_spec import EvalOptions
    from bench.experiment.evaluation import run_evaluation

    options = EvalOptions.from_args(args)  # the options `lenbench.evaluate` builds from Python values
    spec = EvalSpec.from_options(options)
    parse_suites(spec.suite_args)  # unknown suite: error before any process starts or anything is written
    if getattr(args, "estimate", False):
        return print_estimate(spec, args)
    launched = start_processes(args)
    if launched is not None:
        return launched
    spec.settings = replace(spec.settings, encoder=replace(spec.settings.encoder, device=args.device))  # this rank's
    result = run_evaluation(spec, open_db=lambda: open_db(args))
    if result.db is None:
        return 0
    print(f"run {result.run_id}  model={spec.model}  suites={'+'.join(spec.suite_args)}  ({result.seconds:.0f}s)")
    print(result.report() if result.records or result.reused else "(no scores)")
    from pathlib import Path

    from bench.report.results_file import FILE_NAME as RESULTS_FILE

    folder = result.db.get_run(result.run_id).get("output_dir")
    if folder:  # the row's results.json (bench.experiment.eval_files), written before the row was finished
        print(f"results {Path(folder) / RESULTS_FILE}")
    from bench.runtime.clock import process_seconds

    result.db.merge_runtime(result.run_id, {"wall_seconds": round(process_seconds(), 3)})  # what --estimate predicts
    return 0


def print_estimate(spec: EvalSpec, args: argparse.Namespace) -> int:
    """`--estimate`: the estimate's table (bench.experiment.estimate), with the times of an earlier identical run
    from the database when there is one (it is only read, never created)."""
    from bench.experiment.estimate.evaluation import estimate_evaluation
    from bench.experiment.estimate.report import add_actual

    est = estimate_evaluation(spec, calibration_seconds=args.calibration_seconds, say=print)
    with existing_db(args) as db:
        add_actual(est, db)
    print("\n".join(est.lines()))
    return 0
