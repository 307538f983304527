"""A long-lived `bench` process for one job slot of `bench sweep` / `bench claim`: it runs the points sent to it one
after another in-process (`bench.cli.main`), so the interpreter start and the imports (torch, transformers, pandas:
seconds each time on a loaded machine) are paid once per slot, not once per point.

    python -m bench.sweep.serve        # reads {"argv": [...], "log": PATH} lines on stdin, answers {"rc": N} lines

Each point's output (its file descriptors 1 and 2, so C libraries' output too) goes to its log, as a point's own
process did. The process is started by `bench.sweep.worker.SlotProcess` with exec (never forked from the sweep), in
its own session: Ctrl-C reaches it only through the sweep, which sends SIGINT once; `bench.cli.main` then marks the
point's row interrupted and returns 130, and the sweep stops sending points.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import IO, Any, Callable


def run_one(main: Callable[[list[str]], int], argv: list[str], log: str) -> int:
    """One command with fds 1 and 2 pointed at `log` (appended); its exit code."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    try:
        with open(log, "ab", buffering=0) as fh:
            os.dup2(fh.fileno(), 1)
            os.dup2(fh.fileno(), 2)
            try:
                return int(main(argv) or 0)
            except SystemExit as exc:  # argparse's usage error (2)
                return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except KeyboardInterrupt:
                return 130
            except BaseException:  # noqa: BLE001 - a point's bug is its log's traceback, as in its own process
                traceback.print_exc()
                return 1
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])


def serve(requests: IO[str], answers: IO[str], main: Callable[[list[str]], Any] | None = None) -> None:
    """Run each request line until the input ends."""
    if main is None:  # the command line's entry, looked up by name (the sweep package sits below bench.cli)
        import importlib

        main = importlib.import_module("bench.cli").main
    for line in requests:
        if not line.strip():
            continue
        request = json.loads(line)
        rc = run_one(main, list(request["argv"]), str(request["log"]))
        answers.write(json.dumps({"rc": rc}) + "\n")
        answers.flush()


if __name__ == "__main__":
    answers = os.fdopen(os.dup(1), "w")  # the sweep's pipe, kept apart: fd 1 is each point's log while it runs
    serve(sys.stdin, answers)
