"""`bench cache info|clear`: where the embedding cache lives, what it holds, and emptying it.

The location is `bench.encode.cache.default_cache_dir()` ($LENBENCH_CACHE, else $XDG_CACHE_HOME/lenbench/embeddings,
else ~/.cache/lenbench/embeddings). `clear` deletes only files it can prove are lenbench's: embedding cache files
(SQLite files with lenbench's cache schema and format marker, see `bench.encode.cache.inspect_cache_file`, with
their -wal/-shm companions) and the ONNX exports of `--backend onnx` in its onnx/ folder (named as lenbench names
them and carrying lenbench's metadata; leftover temporary files of an interrupted export). Anything else, such as a
results database or another program's file that a mistyped $LENBENCH_CACHE or --cache-dir points at, is listed as
"kept" and never removed. Corrupt cache files that lenbench set aside (corrupt/) are listed, for deletion by hand.
"""

from __future__ import annotations

import argparse
import mmap
import re
from pathlib import Path

from bench.encode.cache import SET_ASIDE, CacheFileInfo, inspect_cache_file
from bench.runtime.terminal import safe

# bench.encode.onnx_backend's export names ({fingerprint}-{pooling}-v{FORMAT}[-fused].onnx) and its interrupted writes
ONNX_NAME = re.compile(r"[0-9a-f]{8,64}-(mean|cls|tokens)-v\d+(-fused)?\.onnx")
ONNX_TMP = re.compile(r"\.[0-9a-f]{8,64}-(mean|cls|tokens)-v\d+(-fused)?\.onnx\.\d+\.tmp")
ONNX_META = b"\x0a\x08lenbench"  # the protobuf bytes of the metadata key every lenbench export carries


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cache", help="show where the embedding cache lives and how big it is; clear it",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", choices=("info", "clear"), help="info: location, files and size; clear: delete the cache files")
    p.add_argument("--cache-dir", default=None, help="cache folder (default: $LENBENCH_CACHE or ~/.cache/lenbench/embeddings)")
    p.set_defaults(func=run)


def sqlite_candidates(directory: Path) -> list[CacheFileInfo]:
    """Every *.sqlite file in the folder, with what can be proven about it."""
    if not directory.is_dir():
        return []
    return [inspect_cache_file(f) for f in sorted(directory.glob("*.sqlite")) if f.is_file() and not f.is_symlink()]


def cache_files(directory: Path) -> list[Path]:
    """The proven embedding cache files and their -wal/-shm companions (what `clear` deletes)."""
    out = []
    for info in sqlite_candidates(directory):
        if info.namespace is not None:
            out += [p for p in (info.path, Path(f"{info.path}-wal"), Path(f"{info.path}-shm")) if p.is_file()]
    return out


def is_lenbench_export(path: Path) -> bool:
    if ONNX_TMP.fullmatch(path.name):
        return True
    if not ONNX_NAME.fullmatch(path.name):
        return False
    try:
        with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return data.find(ONNX_META) >= 0
    except (OSError, ValueError):  # ValueError: an empty file cannot be mapped
        return False


def onnx_files(directory: Path) -> tuple[list[Path], list[Path]]:
    """(lenbench's exports, other files) in the onnx/ folder."""
    folder = directory / "onnx"
    if not folder.is_dir():
        return [], []
    files = sorted(f for f in folder.iterdir() if f.is_file() and not f.is_symlink())
    ours = [f for f in files if is_lenbench_export(f)]
    return ours, [f for f in files if f not in ours]


def set_aside_files(directory: Path) -> list[Path]:
    folder = directory / SET_ASIDE
    return sorted(f for f in folder.iterdir() if f.is_file()) if folder.is_dir() else []


def human_size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def _size(paths: list[Path]) -> int:
    return sum(p.stat().st_size for p in paths if p.exists())


def run(args: argparse.Namespace) -> int:
    from bench.encode.cache import default_cache_dir

    directory = Path(args.cache_dir).expanduser() if args.cache_dir else default_cache_dir()
    candidates = sqlite_candidates(directory)
    ours = [c for c in candidates if c.namespace is not None]
    kept = [c for c in candidates if c.namespace is None]
    files = cache_files(directory)
    exports, foreign_onnx = onnx_files(directory)
    aside = set_aside_files(directory)
    total, onnx_total = _size(files), _size(exports)
    if args.action == "info":
        print(f"embedding cache: {safe(str(directory))}" + ("" if directory.is_dir() else " (not created yet)"))
        print(f"{len(ours)} encoder file(s), {human_size(total)}")
        for c in ours:
            print(f"  {c.path.name}  {human_size(c.path.stat().st_size):>10}  {safe(c.namespace or '')}")
        print(f"{len(exports)} ONNX export(s), {human_size(onnx_total)}")
        for f in exports:
            print(f"  onnx/{safe(f.name)}  {human_size(f.stat().st_size):>10}")
        _print_kept(kept, foreign_onnx, aside)
        print("clear it with `bench cache clear`; move it with $LENBENCH_CACHE")
        return 0
    for f in files + exports:
        f.unlink(missing_ok=True)
    for folder in (directory / "onnx", directory):
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
    print(f"removed {len(files) + len(exports)} file(s), {human_size(total + onnx_total)}, from {safe(str(directory))}")
    _print_kept(kept, foreign_onnx, aside)
    return 0


def _print_kept(kept: list[CacheFileInfo], foreign_onnx: list[Path], aside: list[Path]) -> None:
    if kept or foreign_onnx:
        print(f"kept {len(kept) + len(foreign_onnx)} file(s) that are not lenbench embedding caches (never removed):")
        for c in kept:
            print(f"  {safe(c.path.name)}  ({safe(c.why)})")
        for f in foreign_onnx:
            print(f"  onnx/{safe(f.name)}  (not an export lenbench wrote)")
    if aside:
        print(f"{len(aside)} corrupt cache file(s) set aside in {safe(str(aside[0].parent))} ({human_size(_size(aside))}); "
              "delete them by hand when no longer needed")  # fmt: skip
