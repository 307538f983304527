"""The bound on the ONNX exports folder: an export is made for every model evaluated on the CPU with the onnx backend
(86 MiB for MiniLM, one per trained encoder), so without a bound the folder grows with every run. After each new
export, the least recently used exports (each load marks its file used) are deleted until the folder holds at most
$LENBENCH_ONNX_CACHE_GIB (DEFAULT_GIB by default). A deleted export is made again, once, if its model comes back;
a process that has one loaded keeps its session (the graph is read into memory when the session starts)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

from bench import environment
from bench.runtime.stores import plain_files

BOUND_ENV = "LENBENCH_ONNX_CACHE_GIB"
DEFAULT_GIB = 2.0


def bound_bytes() -> int:
    """$LENBENCH_ONNX_CACHE_GIB in bytes (DEFAULT_GIB when unset; a bad value: one line naming it)."""
    return int(environment.number(BOUND_ENV, DEFAULT_GIB) * 2**30)


def mark_used(path: Path) -> None:
    """The export was loaded: it is the most recently used (best effort: a read-only cache keeps its times)."""
    with contextlib.suppress(OSError):
        os.utime(path)


def keep_within_bound(folder: Path, keep: Path, ours: Callable[[Path], bool], bound: int | None = None,
                      ) -> list[tuple[Path, int]]:  # fmt: skip
    """Delete the least recently used exports in `folder` other than `keep` until they total at most `bound` bytes
    (default bound_bytes()); returns what went, with its bytes. Only files `ours` proves are exports lenbench wrote
    (onnx_export.is_lenbench_export) count and go; an export another process deletes meanwhile is simply gone."""
    bound = bound_bytes() if bound is None else bound
    sized = []
    for p in plain_files(folder):
        with contextlib.suppress(OSError):
            if ours(p):
                st = p.stat()
                sized.append((st.st_mtime, p, st.st_size))
    total = sum(size for _, _, size in sized)
    removed = []
    for _, path, size in sorted(sized, key=lambda t: t[0]):
        if total <= bound:
            break
        if path == keep:
            continue
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            removed.append((path, size))
        total -= size
    return removed
