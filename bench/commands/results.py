"""`bench results`: list runs and their scores from the results database."""

from __future__ import annotations

import argparse
import json
import sys


from bench.commands.common import add_db
from bench.evaluate import score_frame
from results_db import ResultsDB
from results_db.liveness import with_liveness

RUN_COLUMNS = ["id", "kind", "method", "model", "suite", "budget_label", "seed", "status", "started_at"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "results",
        help="list runs and scores from the results database",
        description="List runs and scores. Never creates a database; a database from an older lenbench is upgraded "
        "in place. A run whose process died without marking it (SIGKILL, lost node) shows as 'stale'.",
    )
    add_db(p)
    p.add_argument("--run", type=int, action="append", help="only these run ids (repeatable)")
    p.add_argument("--format", choices=["table", "csv", "json"], default="table")
    p.add_argument("--runs-only", action="store_true", help="list runs without their scores")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    db = ResultsDB(args.db, create=False)  # a misspelled path is an error, not a new empty database
    for step in db.migrated:
        print(f"upgraded {db.location.shown} to schema {step.version} ({step.summary})", file=sys.stderr)
    runs = with_liveness(db.runs())  # a "running" row whose process is gone shows as "stale"
    if args.run:
        runs = runs[runs["id"].isin(args.run)]
    if runs.empty:
        print("no runs in the database yet; start with e.g. `bench eval --model minilm --suite sts`", file=sys.stderr)
        return 0
    if args.runs_only:
        frame = runs[RUN_COLUMNS]
    else:
        scores = db.scores(runs["id"].tolist())
        frame = scores.merge(runs[["id", "method", "model", "status"]], left_on="run_id", right_on="id")
        frame = frame[["run_id", "method", "model", "status", "suite", "dataset", "variant", "metric", "value", "n"]]
    if args.format == "csv":
        frame.to_csv(sys.stdout, index=False)
    elif args.format == "json":
        print(json.dumps(json.loads(frame.to_json(orient="records", date_format="iso")), indent=2))
    elif args.runs_only:
        print(frame.to_string(index=False))
    else:
        for run_id, group in frame.groupby("run_id"):
            head = runs[runs["id"] == run_id].iloc[0]
            print(f"run {run_id}  {head['method']}  {head['model']}  [{head['status']}]")
            print(score_frame(group).to_string(index=False, float_format=lambda v: f"{v:.2f}"))
            print()
    return 0
