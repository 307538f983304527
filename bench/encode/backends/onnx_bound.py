"""The bound on the ONNX exports folder: an export is made for every model evaluated on the CPU with the onnx backend
(86 MiB for MiniLM, one per trained encoder), so without a bound the folder grows with every run. After each new
export, the least recently used exports (each load marks its file used) are deleted until the folder holds at most
$LENBENCH_ONNX_CACHE_GIB (DEFAULT_GIB by default). A deleted export is made again, once, if its model comes back;
a process that has one loaded keeps its session (the graph is read into memory when the session starts)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from bench.runtime.errors import ConfigError
from bench.runtime.stores import plain_files

BOUND_ENV = "LENBENCH_ONNX_CACHE_GIB"
DEFAULT_GIB = 2.0


def bound_bytes() -> int:
    raw = os.environ.get(BOUND_ENV, "").strip()
    if not raw:
        return int(DEFAULT_GIB * 2**30)
    try:
        gib = float(raw)
    except ValueError:
        gib = -1.0
    if not gib > 0:
        raise ConfigError(f"${BOUND_ENV}={raw!r}: give the most GiB the ONNX exports may hold, a number above 0 "
                          f"(unset: {DEFAULT_GIB:g})")  # fmt: skip
    return int(gib * 2**30)


def mark_used(path: Path) -> None:
    """The export was loaded: it is the most recently used (best effort: a read-only cache keeps its times)."""
    with contextlib.suppress(OSError):
        os.utime(path)


def keep_within_bound(folder: Path, keep: Path, bound: int | None = None) -> list[tuple[Path, int]]:
    """Delete the least recently used exports in `folder` other than `keep` until they total at most `bound` bytes
    (default bound_bytes()); returns what went, with its bytes. Only files `is_lenbench_export` proves are ours count
    and go; an export another process deletes meanwhile is simply gone."""
    from bench.encode.backends.onnx_export import is_lenbench_export

    bound = bound_bytes() if bound is None else bound
    sized = []
    for p in plain_files(folder):
        with contextlib.suppress(OSError):
            if is_lenbench_export(p):
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
