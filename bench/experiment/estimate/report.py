"""The estimate as people read it (`bench eval/run --estimate`), and the actual times of an earlier run of the same
evaluation beside it, so that an estimate can be checked against what happened.

The last line is `total: SECONDS s ...`, whole seconds (benchmarks/scale_cold.py reads it).
"""

from __future__ import annotations

from typing import Any

from bench.runtime.progress import duration


def size(n: float) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def count(n: int) -> str:
    for limit, unit in ((1e9, "G"), (1e6, "M")):
        if n >= limit:
            return f"{n / limit:.2f}{unit}"
    return f"{n:,}"


def shared_name(names: list[str]) -> str:
    """The datasets one file holds, in a few words: `fever`, or `cqadupstack (12 datasets)` for its forums."""
    if len(names) == 1:
        return names[0]
    stem = names[0].split("-")[0]
    return f"{stem} ({len(names)} datasets)" if all(n.startswith(stem) for n in names) else ", ".join(names)


def estimate_lines(est: Any) -> list[str]:
    """One line per dataset, then the fixed costs, what to download and the totals."""
    lines = [f"estimate on {est.device} (cold caches; calibrated in {est.calibration_seconds:.1f} s)",
             f"  {'dataset':<28} {'documents':>10} {'queries':>8} {'texts':>9} {'tokens':>9} {'cache':>10} "
             f"{'time':>14}" + ("  actual" if any(d.actual_seconds is not None for d in est.datasets) else "")]  # fmt: skip
    for d in est.datasets:
        name = f"{d.suite}:{d.dataset}"
        if d.seconds is None:
            lines.append(f"  {name:<28} {d.note}")
            continue
        row = (f"  {name:<28} {count(d.documents):>10} {count(d.queries) if d.queries else '':>8} {count(d.texts):>9} "
               f"{count(d.tokens):>9} {size(d.cache_bytes):>10} {duration(d.seconds):>14}")  # fmt: skip
        if d.actual_seconds is not None:
            row += f"  {duration(d.actual_seconds)}"
        if d.download:
            row += "  (not here)"
        lines.append(row)
    lines.append(f"  process start {duration(est.start_seconds)}; model load and first call {duration(est.load_seconds)}")
    downloads = est.downloads
    for url, (names, n) in downloads.items():
        lines.append(f"  download {shared_name(names)}: {url}" + (f" (about {size(n)})" if n else ""))
    if downloads:
        lines.append("  (--download fetches them, or put them in a data folder: `bench data list`)")
    tail = f"; an earlier identical run took {duration(est.actual_wall_seconds)}" if est.actual_wall_seconds else ""
    lines.append(f"total: {est.seconds:.0f} s ({duration(est.seconds)}) wall, peak memory {size(est.peak_memory_bytes)}, "
                 f"caches {size(est.cache_bytes)} on disk in {est.cache_dir}"
                 + (f", downloads about {size(est.download_bytes)}" if est.download_bytes else "") + tail)  # fmt: skip
    return lines


def add_actual(est: Any, db: Any) -> None:
    """The per-dataset seconds and whole wall time of the newest finished run of this exact evaluation (same config
    hash), beside the estimate."""
    from results_db.records import json_column

    if db is None or est.config_hash is None:
        return
    runs = db.runs()
    if runs.empty:
        return
    same = runs[(runs["config_hash"] == est.config_hash) & (runs["status"] == "finished")].sort_values("id")
    if same.empty:
        return
    runtime = json_column(same.iloc[-1].get("runtime")) or {}
    seconds = runtime.get("evaluation_seconds") or {}
    for d in est.datasets:
        if d.key in seconds:
            d.actual_seconds = float(seconds[d.key])
    if runtime.get("wall_seconds") is not None:
        est.actual_wall_seconds = float(runtime["wall_seconds"])
