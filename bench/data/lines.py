"""Reading a data file line by line (plain or .gz), the way every reader of bench.data does.

`read_lines` turns what the file itself gets wrong into a DataError naming the file and line: bytes that are not
UTF-8, a .gz file cut short, a line over the size cap. `read_jsonl` parses each line as one JSON object.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.data.errors import DataError

# The csv readers (STS tsv, qrels) read through `open_text`: a field is as long as a line may be.
csv.field_size_limit(1 << 30)

# No encoder reads more than a few thousand tokens of a text; a line beyond this is a broken file (or a whole
# corpus on one line) and would only cost minutes and gigabytes to tokenize. $LENBENCH_MAX_LINE_BYTES raises it.
MAX_LINE_BYTES = 1 << 20


def max_line_bytes() -> int:
    from bench import environment

    return int(environment.number("LENBENCH_MAX_LINE_BYTES", MAX_LINE_BYTES))


BOM = b"\xef\xbb\xbf"  # the UTF-8 byte order mark


def _open_binary(path: Path) -> io.BufferedIOBase:
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def read_lines(path: str | os.PathLike[str]) -> Iterator[str]:
    """The file's lines as text (line endings kept, as `open(newline="")` gives them; a leading byte order mark
    dropped, so every reader accepts one); a line that is not UTF-8,
    longer than the cap, or a truncated/corrupt .gz is a DataError naming the file and line."""
    for _lineno, _offset, line in read_lines_at(path):
        yield line


def read_lines_at(path: str | os.PathLike[str], start: int = 0, end: int | None = None,
                  first_lineno: int = 1) -> Iterator[tuple[int, int, str]]:  # fmt: skip
    """(line number, byte offset of the line in the (decompressed) file, line text) with `read_lines`' checks.

    `start`/`end`: only the lines that start in that byte range (`start` must be a line start, `first_lineno` its
    line number: a torchrun rank reads its share of a corpus this way, bench.data.corpus_share)."""
    p = Path(path)
    cap = max_line_bytes()
    lineno = first_lineno - 1
    offset = start
    try:
        with _open_binary(p) as fh:
            if start:
                fh.seek(start)
            while end is None or offset < end:
                raw = fh.readline(cap + 1)
                if not raw:
                    return
                lineno += 1
                if offset == 0 and raw.startswith(BOM):  # Windows editors start UTF-8 files with one: not text
                    raw = raw[len(BOM):]
                    offset = len(BOM)
                if len(raw) > cap:
                    raise DataError(
                        f"{p}:{lineno}: line longer than {cap:,} bytes; no encoder reads a text that long (it is cut "
                        "at max_len tokens): split or shorten that record, or raise $LENBENCH_MAX_LINE_BYTES"
                    )
                try:
                    yield lineno, offset, raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise DataError(
                        f"{p}:{lineno}: not UTF-8 text (byte {raw[exc.start]:#04x} at column {exc.start + 1}); "
                        "re-save the file as UTF-8"
                    ) from None
                offset += len(raw)
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise DataError(
            f"{p}: the gzip file is truncated or corrupt after line {lineno} ({exc}); download or compress it again"
        ) from None


class _LineFile(io.TextIOBase):
    """`read_lines` as a read-only text file for code that iterates a file object (csv, `for line in fh`)."""

    def __init__(self, path: Path):
        self._lines = read_lines(path)

    def __iter__(self) -> Iterator[str]:
        return self._lines

    def __next__(self) -> str:
        return next(self._lines)

    def readable(self) -> bool:
        return True

    def readline(self, size: int = -1) -> str:  # noqa: ARG002 - lines are capped by read_lines itself
        return next(self._lines, "")

    def close(self) -> None:
        self._lines.close()
        super().close()


def open_text(path: str | os.PathLike[str]) -> io.TextIOBase:
    """A text file (plain or .gz) whose lines come through `read_lines` (its checks, its errors)."""
    return _LineFile(Path(path))


def find_file(folder: Path, stem: str) -> Path | None:
    """`stem` or `stem.gz` inside folder."""
    for candidate in (folder / stem, folder / f"{stem}.gz"):
        if candidate.exists():
            return candidate
    return None


def read_jsonl(path: str | os.PathLike[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line; a corrupt line is a DataError naming file and line."""
    for lineno, _offset, obj in read_jsonl_at(path):
        yield lineno, obj


def read_jsonl_at(path: str | os.PathLike[str], start: int = 0, end: int | None = None,
                  first_lineno: int = 1) -> Iterator[tuple[int, int, dict[str, Any]]]:  # fmt: skip
    """(line number, byte offset, object) for each non-blank line, checked as `read_jsonl` checks it (`start`,
    `end`, `first_lineno`: as `read_lines_at`)."""
    for lineno, offset, line in read_lines_at(path, start, end, first_lineno):
        if not line.strip():
            continue
        yield lineno, offset, parse_json_object(line, path, lineno)


def parse_json_object(line: str | bytes, path: str | os.PathLike[str], lineno: int) -> dict[str, Any]:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}:{lineno}: not valid JSON ({exc.msg}); fix or remove that line") from None
    if not isinstance(obj, dict):
        raise DataError(f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}")
    return obj
