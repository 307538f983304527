"""`bench cache info|clear`: where the embedding cache lives, what it holds, and emptying it.

The location is `bench.encode.cache.default_cache_dir()` ($LENBENCH_CACHE, else $XDG_CACHE_HOME/lenbench/embeddings,
else ~/.cache/lenbench/embeddings). `clear` deletes only the cache's own files: the SQLite files (*.sqlite and their -wal/-shm
companions) and the ONNX exports of `--backend onnx` in its onnx/ folder (*.onnx and leftover temporary files),
never anything else a mistyped $LENBENCH_CACHE might point at.
"""

from __future__ import annotations

import argparse
import sqlite3
from pathlib import Path

CACHE_PATTERNS = ("*.sqlite", "*.sqlite-wal", "*.sqlite-shm")
ONNX_PATTERNS = ("*.onnx", ".*.onnx.*.tmp")  # bench.encode.onnx_backend's exports and its interrupted writes


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cache", help="show where the embedding cache lives and how big it is; clear it",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", choices=("info", "clear"), help="info: location, files and size; clear: delete the cache files")
    p.add_argument("--cache-dir", default=None, help="cache folder (default: $LENBENCH_CACHE or ~/.cache/lenbench/embeddings)")
    p.set_defaults(func=run)


def cache_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted({f for pattern in CACHE_PATTERNS for f in directory.glob(pattern) if f.is_file()})


def onnx_files(directory: Path) -> list[Path]:
    folder = directory / "onnx"
    if not folder.is_dir():
        return []
    return sorted({f for pattern in ONNX_PATTERNS for f in folder.glob(pattern) if f.is_file()})


def namespace_of(path: Path) -> str:
    """The encoder a cache file belongs to (its meta row), read-only; '?' when it cannot be read."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            row = conn.execute("SELECT v FROM meta WHERE k = 'namespace'").fetchone()
        finally:
            conn.close()
    except sqlite3.Error:
        return "?"
    return str(row[0]) if row else "?"


def human_size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def run(args: argparse.Namespace) -> int:
    from bench.encode.cache import default_cache_dir

    directory = Path(args.cache_dir).expanduser() if args.cache_dir else default_cache_dir()
    files = cache_files(directory)
    exports = onnx_files(directory)
    total = sum(f.stat().st_size for f in files)
    onnx_total = sum(f.stat().st_size for f in exports)
    if args.action == "info":
        print(f"embedding cache: {directory}" + ("" if directory.is_dir() else " (not created yet)"))
        print(f"{len([f for f in files if f.suffix == '.sqlite'])} encoder file(s), {human_size(total)}")
        for f in files:
            if f.suffix == ".sqlite":
                print(f"  {f.name}  {human_size(f.stat().st_size):>10}  {namespace_of(f)}")
        print(f"{len(exports)} ONNX export(s), {human_size(onnx_total)}")
        for f in exports:
            print(f"  onnx/{f.name}  {human_size(f.stat().st_size):>10}")
        print("clear it with `bench cache clear`; move it with $LENBENCH_CACHE")
        return 0
    for f in files + exports:
        f.unlink(missing_ok=True)
    for folder in (directory / "onnx", directory):
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
    print(f"removed {len(files) + len(exports)} file(s), {human_size(total + onnx_total)}, from {directory}")
    return 0
