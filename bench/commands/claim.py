"""`bench claim FILE [--scale cpu|paper]`: does a paper's claim hold against its reference row and its controls?

A claim file (claims/*.toml; bench/claim/spec.py) names the treatment, the comparators (the reference row, the
paper's baseline and the controls), the datasets, variants, metric and direction of each test, and the `bench run`
settings of each scale. The runs are sweep points: those already in the database (same config hash, whoever ran
them) are reused, only the missing ones train. Then one row per (comparator, dataset, variant): the difference
(treatment minus comparator, mean over seeds), its interval (seeds+items, at its Holm step-down level over the
claim's whole family), p, the Holm-adjusted p, the seeds, and the verdict: holds (the interval clears the threshold
in the claimed direction), contradicted (it lies on the other side) or inconclusive. The claim holds only if every
comparison holds; one line says so, and names the scale. The verdicts are stored (`bench results`, the leaderboard's
Claims view).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from bench.commands.common import declared_command, launch_settings


def register(sub: argparse._SubParsersAction) -> None:
    declared_command(sub, "claim", claim, description=__doc__,
                     help="check a paper's claim against its reference row and controls (claims/*.toml)")


def claim(args: argparse.Namespace) -> int:
    from bench.claim.check import load_checked
    from bench.claim.report import summary, table, verdict_rows
    from bench.claim.run import arm_states, judge, missing_rows, run_missing, state_lines, store_verdict
    from results_db import ResultsDB
    from results_db.redact import redact

    db_arg, db_url = launch_settings(args)
    spec, arms_ = load_checked(args.file, args.scale)  # every fault of the file, before anything trains
    print(f"claim {spec.name} ({spec.path}), scale {args.scale}: {spec.statement}".rstrip(": "))
    if spec.needs.get(args.scale):
        print(f"needs: {spec.needs[args.scale]}")
    print(f"database {redact(db_arg)}; {len(arms_)} arms: " + ", ".join(f"{a.name} ({a.role}, {len(a.points)} run"
                                                                          f"{'s' if len(a.points) > 1 else ''})" for a in arms_))  # fmt: skip
    if args.status:
        print("\n".join(state_lines(arm_states(ResultsDB(db_url, read_only=True), arms_))))
        return 0
    start = time.monotonic()
    code = 0
    if not args.no_run:
        folder = Path(args.folder or Path("runs") / "claims" / f"{spec.name}-{args.scale}")
        code = run_missing(arms_, db_url, folder, args.jobs, args.retries, wait_minutes=args.wait)
        if code == 130:
            return code
    db = ResultsDB(db_url, read_only=True) if args.no_run else ResultsDB(db_url)  # --no-run only reads
    found, missing, ids = judge(db, spec, args.scale)
    rows = verdict_rows(spec, found, missing_rows(missing))
    verdict, line = summary(spec, args.scale, rows)
    print()
    print(f"{spec.treatment} minus each comparator, {spec.suite} {spec.metric}; interval: seeds+items at its Holm "
          f"step-down level over the {spec.family_size} comparisons (level column); p: two-sided against the "
          "test's threshold (0, the smallest effect, or the margin)")  # fmt: skip
    print(table(rows, spec.treatment))
    print()
    print(line)
    if verdict == "incomplete":
        waiting = state_lines(arm_states(db, arms_), only_unfinished=True)
        if waiting:
            print("runs not finished (the verdict is judged on all seeds; nothing stored):\n" + "\n".join(waiting))
    elif not args.no_run:
        stored = store_verdict(db, spec, args.scale, verdict, line, rows, sorted(i for v in ids.values() for i in v))
        if not stored:
            print("(the same verdict, on the same runs, is stored already)")
    if not args.no_run:
        print(f"({time.monotonic() - start:.0f} s)")
    return code or (0 if verdict != "incomplete" else 1)
