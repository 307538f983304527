"""What an evaluation has read of a corpus file, kept until it finishes, so that resuming it refuses a changed file.

An evaluation of a large corpus commits its embeddings chunk by chunk (bench.encode.cache): killed at any point, the
next call with the same model reads the committed chunks back and encodes only the rest. That is right only if the
file is the one the first call read. So while it reads, the evaluation keeps a note beside the cache,

    <lenbench cache>/progress/<sha256(corpus path | model)[:24]>.json
        {"path", "size", "read_bytes", "sha256": of the file's first read_bytes bytes}

updated as each chunk is read (the digest is extended, never recomputed), and deleted when the corpus is scored. A
call that finds a note checks the file first: another size, or other bytes where the first call read, is refused in
one line naming the file and the note to delete to score the file as it is now.

A torchrun rank that reads only its byte range of the file (bench.data.corpus_share) keeps a note of its own, keyed
by that range, whose digest starts at the range's first byte (`start`; "start" in the note).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from pathlib import Path

from bench.data.errors import DataError
from bench.runtime.stores import FolderStore

log = logging.getLogger(__name__)

FOLDER = "progress"
BLOCK = 1 << 20
FILE_NAME = re.compile(r"[0-9a-f]{24}\.json")


class CorpusProgress:
    """The note of one (corpus file, model) evaluation (see the module docstring)."""

    def __init__(self, corpus: Path, who: str, cache_dir: Path, start: int = 0):
        self.corpus = Path(corpus)
        key = hashlib.sha256(f"{self.corpus.resolve()}|{who}".encode()).hexdigest()[:24]
        self.note = Path(cache_dir) / FOLDER / f"{key}.json"
        self.start = start  # the first byte read: the digest covers [start, read_bytes)
        self._sha = hashlib.sha256()
        self._hashed = start
        self._writable = True

    def check(self) -> None:
        """Refuse (DataError, one line) a corpus that changed since an interrupted evaluation read it."""
        try:
            note = json.loads(self.note.read_text())
            size, read, digest = int(note["size"]), int(note["read_bytes"]), str(note["sha256"])
            start = int(note.get("start", 0))
        except (OSError, ValueError, KeyError, TypeError):
            return  # no note (or not one of ours): nothing was left half done
        now = self.corpus.stat().st_size
        what = None
        if now != size:
            what = f"its size is {now:,} bytes, not {size:,}"
        elif _range_digest(self.corpus, start, read) != digest:
            what = f"its bytes {start:,} to {read:,} differ" if start else f"its first {read:,} bytes differ"
        if what:
            raise DataError(f"{self.corpus} changed since an interrupted evaluation of it read it ({what}), so its "
                            f"committed chunks are not this file's; delete {self.note} to score the file as it is now")  # fmt: skip

    def read_up_to(self, end: int) -> None:
        """The evaluation has read the file's bytes [start, end): extend the digest and write the note (best effort)."""
        if end <= self._hashed or not self._writable:
            return
        try:
            with open(self.corpus, "rb") as fh:
                fh.seek(self._hashed)
                left = end - self._hashed
                while left > 0:
                    block = fh.read(min(BLOCK, left))
                    if not block:
                        break
                    self._sha.update(block)
                    left -= len(block)
            self._hashed = end - left
            note = {"path": str(self.corpus), "size": self.corpus.stat().st_size, "read_bytes": self._hashed,
                    "sha256": self._sha.hexdigest(), **({"start": self.start} if self.start else {})}  # fmt: skip
            self.note.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.note.with_name(f".{self.note.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(note))
            os.replace(tmp, self.note)
        except OSError as exc:  # a full disk or read-only cache: resuming is then only unchecked
            self._writable = False
            log.info("corpus progress note %s not written (%s)", self.note, exc)

    def finish(self) -> None:
        self.note.unlink(missing_ok=True)


def _range_digest(path: Path, start: int, end: int) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as fh:
        fh.seek(start)
        left = end - start
        while left > 0:
            block = fh.read(min(BLOCK, left))
            if not block:
                break
            sha.update(block)
            left -= len(block)
    return sha.hexdigest()


def is_progress_note(path: Path) -> bool:
    """Whether `path` is a note this module wrote: its name, and its keys read back."""
    if not FILE_NAME.fullmatch(path.name):
        return False
    try:
        note = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(note, dict) and {"path", "size", "read_bytes", "sha256"} <= note.keys()


# The notes as a store (`bench.runtime.stores`): a note left is an evaluation that was interrupted; clearing it lets
# a resumed evaluation go on without checking that its corpus file is the one it began on.
STORE = FolderStore("corpus progress note(s)", FOLDER, is_progress_note, "not a progress note lenbench wrote",
                    FILE_NAME, kind="progress")
