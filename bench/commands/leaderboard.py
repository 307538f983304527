"""`bench leaderboard`: start the Streamlit leaderboard on a results database (opened read-only)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from bench.commands.common import add_db
from results_db import default_db_url

APP = Path(__file__).resolve().parent.parent.parent / "leaderboard" / "app.py"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "leaderboard",
        help="browse, filter and compare runs in a web app (Streamlit)",
        description="Start the leaderboard web app on a results database, read-only. Views: leaderboard, "
        "robustness (clean vs @elong, diag), one run, two runs compared with a paired bootstrap CI.",
    )
    add_db(p)
    p.add_argument("--port", type=int, default=8501, help="port to serve on (default 8501)")
    p.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1: this machine only)")
    p.set_defaults(func=run)


def streamlit_command(db: str | None, port: int, host: str) -> list[str]:
    location = db or default_db_url()
    if "://" not in location:
        location = str(Path(location).expanduser().resolve())
    return [
        sys.executable, "-m", "streamlit", "run", str(APP),
        "--server.address", host,
        "--server.port", str(port),
        "--server.headless", "true",
        "--browser.gatherUsageStats", "false",
        "--client.toolbarMode", "minimal",
        "--", "--db", location,
    ]  # fmt: skip


def run(args: argparse.Namespace) -> int:
    command = streamlit_command(args.db, args.port, args.host)
    print(f"leaderboard on http://{args.host}:{args.port}  (database {command[-1]}, read-only; Ctrl-C stops it)", flush=True)
    # Become the Streamlit server (no child process): a signal to this process stops the server itself.
    os.execv(command[0], command)
    return 0  # not reached
