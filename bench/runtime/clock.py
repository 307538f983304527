"""How long this process has run: what a command's whole wall time is (Run.runtime["wall_seconds"], which
`bench eval --estimate` predicts), measured from the process's start as the kernel recorded it."""

from __future__ import annotations

import os
import time

_IMPORTED = time.time()  # the fallback where /proc is not there: from the first import of this module


def process_seconds() -> float:
    """Seconds since this process started (Linux: /proc/self/stat; elsewhere since this module was imported)."""
    try:
        with open("/proc/self/stat", encoding="ascii") as fh:
            fields = fh.read().rpartition(")")[2].split()
        with open("/proc/uptime", encoding="ascii") as fh:
            uptime = float(fh.read().split()[0])
        return max(0.0, uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return time.time() - _IMPORTED
