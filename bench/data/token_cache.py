"""Token ids of a training corpus's strings, computed once (in parallel over the cores) and kept on disk.

A pair method tokenises the same strings every time it meets a text (simcse the whole text, laser3-self its first
sentence, crop its chunks of sentences): tokenising whole documents is the largest part of building a batch once the
sentence splits are cached (bench.data.sentence_cache). `bodies(strings, tokenizer, max_body)` returns each
string's token ids without special tokens, cut at `max_body` (what `methods.pairs.TokenHelper.bodies` computes),
from `<lenbench cache>/tokens/<key>.npz` when this tokenizer already tokenised these strings at this length.

The key is sha256 of the tokenizer (its serialised fast tokenizer: vocabulary, normaliser, pre-tokeniser), the cut
and the strings in order. A tokenizer without a serialised form (a slow Python one) is never cached on disk.

`bench cache clear` deletes a file here only when `is_token_table_file` proves it is one of these: the name
(`<64 hex>.npz`) and an archive of exactly `ids.npy` and `offsets.npy`, or the hidden temporary name of an
interrupted write of one (`bench.runtime.writes.atomic_file`).
"""

from __future__ import annotations

import hashlib
import re
import time
import zipfile
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from bench.runtime import pools
from bench.runtime.paths import cache_dir
from bench.runtime.stores import FolderStore
from bench.runtime.writes import one_at_a_time

FOLDER = "tokens"
FORMAT = 1
FILE_NAME = re.compile(r"[0-9a-f]{64}\.npz")
TEMPORARY_NAME = re.compile(r"\.[0-9a-f]{64}\.npz\.\d+-[0-9a-f]{8}\.part")  # atomic_file's name for one in writing


