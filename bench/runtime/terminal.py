"""Text from files and databases, made safe to print on a terminal.

A name stored in the results database (an imported MTEB model name, a method, a sweep point), read from a file or
given on the command line may hold terminal escape sequences (ESC [ ... m, OSC 8 hyperlinks, cursor movement, a
title change), other control characters, or Unicode bidirectional overrides that make printed text read
differently from what it is. `safe` shows each such character as a visible escape (`\\x1b`, `\\u202e`), so what is
printed is exactly what is stored, and the terminal never interprets it. Every printer of stored text (bench
import / results / sweep / cache, the comparison tables) goes through it.
"""

from __future__ import annotations

import logging
import re
from typing import Any

# C0 controls (tab and newline too: a stored name is one field on one line), DEL, C1 controls, and the Unicode
# format characters that reorder or hide text (bidi embeddings / overrides / isolates, zero-width marks).
UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe(text: Any) -> str:
    """`text` as one printable line: every control or bidi character shown as an escape."""
    return UNSAFE.sub(_escape, str(text))


def safe_lines(text: str) -> str:
    """Like `safe` for a multi-line block (a table): newlines and tabs are kept, everything else escaped."""
    return "\n".join(UNSAFE.sub(lambda m: m.group() if m.group() == "\t" else _escape(m), line) for line in text.split("\n"))


class SafeStream:
    """A text stream whose writes go through `safe_lines`: installed as sys.stdout by `bench` for the length of a
    command, so no printer (tables, listings, summaries, one added later) can send a control sequence to the
    terminal. JSON output is unchanged (json.dumps already escapes control characters)."""

    def __init__(self, inner: Any):
        self._inner = inner

    def write(self, text: str) -> int:
        self._inner.write(safe_lines(text))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:  # flush, isatty, fileno, encoding...: the real stream's
        return getattr(self._inner, name)


class SafeFormatter(logging.Formatter):
    """Log records (warnings that quote stored or given names) with control characters escaped."""

    def format(self, record: logging.LogRecord) -> str:
        return safe_lines(super().format(record))
