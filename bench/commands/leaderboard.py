"""`bench leaderboard`: start the Streamlit leaderboard on a results database (opened read-only).

It serves on 127.0.0.1 (this machine only). Another address is refused unless the leaderboard is protected: a
password (see `leaderboard.auth`: $LENBENCH_LEADERBOARD_PASSWORD or `leaderboard_password` in Streamlit's
secrets file; the app then shows a login form), or `--public`, which says an authenticating reverse proxy
stands in front of it.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from bench.commands.common import add_db
from bench.runtime.errors import ConfigError
from results_db import default_db_url
from results_db.redact import redact

APP = Path(__file__).resolve().parent.parent.parent / "leaderboard" / "app.py"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "leaderboard",
        help="browse, filter and compare runs in a web app (Streamlit)",
        description="Start the leaderboard web app on a results database, read-only. Views: leaderboard, "
        "robustness (clean vs @elong, diag), one run, two runs compared with a paired bootstrap CI. "
        "It serves on 127.0.0.1; to serve on another address set a password ($LENBENCH_LEADERBOARD_PASSWORD or "
        "leaderboard_password in .streamlit/secrets.toml) or pass --public behind an authenticating reverse proxy.",
    )
    add_db(p)
    p.add_argument("--port", type=int, default=8501, help="port to serve on (default 8501)")
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to serve on (default 127.0.0.1: this machine only); another address needs a password or --public",
    )
    p.add_argument(
        "--public",
        action="store_true",
        help="serve on a non-loopback --host without a password: only behind a reverse proxy that authenticates users",
    )
    p.set_defaults(func=run)


def check_exposure(host: str, public: bool, cwd: Path | None = None) -> str:
    """How the server is protected ("this machine only", "password", "public"); ConfigError when it would be open."""
    from leaderboard import auth

    if auth.is_loopback(host):
        return "password" if auth.configured_password(cwd) else "this machine only"
    if auth.configured_password(cwd):
        return "password"
    if public:
        return "public"
    raise ConfigError(
        f"--host {host} would serve the leaderboard to the network without authentication; set a password "
        f"(${auth.PASSWORD_ENV}, or {auth.SECRET_KEY} in .streamlit/secrets.toml) or, behind a reverse proxy that "
        "authenticates users, pass --public"
    )


def resolve_db(db: str | None) -> str:
    """A file path made absolute (the server may change folder); an SQLAlchemy URL as it is."""
    location = db or default_db_url()
    if "://" not in location:
        location = str(Path(location).expanduser().resolve())
    return location


def streamlit_command(db: str | None, port: int, host: str) -> list[str]:
    """The Streamlit server's command line. A database URL that holds a password is not on it (a process list shows
    every user the arguments): `run` hands it over in $LENBENCH_DB instead, which the app reads without --db."""
    location = resolve_db(db)
    return [
        sys.executable, "-m", "streamlit", "run", str(APP),
        "--server.address", host,
        "--server.port", str(port),
        "--server.headless", "true",
        "--browser.gatherUsageStats", "false",
        "--client.toolbarMode", "minimal",
        "--", *(["--db", location] if redact(location) == location else []),
    ]  # fmt: skip


def check_port(host: str, port: int) -> None:
    """ConfigError when nothing could serve on host:port (another server holds it): said before the URL is
    printed, not after Streamlit fails to start."""
    import errno
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds: a closed port's wait is no clash
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:  # other failures (a name, an address elsewhere): the server says
                raise ConfigError(f"--port {port} on {host}: already in use; stop the server there or pick another "
                                  "--port") from None  # fmt: skip


def run(args: argparse.Namespace) -> int:
    access = check_exposure(args.host, args.public)
    check_port(args.host, args.port)
    command = streamlit_command(args.db, args.port, args.host)
    location = resolve_db(args.db)
    os.environ["LENBENCH_DB"] = location  # the server's only way to a URL with a password (see streamlit_command)
    print(
        f"leaderboard on http://{args.host}:{args.port}  (database {redact(location)}, read-only; access: {access}; "
        "Ctrl-C stops it)",
        flush=True,
    )
    # Become the Streamlit server (no child process): a signal to this process stops the server itself.
    shield_pipes()
    os.execv(command[0], command)
    return 0  # not reached


def shield_pipes(fds: tuple[int, ...] = (1, 2)) -> list[int]:
    """Put a relay between the server and each pipe it writes to (`bench leaderboard | head -5`): the relay copies
    the server's output on, and once the reader has gone it keeps reading and drops it. Without it, the server's
    next print after the reader left raises BrokenPipeError inside Streamlit, which then crashes or no longer
    stops on SIGTERM. Files and terminals are left alone. The relays ignore SIGINT and SIGTERM and end when the
    server does (end of file); returns their process ids."""
    import signal
    import stat

    relays = []
    for fd in fds:
        try:
            if not stat.S_ISFIFO(os.fstat(fd).st_mode):
                continue
        except OSError:
            continue
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the relay: no Python cleanup, no handlers of the parent's
            for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
                signal.signal(signum, signal.SIG_IGN)
            os.close(write_end)
            reader_gone = False
            while True:
                try:
                    data = os.read(read_end, 1 << 16)
                except InterruptedError:
                    continue
                if not data:
                    os._exit(0)
                while data and not reader_gone:
                    try:
                        data = data[os.write(fd, data):]
                    except InterruptedError:
                        continue
                    except OSError:  # the reader closed the pipe: drop everything from now on
                        reader_gone = True
        os.close(read_end)
        os.dup2(write_end, fd)
        os.close(write_end)
        relays.append(pid)
    return relays
