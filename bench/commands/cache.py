"""`bench cache info|clear`: where the embedding cache lives, what it holds, and emptying it.

The location is `bench.encode.cache.default_cache_dir()` ($LENBENCH_CACHE, else $XDG_CACHE_HOME/lenbench/embeddings,
else ~/.cache/lenbench/embeddings). `clear` deletes only files it can prove are lenbench's: embedding cache files
(SQLite files with lenbench's cache schema and format marker, see `bench.encode.cache.inspect_cache_file`, with
their -wal/-shm companions), the ONNX exports of `--backend onnx` in its onnx/ folder (named as lenbench names
them and carrying lenbench's metadata; leftover temporary files of an interrupted export) and the token ids in its
tokens/ folder (evaluation: `bench.encode.token_ids.is_token_id_file`, with their -wal/-shm companions; training:
`bench.data.token_cache.is_token_table_file`). Anything else, such as a results database or another program's file
that a mistyped $LENBENCH_CACHE or --cache-dir points at, is listed as "kept" and never removed. A file that cannot
be deleted (another program holds it open where the system forbids deleting open files, or it is not this user's
to delete) is named and left; the rest is cleared. Corrupt cache files that lenbench set aside (corrupt/) are
listed, for deletion by hand.
"""

from __future__ import annotations

import argparse
import contextlib
import mmap
import re
from pathlib import Path

from bench.data.token_cache import FOLDER as TOKENS, is_token_table_file
from bench.encode.cache import SET_ASIDE, CacheFileInfo, inspect_cache_file
from bench.encode.token_ids import is_token_id_file
from bench.runtime.terminal import safe

# bench.encode.backends.onnx_export's file names ({fingerprint}-{pooling}-v{FORMAT}[-fused].onnx), interrupted writes
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


def token_files(directory: Path) -> tuple[list[Path], list[Path]]:
    """(lenbench's token-id caches in the tokens/ folder, each followed by its -wal/-shm companions; the other files
    there). The evaluation and training pipelines both keep their token ids in that folder."""
    folder = directory / TOKENS
    if not folder.is_dir():
        return [], []
    files = sorted(f for f in folder.iterdir() if f.is_file() and not f.is_symlink())
    ours: list[Path] = []
    for f in files:
        if is_token_id_file(f):
            ours += [p for p in (f, Path(f"{f}-wal"), Path(f"{f}-shm")) if p in files]
        elif is_token_table_file(f):
            ours.append(f)
    mine = set(ours)
    return ours, [f for f in files if f not in mine]


def _companion(path: Path) -> bool:
    return path.name.endswith(("-wal", "-shm"))


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
    files = cache_files(directory)
    exports, foreign_onnx = onnx_files(directory)
    tokens, foreign_tokens = token_files(directory)
    kept = [c for c in candidates if c.namespace is None]
    if args.action == "info":
        _info(directory, [c for c in candidates if c.namespace is not None], files, exports, tokens)
    else:
        _clear(directory, files + exports + tokens)
    _print_kept(kept, foreign_onnx, foreign_tokens, set_aside_files(directory))
    if args.action == "info":
        print("clear it with `bench cache clear`; move it with $LENBENCH_CACHE")
    return 0


def _info(directory: Path, ours: list[CacheFileInfo], files: list[Path], exports: list[Path],
          tokens: list[Path]) -> None:  # fmt: skip
    print(f"embedding cache: {safe(str(directory))}" + ("" if directory.is_dir() else " (not created yet)"))
    print(f"{len(ours)} encoder file(s), {human_size(_size(files))}")
    for c in ours:
        print(f"  {c.path.name}  {human_size(c.path.stat().st_size):>10}  {safe(c.namespace or '')}")
    print(f"{len(exports)} ONNX export(s), {human_size(_size(exports))}")
    for f in exports:
        print(f"  onnx/{safe(f.name)}  {human_size(f.stat().st_size):>10}")
    token_caches = [f for f in tokens if not _companion(f)]
    print(f"{len(token_caches)} token-id file(s), {human_size(_size(tokens))}")
    for f in token_caches:
        evaluation = f.suffix == ".sqlite"  # bench.encode.token_ids; else bench.data.token_cache
        size = _size([f, Path(f"{f}-wal"), Path(f"{f}-shm")] if evaluation else [f])
        print(f"  {TOKENS}/{safe(f.name)}  {human_size(size):>10}  {'evaluation' if evaluation else 'training'}")


def _clear(directory: Path, paths: list[Path]) -> None:
    removed, freed = 0, 0
    busy: list[Path] = []
    for f in paths:  # a database before its -wal/-shm: those go only with it (its last commits may be in the -wal)
        if _companion(f) and Path(str(f)[:-4]) in busy:
            busy.append(f)
            continue
        size = _size([f])
        try:
            f.unlink(missing_ok=True)
        except OSError:  # held open where open files cannot be deleted (Windows), or not this user's to delete
            busy.append(f)
            continue
        removed, freed = removed + 1, freed + size
    for folder in (directory / "onnx", directory / TOKENS, directory):
        if folder.is_dir() and not any(folder.iterdir()):
            with contextlib.suppress(OSError):  # another process may have just written into it
                folder.rmdir()
    print(f"removed {removed} file(s), {human_size(freed)}, from {safe(str(directory))}")
    if busy:
        print(f"could not remove {len(busy)} file(s) that another program holds open or this user may not delete; "
              "close that program and run `bench cache clear` again:")  # fmt: skip
        for f in busy:
            print(f"  {safe(str(f.relative_to(directory)))}")


def _print_kept(kept: list[CacheFileInfo], foreign_onnx: list[Path], foreign_tokens: list[Path],
                aside: list[Path]) -> None:  # fmt: skip
    if kept or foreign_onnx or foreign_tokens:
        print(f"kept {len(kept) + len(foreign_onnx) + len(foreign_tokens)} file(s) that are not lenbench's cache files "
              "(never removed):")  # fmt: skip
        for c in kept:
            print(f"  {safe(c.path.name)}  ({safe(c.why)})")
        for f in foreign_onnx:
            print(f"  onnx/{safe(f.name)}  (not an export lenbench wrote)")
        for f in foreign_tokens:
            print(f"  {TOKENS}/{safe(f.name)}  (not a token-id file lenbench wrote)")
    if aside:
        print(f"{len(aside)} corrupt cache file(s) set aside in {safe(str(aside[0].parent))} ({human_size(_size(aside))}); "
              "delete them by hand when no longer needed")  # fmt: skip