def tokenizer_id(tokenizer: Any) -> str | None:
    """sha256 of the tokenizer's serialised form, or None when it has none (a slow tokenizer). Truncation and padding
    are per-call state the fast tokenizer keeps in that form (transformers sets them at every call): they are left
    out, and put back as they were."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    try:
        truncation, padding = backend.truncation, backend.padding
        backend.no_truncation()
        backend.no_padding()
        try:
            text = backend.to_str()
        finally:
            if truncation is not None:
                backend.enable_truncation(**truncation)
            if padding is not None:
                backend.enable_padding(**padding)
    except Exception:  # noqa: BLE001 - any failure means: do not cache
        return None
    return hashlib.sha256(text.encode("utf-8")).hexdigest() if text else None


class TokenTable:
    """string -> token ids, held as one flat int32 array and offsets (a list is made only for a string asked for)."""

    def __init__(self, strings: Sequence[str], ids: np.ndarray, offsets: np.ndarray):
        self.index = {s: i for i, s in enumerate(strings)}
        self.ids, self.offsets = ids, offsets

    @classmethod
    def from_lists(cls, strings: Sequence[str], bodies: Sequence[Sequence[int]]) -> "TokenTable":
        offsets = np.zeros(len(bodies) + 1, dtype=np.int64)
        np.cumsum([len(b) for b in bodies], out=offsets[1:])
        ids = np.fromiter((i for b in bodies for i in b), dtype=np.int32, count=int(offsets[-1]))
        return cls(strings, ids, offsets)

    def get(self, string: str, default: Any = None) -> Any:
        i = self.index.get(string)
        if i is None:
            return default
        return self.ids[self.offsets[i] : self.offsets[i + 1]].tolist()

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, string: str) -> list[int]:
        found = self.get(string)
        if found is None:
            raise KeyError(string)
        return found


def is_token_table_file(path: Path) -> bool:
    """Whether `path` is a file `bodies` wrote (or the temporary file of a write of one that was interrupted)."""
    if TEMPORARY_NAME.fullmatch(path.name):
        return True
    if not FILE_NAME.fullmatch(path.name):
        return False
    try:
        with zipfile.ZipFile(path) as archive:
            return sorted(archive.namelist()) == ["ids.npy", "offsets.npy"]
    except (OSError, zipfile.BadZipFile, ValueError):
        return False


# The training token tables as a store (`bench.runtime.stores`): the files of their folder that
# `is_token_table_file` proves are lenbench's.
STORE = FolderStore("training token table(s)", FOLDER, is_token_table_file, "not a token table lenbench wrote",
                    FILE_NAME, kind="token-tables")


def strings_key(tokenizer_hash: str, max_body: int, strings: Sequence[str], special: bool = False) -> str:
    digest = hashlib.sha256(f"tokens-{FORMAT}|{tokenizer_hash}|{max_body}|{'special' if special else 'body'}\n".encode())
    for s in strings:
        digest.update(s.encode("utf-8", "surrogatepass"))
        digest.update(b"\n")
    return digest.hexdigest()


def tokenize(strings: list[str], tokenizer: Any, max_body: int, special: bool = False) -> list[list[int]]:
    """Token ids without special tokens (with them when `special`), cut at max_body, in one tokenizer call per 1,024
    strings."""
    out: list[list[int]] = []
    for i in range(0, len(strings), 1024):
        chunk = strings[i : i + 1024]
        enc = tokenizer(chunk, add_special_tokens=special, truncation=True, max_length=max_body,
                        return_attention_mask=False, return_token_type_ids=False)["input_ids"]  # fmt: skip
        out.extend(list(ids[:max_body]) for ids in enc)
    return out


_TOKENIZER: Any = None  # a pool worker's own copy of the tokenizer (`_use_tokenizer`, the pool's initializer)


def _use_tokenizer(tokenizer: Any) -> None:
    global _TOKENIZER
    _TOKENIZER = tokenizer


def _tokenize_chunk(chunk: list[str], max_body: int, special: bool) -> list[list[int]]:
    return tokenize(chunk, _TOKENIZER, max_body, special)


def _read(path: Path, strings: Sequence[str]) -> TokenTable | None:
    try:
        with np.load(path) as data:
            ids, offsets = data["ids"], data["offsets"]
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):  # damaged: tokenised again, written whole
        return None
    if len(offsets) != len(strings) + 1 or (len(offsets) and int(offsets[-1]) != len(ids)):
        return None
    return TokenTable(strings, ids, offsets)


def _write(path: Path, table: TokenTable) -> None:
    """Best effort (a read-only or full cache folder: the ids are simply not kept), and never a partial file."""
    from bench.runtime.writes import atomic_file

    with atomic_file(path, "the token-id cache", best_effort=True) as tmp:
        with open(tmp, "wb") as fh:  # a file object: np.savez adds no .npz suffix to it
            np.savez(fh, ids=table.ids, offsets=table.offsets)


def _pool_key(tokenizer: Any, ident: str | None) -> str:
    """The kept pool serves this tokenizer again when its fingerprint is the same; one without a fingerprint gets
    fresh workers each time (an object id may be reused by another tokenizer)."""
    ident = ident or tokenizer_id(tokenizer)
    return ident if ident is not None else f"unkeyed-{time.monotonic_ns()}"


def bodies(strings: Sequence[str], tokenizer: Any, max_body: int, workers: int | None = None,
           use_disk: bool = True, special: bool = False) -> tuple[TokenTable, bool]:  # fmt: skip
    """(string -> token ids of the (distinct) strings, whether they came from the disk cache); `special`: with the
    tokenizer's special tokens, max_body then counting them (`add_special_tokens=True, max_length=max_body`)."""
    strings = list(dict.fromkeys(strings))
    ident = tokenizer_id(tokenizer) if use_disk else None
    path = cache_dir() / FOLDER / f"{strings_key(ident, max_body, strings, special)}.npz" if ident else None
    if path is not None and path.is_file():
        found = _read(path, strings)
        if found is not None:
            return found, True
    if path is None:
        return _tokenized(strings, tokenizer, max_body, workers, special, ident), False
    # Runs started side by side on one corpus (a claim's seeds) tokenise it once: the others wait, then read it.
    with one_at_a_time(path.parent, "the token ids"):
        found = _read(path, strings) if path.is_file() else None
        if found is not None:
            return found, True
        table = _tokenized(strings, tokenizer, max_body, workers, special, ident)
        _write(path, table)
    return table, False


def _tokenized(strings: list[str], tokenizer: Any, max_body: int, workers: int | None, special: bool,
               ident: str | None) -> TokenTable:  # fmt: skip
    # Workers get a pickled copy of the tokenizer once (the pool is kept while the tokenizer is the same); this
    # process tokenises with its own when there is no pool or the pool stalls.
    pool = pools.PoolSetup("token-bodies", key=_pool_key(tokenizer, ident), initializer=_use_tokenizer,
                          initargs=(tokenizer,))  # fmt: skip
    out = pools.parallel_map(partial(_tokenize_chunk, max_body=max_body, special=special), strings, workers, pool=pool,
                             local=partial(tokenize, tokenizer=tokenizer, max_body=max_body, special=special))  # fmt: skip
    return TokenTable.from_lists(strings, out)
