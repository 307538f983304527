"""`bench method new|check`: write a one-file method to start from, and try a method's contract in seconds.

`new NAME` writes ./NAME.py (bench.train.method_scaffold), which `check` passes as written; `check FILE|NAME` runs
bench.experiment.method_check and prints one "ok" line (exit 0) or one line per problem, naming the file and line
and what was expected (exit 2): the same lines `bench run --method FILE` stops with.
"""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "method", help="write a one-file method (new) and check one in seconds (check)",
        description="Write a one-file method to start from (`bench method new NAME`), and check a method's "
        "contract before a real run (`bench method check FILE|NAME`): its positives function on a few texts and two "
        "training steps on a tiny random model, offline, in seconds. Each problem is one line naming the file and "
        "line (the traceback with `bench --debug`).",
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    new = actions.add_parser("new", help="write a runnable one-file method NAME.py",
                             description="Write a runnable one-file method: a @contrastive function of whole batches "
                             "of texts and a config with one hyper-parameter and its range. An existing file is never "
                             "overwritten.")  # fmt: skip
    new.add_argument("name", metavar="NAME", help="the method's name (a slug, not a built-in method's)")
    new.add_argument("--out", dest="file", metavar="FILE", help="the file to write (default ./NAME.py)")
    new.set_defaults(func=run_new)
    check = actions.add_parser("check", help="check a method file (or a registered method) in seconds",
                               description="Run a method's contract on a few texts and two training steps of batch "
                               "4 on the tiny random-bert-tiny, offline. Prints one 'ok' line (exit 0), or one line "
                               "per problem naming the file and line and what was expected (exit 2).")  # fmt: skip
    check.add_argument("target", metavar="FILE|NAME", help="a method file (./my_method.py, ./m.py:NAME) or a "
                       "registered method's name")  # fmt: skip
    check.add_argument("--hp", action="append", default=[], metavar="METHOD.KEY=VALUE",
                       help="a hyper-parameter value to check against its declared range")
    check.set_defaults(func=run_check)


def run_new(args: argparse.Namespace) -> int:
    from bench.train.method_scaffold import write

    path = write(args.name, args.file)
    print(f"wrote {path}: method {args.name!r}; next: bench method check {_shown(path)}, then "
          f"bench run --method {_shown(path)}")  # fmt: skip
    return 0


def run_check(args: argparse.Namespace) -> int:
    from bench.commands.common import tracebacks
    from bench.experiment.method_check import check
    from bench.runtime.terminal import safe

    report = check(args.target, args.hp, debug=tracebacks(args))
    if report.ok:
        print(report.summary())
        return 0
    for line in report.problems:
        print(f"bench: error: {safe(line)}", file=sys.stderr)
    return 2


def _shown(path: object) -> str:
    text = str(path)
    return text if "/" in text else f"./{text}"
