"""Token ids of a training corpus's strings, computed once (in parallel over the cores) and kept on disk.

A pair method tokenises the same strings every time it meets a text (simcse the whole text, laser3-self its first
sentence, crop its chunks of sentences): tokenising whole documents is the largest part of building a batch once the
sentence splits are cached (bench.data.sentence_cache). `bodies(strings, tokenizer, max_body)` returns each
string's token ids without special tokens, cut at `max_body` (what `methods.pairs.TokenHelper.bodies` computes),
from `<lenbench cache>/tokens/<key>.npz` when this tokenizer already tokenised these strings at this length.

The key is sha256 of the tokenizer (its serialised fast tokenizer: vocabulary, normaliser, pre-tokeniser), the cut
and the strings in order. A tokenizer without a serialised form (a slow Python one) is never cached on disk.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from bench.data.sentence_cache import parallel_map
from bench.runtime.paths import cache_dir

log = logging.getLogger(__name__)

FOLDER = "tokens"
FORMAT = 1


def tokenizer_id(tokenizer: Any) -> str | None:
    """sha256 of the tokenizer's serialised form, or None when it has none (a slow tokenizer)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    try:
        text = backend.to_str() if backend is not None else None
    except Exception:  # noqa: BLE001 - any failure means: do not cache
        return None
    if not text:
        return None
    try:  # truncation and padding are per-call state the tokenizer keeps in this form: not what it does to a text
        data = json.loads(text)
        data.pop("truncation", None)
        data.pop("padding", None)
        text = json.dumps(data, sort_keys=True)
    except ValueError:
        return None
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def strings_key(tokenizer_hash: str, max_body: int, strings: Sequence[str]) -> str:
    digest = hashlib.sha256(f"tokens-{FORMAT}|{tokenizer_hash}|{max_body}\n".encode())
    for s in strings:
        digest.update(s.encode("utf-8", "surrogatepass"))
        digest.update(b"\n")
    return digest.hexdigest()


def tokenize(strings: list[str], tokenizer: Any, max_body: int) -> list[list[int]]:
    """Token ids without special tokens, cut at max_body, in one tokenizer call per 1,024 strings."""
    out: list[list[int]] = []
    for i in range(0, len(strings), 1024):
        chunk = strings[i : i + 1024]
        enc = tokenizer(chunk, add_special_tokens=False, truncation=True, max_length=max_body,
                        return_attention_mask=False, return_token_type_ids=False)["input_ids"]  # fmt: skip
        out.extend(list(ids[:max_body]) for ids in enc)
    return out


_TOKENIZER: Any = None  # the tokenizer forked pool workers use (set before the pool starts)


def _tokenize_chunk(chunk: list[str], max_body: int) -> list[list[int]]:
    return tokenize(chunk, _TOKENIZER, max_body)


def _read(path: Path, n: int) -> list[list[int]] | None:
    try:
        with np.load(path) as data:
            ids, offsets = data["ids"], data["offsets"]
    except (OSError, ValueError, KeyError):
        return None
    if len(offsets) != n + 1:
        return None
    flat = ids.tolist()
    bounds = offsets.tolist()
    return [flat[bounds[i] : bounds[i + 1]] for i in range(n)]


def _write(path: Path, bodies: list[list[int]]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        offsets = np.zeros(len(bodies) + 1, dtype=np.int64)
        np.cumsum([len(b) for b in bodies], out=offsets[1:])
        ids = np.fromiter((i for b in bodies for i in b), dtype=np.int32, count=int(offsets[-1]))
        tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp.npz")
        np.savez(tmp, ids=ids, offsets=offsets)
        os.replace(tmp, path)
    except OSError as exc:
        log.info("token ids not cached (%s)", exc)


def bodies(strings: Sequence[str], tokenizer: Any, max_body: int, workers: int | None = None,
           use_disk: bool = True) -> tuple[list[list[int]], bool]:  # fmt: skip
    """(token ids of each string, whether they came from the disk cache)."""
    global _TOKENIZER
    strings = list(strings)
    ident = tokenizer_id(tokenizer) if use_disk else None
    path = cache_dir() / FOLDER / f"{strings_key(ident, max_body, strings)}.npz" if ident else None
    if path is not None and path.is_file():
        found = _read(path, len(strings))
        if found is not None:
            return found, True
    _TOKENIZER = tokenizer
    try:
        out = parallel_map(partial(_tokenize_chunk, max_body=max_body), strings, workers)
    finally:
        _TOKENIZER = None
    if path is not None:
        _write(path, out)
    return out, False
