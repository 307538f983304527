"""`bench leaderboard ... | head -5`: the reader leaves, the server keeps serving, and SIGTERM still stops it."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time

import pytest

from results_db import ResultsDB


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serving(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def test_the_server_outlives_a_closed_pipe_and_stops_on_sigterm(tmp_path):
    pytest.importorskip("streamlit")
    db = tmp_path / "r.sqlite"
    ResultsDB(db)
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "bench", "leaderboard", "--db", str(db), "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    try:
        assert proc.stdout.readline().startswith(b"leaderboard on http://127.0.0.1:")
        proc.stdout.close()  # what `| head -1` does after its line
        deadline = time.monotonic() + 90
        while not _serving(port) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _serving(port), f"the server never came up (exit status {proc.poll()})"
        time.sleep(3)  # Streamlit prints its URLs after it starts: into the closed pipe
        assert proc.poll() is None and _serving(port), "the server died when its reader had gone"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) is not None
        assert not _serving(port)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
