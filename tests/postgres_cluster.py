"""A throwaway PostgreSQL cluster for tests: initdb + pg_ctl in a temp folder, loopback only, a free port.

initdb refuses to run as root, and CI runs as root: there the cluster runs as the unprivileged `nobody` through
`runuser`, owning its temp folder. Tests skip with the reason when the binaries (Debian's `postgresql`, here
/usr/lib/postgresql/<version>/bin) are missing.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


def postgres_bin() -> Path | None:
    for candidate in [os.environ.get("LENBENCH_PG_BIN", ""), *sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)]:
        if candidate and (Path(candidate) / "initdb").exists() and (Path(candidate) / "pg_ctl").exists():
            return Path(candidate)
    found = shutil.which("initdb")
    return Path(found).parent if found and shutil.which("pg_ctl") else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def throwaway_postgres(database: str = "lenbench") -> Iterator[str]:
    """Start a cluster, create `database`, yield its SQLAlchemy URL (psycopg 3), stop and delete it afterwards."""
    pg = postgres_bin()
    if pg is None:
        pytest.skip("PostgreSQL binaries (initdb, pg_ctl) not found: apt-get install postgresql (Debian puts them in "
                    "/usr/lib/postgresql/<version>/bin), or set LENBENCH_PG_BIN")
    pytest.importorskip("psycopg", reason="psycopg 3 is not installed (pip install 'psycopg[binary]')")
    as_user: list[str] = []
    folder = Path(tempfile.mkdtemp(prefix="lenbench-pg-"))
    if os.geteuid() == 0:  # initdb will not run as root
        runuser = shutil.which("runuser")
        if runuser is None:
            pytest.skip("running as root without runuser: initdb cannot run as root")
        as_user = [runuser, "-u", "nobody", "--"]
        shutil.chown(folder, user="nobody")
    data, log = folder / "data", folder / "log"
    port = _free_port()

    def run(*cmd: str) -> None:
        proc = subprocess.run([*as_user, *cmd], capture_output=True, text=True, cwd=folder, timeout=120)
        if proc.returncode:
            tail = (log.read_text()[-2000:] if log.exists() else "") + proc.stdout[-2000:] + proc.stderr[-2000:]
            raise RuntimeError(f"{Path(cmd[0]).name} failed ({proc.returncode}):\n{tail}")

    started = False
    try:
        run(str(pg / "initdb"), "-D", str(data), "-A", "trust", "-U", "bench", "-E", "UTF8", "--no-sync")
        opts = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50"
        run(str(pg / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "60", "-o", opts, "start")
        started = True
        import psycopg

        with psycopg.connect(f"postgresql://bench@127.0.0.1:{port}/postgres", autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{database}"')
        yield f"postgresql+psycopg://bench@127.0.0.1:{port}/{database}"
    finally:
        if started:
            with contextlib.suppress(Exception):
                run(str(pg / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(folder, ignore_errors=True)
