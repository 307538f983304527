"""Cache stores: every cache lenbench keeps under its cache folder (`bench.runtime.paths.cache_dir`) is one module
that owns its layout, and offers it as a `Store`:

    listing = store.files(root)     # its files under root (each with its -wal/-shm companions), what else lies where
                                    # it keeps them, and what it set aside
    store.describe(listing)         # `bench cache info`'s lines for it
    store.clear(listing)            # delete its files (a file before its companions), say what could not go

`bench cache info|clear` (bench.commands.cache) loops over its list of stores and knows no file name: adding a
cache is its module (with a store) and one line in that list. A store lists as its own only files it can prove it
wrote (its naming, and its format read back); anything else where it keeps its files is `Kept`, never deleted by
a plain `clear`. A kept file under a name the store gives (`Kept.named`: damaged, or another program's file under
lenbench's name) and the corrupt files a cache set aside (`SET_ASIDE`) are deleted by `clear --damaged`.
-wal/-shm files go with their database, and those whose database is gone (`orphans`) are the store's to delete.
The shared parts (sizes, the info lines, deleting with companions, setting aside) are the functions below, so a
store's own code is what it knows: its names and its format.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

COMPANIONS = ("-wal", "-shm")  # what SQLite keeps beside a database in WAL mode; they go with it
SET_ASIDE = "corrupt"  # sub-folder of the cache folder where damaged cache files are moved (for inspection)


@dataclass(frozen=True)
class StoreFile:
    """One file a store proved it wrote, with the files that go with it (deleted after it, kept if it stays)."""

    path: Path
    detail: str = ""  # what `info` says of it (an embedding namespace, a use)
    companions: tuple[Path, ...] = ()

    @property
    def paths(self) -> tuple[Path, ...]:
        return (self.path, *self.companions)


@dataclass(frozen=True)
class Kept:
    """A file where a store keeps its files that it cannot prove it wrote: listed with why, never deleted. `named`:
    it has a name the store gives (not merely a file in its folder), so the store's word on it is the one shown."""

    path: Path
    why: str
    named: bool = False


@dataclass(frozen=True)
class Listing:
    """What a store found under one cache folder (`root`)."""

    root: Path
    ours: list[StoreFile] = field(default_factory=list)
    kept: list[Kept] = field(default_factory=list)
    aside: list[Path] = field(default_factory=list)  # files it set aside as corrupt (for inspection, by hand)


@dataclass(frozen=True)
class Cleared:
    """What `clear` did: how many files went and their bytes; the ones that could not (held open, not ours to
    delete)."""

    removed: int = 0
    freed: int = 0
    busy: list[Path] = field(default_factory=list)


class Store(Protocol):
    """One cache (see the module docstring). `title`: what `info` counts its files as ("ONNX export(s)"); `kind`:
    the word `bench cache info|clear --kind` picks it by ("onnx")."""

    title: str
    kind: str

    def files(self, root: Path) -> Listing: ...

    def describe(self, listing: Listing) -> list[str]: ...

    def clear(self, listing: Listing) -> Cleared: ...


@dataclass(frozen=True)
class FolderStore:
    """A cache whose files all lie in one folder of the cache root, each proven lenbench's by `proves` (its name and
    its format read back): the sentence splits, the training token tables, the ONNX exports. Anything else there is
    kept with `why`; with `file_name`, a kept file under a name the store gives is marked `named` (`clear --damaged`
    removes it)."""

    title: str
    folder: str
    proves: Callable[[Path], bool]
    why: str
    file_name: re.Pattern[str] | None = None
    kind: str = ""

    def files(self, root: Path) -> Listing:
        listing = Listing(root)
        for path in plain_files(root / self.folder):
            if self.proves(path):
                listing.ours.append(StoreFile(path))
            else:
                named = bool(self.file_name and self.file_name.fullmatch(path.name))
                listing.kept.append(Kept(path, self.why, named))
        return listing

    def describe(self, listing: Listing) -> list[str]:
        return describe_files(self.title, listing)

    def clear(self, listing: Listing) -> Cleared:
        return clear_files(listing, [listing.root / self.folder])


def size_of(paths: Iterable[Path]) -> int:
    """Bytes of the files that still exist (a companion may come and go with its database's connections)."""
    total = 0
    for p in paths:
        with contextlib.suppress(OSError):
            total += p.stat().st_size
    return total


def human_size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def plain_files(folder: Path) -> list[Path]:
    """The regular files of a folder (no links, no sub-folders), sorted; none when it is not a folder."""
    if not folder.is_dir():
        return []
    return sorted(f for f in folder.iterdir() if f.is_file() and not f.is_symlink())


def companions(path: Path) -> tuple[Path, ...]:
    """The -wal/-shm files beside an SQLite file that exist now."""
    return tuple(p for p in (Path(f"{path}{c}") for c in COMPANIONS) if p.is_file())


