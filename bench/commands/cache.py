"""`bench cache info|clear`: where lenbench's caches live, what they hold, and emptying them.

The location is `bench.runtime.paths.cache_dir()` ($LENBENCH_CACHE, else $XDG_CACHE_HOME/lenbench/embeddings, else
~/.cache/lenbench/embeddings). Each cache there is a store (`bench.runtime.stores`) that owns its layout: the
embedding cache (`bench.encode.cache`), the ONNX exports of `--backend onnx` (`bench.encode.backends.onnx_export`),
the token ids of evaluation (`bench.encode.token_ids`) and of training (`bench.data.token_cache`), the sentence
splits of training corpora (`bench.data.sentence_cache`) and the progress notes of interrupted corpus evaluations
(`bench.evaluate.corpus_progress`). `info` gives each file's size and how long ago it was last written or used;
`--kind KIND` (repeatable) narrows either action to those stores, and `clear --older-than AGE` (7d, 12h, 30min)
deletes only files untouched for that long. ONNX exports are also kept under a size bound as they are made
($LENBENCH_ONNX_CACHE_GIB, 2 by default: the least recently used go first). `clear` deletes only files a store can
prove are lenbench's (its names, its format read back; SQLite files with their -wal/-shm companions). Anything else, such as
a results database or another program's file that a mistyped $LENBENCH_CACHE or --cache-dir points at, is listed as
"kept" and never removed. A file that cannot be deleted (another program holds it open where the system forbids
deleting open files, or it is not this user's to delete) is named and left; the rest is cleared. `clear --damaged`
also deletes the kept files that have a name lenbench gives its cache files (damaged, or another program's under
lenbench's name) and the damaged cache files lenbench set aside (corrupt/); SQLite files go with their -wal/-shm, and
a -wal/-shm whose database is gone goes with a plain `clear`.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
from pathlib import Path
from typing import TYPE_CHECKING

from bench.runtime.stores import Kept, Listing, damaged, human_size, older_than, parse_age, size_of
from bench.runtime.terminal import safe

if TYPE_CHECKING:
    from bench.runtime.stores import Store

# Every cache lenbench keeps, in the order `info` lists them: each module has its `STORE` (a bench.runtime.stores
# Store), imported when the command runs. A new cache is its module and one line here.
STORES: tuple[str, ...] = (
    "bench.encode.cache",  # embeddings
    "bench.encode.backends.onnx_export",  # ONNX exports
    "bench.encode.token_ids",  # evaluation token ids
    "bench.data.token_cache",  # training token tables
    "bench.data.sentence_cache",  # sentence splits
    "bench.evaluate.corpus_progress",  # progress notes of interrupted corpus evaluations
)


def stores() -> list[Store]:
    return [importlib.import_module(module).STORE for module in STORES]


# the --kind words, in STORES' order (each store module's STORE.kind; read without importing torch)
KINDS: tuple[str, ...] = ("embeddings", "onnx", "token-ids", "token-tables", "sentence-splits", "progress")


def _age(text: str) -> float:
    try:
        return parse_age(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cache", help="show where the embedding cache lives and how big it is; clear it",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", choices=("info", "clear"), help="info: location, files and size; clear: delete the cache files")
    p.add_argument("--cache-dir", default=None, help="cache folder (default: $LENBENCH_CACHE or ~/.cache/lenbench/embeddings)")
    p.add_argument("--kind", action="append", default=None, metavar="KIND",
                   help="only this kind of cache file (repeatable): " + ", ".join(KINDS))
    p.add_argument("--older-than", default=None, metavar="AGE", type=_age,
                   help="clear: only files untouched for at least AGE (7d, 12h, 30min, 45s; a bare number is days)")
    p.add_argument("--damaged", action="store_true",
                   help="clear: also delete files under the names lenbench gives its cache files that it cannot prove "
                        "it wrote (damaged, or another program's), and the damaged cache files it set aside")  # fmt: skip
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bench.runtime.errors import ConfigError
    from bench.runtime.paths import cache_dir

    root = Path(args.cache_dir).expanduser() if args.cache_dir else cache_dir()
    if root.exists() and not root.is_dir():
        given = "--cache-dir" if args.cache_dir else "$LENBENCH_CACHE"
        raise ConfigError(f"the cache folder {safe(str(root))} is a file, not a folder: point {given} at a folder")
    chosen = [store for store in stores() if not args.kind or store.kind in args.kind]
    unknown = sorted(set(args.kind or ()) - {store.kind for store in stores()})
    if unknown:
        raise ConfigError(f"--kind {', '.join(unknown)}: no such cache; the kinds are {', '.join(KINDS)}")
    if args.older_than is not None and args.action != "clear":
        raise ConfigError("--older-than goes with `bench cache clear` (info shows every file's age)")
    listings = [(store, store.files(root)) for store in chosen]
    if args.older_than is not None:
        listings = [(store, older_than(listing, args.older_than)) for store, listing in listings]
    if args.action == "info":
        print(f"embedding cache: {safe(str(root))}" + ("" if root.is_dir() else " (not created yet)"))
        for store, listing in listings:
            print("\n".join(store.describe(listing)))
    else:
        _clear(root, listings, args.damaged)
    _print_kept(root, [listing for _, listing in listings])
    if args.action == "info":
        print("clear it with `bench cache clear`; move it with $LENBENCH_CACHE")
    return 0


def _clear(root: Path, listings: list[tuple[Store, Listing]], with_damaged: bool) -> None:
    removed, freed, busy = 0, 0, []
    for store, listing in listings:
        for part in (listing, damaged(listing)) if with_damaged else (listing,):
            done = store.clear(part)
            removed, freed, busy = removed + done.removed, freed + done.freed, busy + done.busy
    if root.is_dir() and not any(root.iterdir()):
        with contextlib.suppress(OSError):  # another process may have just written into it
            root.rmdir()
    print(f"removed {removed} file(s), {human_size(freed)}, from {safe(str(root))}")
    if busy:
        print(f"could not remove {len(busy)} file(s) that another program holds open or this user may not delete; "
              "close that program and run `bench cache clear` again:")  # fmt: skip
        for f in busy:
            print(f"  {safe(str(f.relative_to(root)))}")


def kept_files(listings: list[Listing]) -> list[Kept]:
    """The files no store proved its own, once each: two stores may keep their files in one folder (tokens/), and
    each lists what it does not recognise there; the word of a store whose name the file has is the one kept."""
    ours = {p for listing in listings for f in listing.ours for p in f.paths}
    chosen: dict[Path, Kept] = {}
    for listing in listings:
        for k in listing.kept:
            if k.path not in ours and (k.path not in chosen or k.named and not chosen[k.path].named):
                chosen[k.path] = k
    return list(chosen.values())


def _print_kept(root: Path, listings: list[Listing]) -> None:
    """The files left (after a clear: those still there), and the word that removes the damaged ones."""
    kept = [k for k in kept_files(listings) if k.path.exists()]
    if kept:
        print(f"kept {len(kept)} file(s) that are not provably lenbench's cache files:")
        for k in kept:
            word = "; under a name lenbench gives: damaged, or another program's" if k.named else ""
            print(f"  {safe(str(k.path.relative_to(root)))}  ({safe(k.why)}{word})")
        named = sum(k.named for k in kept)
        if named:
            print(f"`bench cache clear --damaged` deletes the {named} under lenbench's names; the others are never deleted")
    aside = [p for listing in listings for p in listing.aside if p.exists()]
    if aside:
        print(f"{len(aside)} damaged cache file(s) set aside in {safe(str(aside[0].parent))} ({human_size(size_of(aside))}); "
              "`bench cache clear --damaged` deletes them")  # fmt: skip
