"""The one way a database URL, or text that may hold one, becomes text that is stored or shown: the password
of every `scheme://user:password@host` URL is replaced by `***` (as SQLAlchemy's `hide_password` writes it).

Rows (`runs.command`, `runs.error`), logs, model cards, exports and the leaderboard get URLs only through
`redact`; `results_db.models` applies it to every command and error written to a run row, and a migration
applies it to rows written before (`results_db.migrations`). Imports nothing outside the standard library.
"""

from __future__ import annotations

import re

HIDDEN = "***"

# scheme://user:password@ -- the user part has no ':', '/' or '@'; the password runs to the last '@' before the
# host, but never across whitespace or a quote (so two URLs on one command line are redacted separately). A
# shell-quoted URL ('postgresql://u:p w@h/db') is handled first, as one quoted word.
_SCHEME = r"[A-Za-z][A-Za-z0-9+.\-]*://"
_QUOTED = re.compile(r"'(" + _SCHEME + r"[^:/@'\s]*):([^']*)@([^'@]*)'")
_BARE = re.compile(r"(" + _SCHEME + r"[^:/@'\"\s]*):([^\s'\"]*)@")


def redact(text: str) -> str:
    """`text` with the password of every URL in it replaced by ***; text without one comes back unchanged."""
    if not text or "://" not in text:
        return text
    text = _QUOTED.sub(lambda m: f"'{m.group(1)}:{HIDDEN}@{m.group(3)}'", text)
    return _BARE.sub(lambda m: f"{m.group(1)}:{HIDDEN}@", text)


def redact_args(argv: list[str]) -> list[str]:
    """Each command-line argument redacted on its own (a password may hold spaces or quotes there)."""
    return [_redact_word(a) for a in argv]


_WORD = re.compile(r"^((?:--[\w-]+=)?" + _SCHEME + r"[^:/@]*):(.*)@([^@]*)$", re.S)


def _redact_word(arg: str) -> str:
    m = _WORD.match(arg)
    if m:
        return f"{m.group(1)}:{HIDDEN}@{m.group(3)}"
    return redact(arg)