def orphans(found: Iterable[Path], file_name: re.Pattern[str], suffixes: tuple[str, ...] = COMPANIONS) -> list[Path]:
    """The companions among `found` (a file named as `file_name` says + one of `suffixes`: -wal/-shm by default)
    whose file is not there any more (a clear while another process held it open): useless without it, and the
    store's to delete."""
    out = []
    for p in found:
        base = next((p.name[: -len(s)] for s in suffixes if p.name.endswith(s)), None)
        if base is not None and file_name.fullmatch(base) and not (p.parent / base).exists():
            out.append(p)
    return out


def named_as(path: Path, file_name: re.Pattern[str], suffixes: tuple[str, ...] = COMPANIONS) -> bool:
    """Whether `path`, or the file it is a companion of (`suffixes`), has a name `file_name` gives."""
    name = next((path.name[: -len(s)] for s in suffixes if path.name.endswith(s)), path.name)
    return bool(file_name.fullmatch(name))


def set_aside(path: Path, root: Path, suffixes: tuple[str, ...] = COMPANIONS) -> Path:
    """Move a damaged cache file (with its -wal/-shm) into root/SET_ASIDE under a name stamped with the time and this
    process (its companions, the files named `path` + each of `suffixes`, beside it), and return where it went: the
    cache is rebuilt beside it, and nothing is deleted that a person may want to look at. A file another process
    moved meanwhile is simply not there any more."""
    folder = root / SET_ASIDE
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{path.name}.{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    for suffix in ("", *suffixes):
        with contextlib.suppress(FileNotFoundError):
            os.replace(Path(f"{path}{suffix}"), Path(f"{target}{suffix}"))
    return target


def damaged(listing: Listing) -> Listing:
    """What `clear --damaged` deletes of a store: its kept files under its names (companions are named alike, so
    they go too) and the files it set aside."""
    files = [StoreFile(k.path) for k in listing.kept if k.named]
    return Listing(listing.root, files + [StoreFile(p) for p in listing.aside])


def describe_files(title: str, listing: Listing) -> list[str]:
    """`info`'s lines for a store: how many files and their bytes, then each file (its bytes with its companions',
    and how long ago it was last written or used)."""
    from bench.runtime.terminal import safe

    lines = [f"{len(listing.ours)} {title}, {human_size(size_of(p for f in listing.ours for p in f.paths))}"]
    now = time.time()
    for f in listing.ours:
        name = safe(str(f.path.relative_to(listing.root)))
        age = human_age(now - last_touched(f))
        lines.append(f"  {name}  {human_size(size_of(f.paths)):>10}  {age:>10}" + (f"  {safe(f.detail)}" if f.detail else ""))
    return lines


def last_touched(f: StoreFile) -> float:
    """When a store's file was last written or marked used (the newest mtime of it and its companions)."""
    times = []
    for p in f.paths:
        with contextlib.suppress(OSError):
            times.append(p.stat().st_mtime)
    return max(times, default=0.0)


def older_than(listing: Listing, seconds: float) -> Listing:
    """The listing with only its files untouched for at least `seconds` (`clear --older-than`); kept and set-aside
    files are not a store's to age."""
    now = time.time()
    return Listing(listing.root, [f for f in listing.ours if now - last_touched(f) >= seconds], listing.kept, listing.aside)


def human_age(seconds: float) -> str:
    """'40 s ago', '12 min ago', '5 h ago', '3 d ago'."""
    for unit, size in (("d", 86_400), ("h", 3_600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit} ago"
    return f"{max(seconds, 0):.0f} s ago"


AGE = re.compile(r"^\s*(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>d|h|min|m|s)?\s*$")
AGE_UNITS = {"d": 86_400, "h": 3_600, "min": 60, "m": 60, "s": 1, None: 86_400}


def parse_age(text: str) -> float:
    """`--older-than` in seconds: '7d', '12h', '30min', '45s', or a number of days."""
    m = AGE.match(str(text))
    if m is None:
        raise ValueError(f"{text!r}: give an age like 7d, 12h, 30min or 45s (a bare number is days)")
    return float(m["n"]) * AGE_UNITS[m["unit"]]


def clear_files(listing: Listing, folders: Iterable[Path] = ()) -> Cleared:
    """Delete a store's files, each before its companions (its last commits may be in the -wal: those go only with
    it), then its `folders` where they are left empty. A file the system will not delete (held open where open
    files cannot be deleted, or not this user's) stays, with its companions, and is reported."""
    removed, freed, busy = 0, 0, []
    for f in listing.ours:
        for i, path in enumerate(f.paths):
            if i and f.path in busy:
                busy.append(path)
                continue
            size = size_of([path])
            try:
                path.unlink(missing_ok=True)
            except OSError:
                busy.append(path)
                continue
            removed, freed = removed + 1, freed + size
    for folder in folders:
        if folder.is_dir() and not any(folder.iterdir()):
            with contextlib.suppress(OSError):  # another process may have just written into it
                folder.rmdir()
    return Cleared(removed, freed, busy)
