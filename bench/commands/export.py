"""`bench export --format mteb DIR [--run ID ...]`: runs' clean scores as MTEB result files (see bench.report.mteb_results)."""

from __future__ import annotations

import argparse

from bench.commands.common import add_db
from bench.experiment.option_ranges import check_output_dir
from bench.runtime.errors import ConfigError

FORMATS = ("mteb",)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="write runs' scores in MTEB's result layout (DIR/<org__model>/<revision>/<Task>.json + model_meta.json)",
        description="Write the clean scores of finished runs whose datasets map to MTEB tasks (STS12-16, STSBenchmark, "
        "SICK-R, the BEIR sets, mteb:TASK rows) as MTEB TaskResult files, loadable with mteb.ResultCache.",
    )
    p.add_argument("dir", metavar="DIR", help="output folder (created); e.g. a checkout of MTEB's results repository's results/")
    p.add_argument("--format", choices=FORMATS, default="mteb", help="result format (default mteb)")
    p.add_argument("--run", type=int, action="append", default=None, metavar="ID", help="run id (repeatable; default: every finished run)")
    add_db(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bench.report.mteb_results import REFERENCE_KIND, export_runs

    from results_db import ResultsDB

    check_output_dir(args.dir, "bench export DIR")  # an existing file is never overwritten or half-written
    db = ResultsDB(args.db, create=False)  # a read: a misspelled path is an error, not a new empty database
    runs = db.runs()
    if args.run:
        known = set(runs["id"].astype(int)) if not runs.empty else set()
        missing = [r for r in args.run if r not in known]
        if missing:
            raise ConfigError(f"--run {', '.join(map(str, missing))}: no such run in {db.location.shown}; `bench results --runs-only` lists them")
        run_ids = list(dict.fromkeys(args.run))
    else:
        chosen = runs[(runs["status"] == "finished") & (runs["kind"] != REFERENCE_KIND)] if not runs.empty else runs
        run_ids = [int(i) for i in chosen["id"]]
    if not run_ids:
        raise ConfigError(f"no finished runs in {db.location.shown} to export")
    try:
        summary = export_runs(db, run_ids, args.dir)
    except (FileExistsError, NotADirectoryError, IsADirectoryError, PermissionError) as exc:
        raise ConfigError(f"bench export DIR {args.dir}: cannot write {exc.filename} ({exc.strerror}); "
                          "give an empty or new folder") from None  # fmt: skip
    for reason in summary.refused:  # said even when nothing else was written
        print(f"not exported (not MTEB's data: official-looking files would be wrong): {reason}")
    if not summary.files:
        raise ConfigError(f"runs {', '.join(map(str, run_ids))} have no clean whole-dataset scores on datasets that map to "
                          "MTEB tasks (STS12-16, STSBenchmark, SICK-R, BEIR sets, mteb:TASK); subsets (--limit) are not exported")
    tasks = [f for f in summary.files if f.name != "model_meta.json"]
    models = sorted({str(f.parent.relative_to(args.dir)) for f in tasks})
    print(f"wrote {len(tasks)} MTEB task result(s) for {len(models)} model revision(s) under {args.dir}:")
    for m in models:
        print(f"  {m}")
    if summary.replaced:  # one file per (model revision, task): counted once above
        print(f"written again by a later run of the same model revision (the later scores are kept): {', '.join(summary.replaced)}")
    if summary.skipped_runs:
        print(f"runs with nothing to export (no MTEB task, or only --limit subsets): {', '.join(map(str, summary.skipped_runs))}")
    return 0
