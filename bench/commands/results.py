"""`bench results`: list runs and their scores from the results database.

The table format groups the runs of one comparison (the same shared settings, config "comparison": every command
that ran with them, so seeds and methods added later pool in; bench.report.pooling) and prints them as `bench run` does (bench.report.tables: n, subset flags, each method against the reference row with a 95% interval,
attack effects); other runs get a table each.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from bench.commands.common import add_db
from bench.runtime.errors import ConfigError

if TYPE_CHECKING:  # the database layer and pandas load when the command runs, not when `bench --help` is built
    from results_db import ResultsDB

RUN_COLUMNS = ["id", "kind", "method", "model", "suite", "budget_label", "seed", "status", "started_at"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "results",
        help="list runs and scores from the results database",
        description="List runs and scores. Never creates a database; a database from an older lenbench is upgraded "
        "in place. A run whose process died without marking it (SIGKILL, lost node) shows as 'stale'; one alive but without progress for 10 minutes as 'stalled'.",
    )
    add_db(p)
    p.add_argument("--run", type=int, action="append", help="only these run ids (repeatable)")
    p.add_argument("--format", choices=["table", "csv", "json"], default="table")
    p.add_argument("--runs-only", action="store_true", help="list runs without their scores")
    p.add_argument("--curves", action="store_true",
                   help="learning curves (bench run --eval-every): score per run, dataset and metric at each training step")
    p.add_argument("--reference", default=None, metavar="METHOD",
                   help="row each method of a comparison is compared with (default: the untrained backbone, vanilla)")
    p.add_argument("--correction", choices=["holm", "bh", "none"], default="holm",
                   help="multiplicity correction of the '*' on differences, over each table's differences: holm "
                        "(family-wise error, default), bh (Benjamini-Hochberg, false discovery rate) or none; the "
                        "printed intervals are always uncorrected")
    p.add_argument("--cite", action="store_true",
                   help="print, instead of the tables, the BibTeX of exactly what they rest on: lenbench, each "
                        "method, suite, dataset and attack shown, and the significance procedures (--correction)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bench.report.pooling import row_label
    from results_db import ResultsDB
    from results_db.liveness import with_liveness

    # a read: a misspelled path is an error, not a new empty database, and an older schema is read as it is (the
    # file never changes; `bench db upgrade` upgrades it)
    db = ResultsDB(args.db, read_only=True)
    runs = with_liveness(db.runs())  # a "running" row whose process is gone shows as "stale"
    if args.run:
        missing = sorted(set(args.run) - set(runs["id"].tolist()))
        if missing:
            raise ConfigError(f"--run {', '.join(map(str, missing))}: no such run in {db.location.shown}; "
                              "`bench results --runs-only` lists the runs there")  # fmt: skip
        runs = runs[runs["id"].isin(args.run)]
    if runs.empty:
        print("no runs in the database yet; start with e.g. `bench eval --model minilm --suite sts`", file=sys.stderr)
        return 0
    if args.curves:
        return print_curves(db, runs["id"].tolist(), args.format)
    if args.cite:
        from bench.report.citations import for_runs, render

        correction = None if args.runs_only else args.correction
        print(render(for_runs(db, runs["id"].tolist(), correction=correction)), end="")
        return 0
    if args.runs_only:
        # a `bench eval` row by the model it scored, as every table names it (bench.report.pooling.row_label)
        frame = runs[RUN_COLUMNS].assign(method=[row_label(r) for r in runs.to_dict("records")])
    else:
        scores = db.scores(runs["id"].tolist())
        labelled = runs.assign(method=[row_label(r) for r in runs.to_dict("records")])
        frame = scores.merge(labelled[["id", "method", "model", "status"]], left_on="run_id", right_on="id")
        frame = frame[["run_id", "method", "model", "status", "suite", "dataset", "variant", "metric", "value", "n", "info"]]
        if args.format in ("csv", "json"):
            from bench.report.results_file import scores_frame

            frame = scores_frame(db, runs, scores["run_id"].unique().tolist(), comparison_labels(runs))
    if args.format == "csv":
        if "info" in frame:  # a JSON column: written as JSON, as --format json and the database hold it
            frame = frame.assign(info=[None if v is None else json.dumps(v, sort_keys=True) for v in frame["info"]])
        frame.to_csv(sys.stdout, index=False)
    elif args.format == "json":
        print(json.dumps(json.loads(frame.to_json(orient="records", date_format="iso")), indent=2))
    elif args.runs_only:
        print(frame.to_string(index=False))
    else:
        print_tables(db, runs, args.reference, args.correction)
        if not args.run:
            from bench.claim.report import stored_claims_text

            text = stored_claims_text(db.claim_verdicts())
            if text:
                print(text)
    return 0


def comparison_labels(runs) -> dict[int, str]:  # noqa: ANN001
    """Run id -> the label its comparison's tables (and the API's `to_pandas()` and `differences()`) give it: the
    method, with the settings that tell two configurations of it apart in that comparison (docs/reference/naming.md)."""
    from bench.report.pooling import comparison_groups, method_labels

    return {int(r["id"]): label for group in comparison_groups(runs) for r, label in zip(group, method_labels(group))}


def print_curves(db: ResultsDB, run_ids: list[int], fmt: str) -> int:
    """`--curves`: one row per run, step, dataset, metric and variant (json/csv); a column per step (table)."""
    from bench.report.curves import curve_frame, curves_text, with_final

    frame = with_final(curve_frame(db, run_ids), db)
    if fmt == "csv":
        frame.to_csv(sys.stdout, index=False)
    elif fmt == "json":
        print(json.dumps(json.loads(frame.to_json(orient="records")), indent=2))
    else:
        print(curves_text(frame))
    return 0


def print_tables(db: ResultsDB, runs, reference: str | None, correction: str = "holm") -> None:  # noqa: ANN001
    from bench.report.pooling import by_method as pooled_by_method
    from bench.report.pooling import method_labels
    from bench.report.pooling import comparison_groups, resolve_reference, row_label

    from bench.claim.reference import claim_reference

    groups = comparison_groups(runs)
    verdicts = db.claim_verdicts() if reference is None else []
    if reference and not any(reference in (r["method"], label) for group in groups
                             for r, label in zip(group, method_labels(group))):
        raise ConfigError(f"--reference {reference!r}: no listed run has that method")
    for group in groups:
        by_method = pooled_by_method(group)
        if len(group) == 1:
            r = group[0]
            print(f"run {r['id']}  {row_label(r)}  {r['model']}  [{r['status']}]")
        else:
            comparison = group[0]["config"].get("comparison", "")
            listing = ", ".join(f"{r['method']} #{r['id']} [{r['status']}]" for r in group)
            print(f"comparison {comparison}: {listing}")
        ref, note = resolve_reference(reference, list(by_method))
        claimed = claim_reference(verdicts, group, by_method) if reference is None else None
        if claimed is not None:  # a claim's runs: against the row its file names as the reference
            ref, note = claimed, f"reference: {claimed}, the reference row of the claim these runs test"
        if note:
            print(note)
        from bench.report.tables import comparison_report  # (scipy: imported when a table is printed)

        print(comparison_report(db, by_method, ref, correction=correction))
        print()
