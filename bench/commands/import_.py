"""`bench import --format mteb DIR`: MTEB result files as reference rows (kind "reference", no training)."""

from __future__ import annotations

import argparse

from bench.commands.common import add_db, open_db
from bench.experiment.record import command_line
from bench.runtime.errors import ConfigError

FORMATS = ("mteb",)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "import",
        help="load MTEB result files (e.g. a checkout of MTEB's results repository) as reference rows",
        description="Read every <org__model>/<revision>/<Task>.json under DIR with mteb's own loader and record one "
        "reference run per model revision (kind 'reference', model = method = the MTEB model name), its scores "
        "under lenbench's dataset names where a task maps to one (STS, BEIR), else suite 'mteb'.",
    )
    p.add_argument("dir", metavar="DIR", help="folder holding MTEB result files (any depth)")
    p.add_argument("--format", choices=FORMATS, default="mteb", help="result format (default mteb)")
    add_db(p, writes=True)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bench.report.mteb_results import import_references, read_mteb_results

    models, problems = read_mteb_results(args.dir)  # everything is read before anything is written
    for line in problems:
        print(f"skipped {line}")
    if not models:
        raise ConfigError(f"no readable MTEB result files under {args.dir} (expected <org__model>/<revision>/<Task>.json)")
    db = open_db(args)
    failed = []
    for model, run_id, outcome in import_references(db, models, command_line()):
        datasets = len({(r.suite, r.dataset) for r in model.records})
        if outcome.startswith("failed"):
            print(f"{model.name} @ {model.revision}: {datasets} dataset(s), NOT imported, reference run {run_id} marked "
                  f"{outcome}")
        else:
            print(f"{model.name} @ {model.revision}: {datasets} dataset(s), {outcome} as reference run {run_id}")
        if outcome.startswith("failed"):
            failed.append(f"{model.name} @ {model.revision}")
    if failed:
        raise ConfigError(f"{len(failed)} of {len(models)} model(s) not imported ({', '.join(failed)}); the others are "
                          "recorded as listed above; run the same command again once fixed")
    return 0
