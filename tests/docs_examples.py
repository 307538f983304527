"""The examples of README.md and docs/: every ```bash and ```python block, found in page order, with what the page
says about it.

Conventions (docs/index.md restates them for authors):
- a ```bash block runs with `bash -euo pipefail` in the page's own empty folder (the blocks of one page share it, in
  order), with the checkout's `.venv/bin` first on PATH and the tests' offline settings;
- a ```python block runs in one namespace per page (its blocks share variables, in order), in that same folder;
- a block directly followed by a ```output block must print each of that block's non-blank lines, in order (a line
  `...` stands for anything; other lines are matched after collapsing runs of spaces);
- `<!-- example: skip REASON -->` on the line before a block skips it, with its reason (the network, a GPU);
- `<!-- example: env NAME=VALUE ... -->` before a block sets variables for that block;
- `<!-- example: tested-by tests/test_x.py -->`: that test reads the block from this page and runs it in its own
  way (a tiny model for minilm, say), so it is not run twice; the test file must name the page;
- every other fence (```text, ```toml, ```bibtex ...) is shown, not run.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

RUN = ("bash", "python")
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+|~~~+)\s*(?P<info>[\w+-]*)[^\n]*$")
DIRECTIVE = re.compile(r"^\s*<!--\s*example:\s*(?P<verb>skip|env|tested-by)\b\s*(?P<rest>.*?)\s*-->\s*$")


@dataclass
class Example:
    page: Path
    line: int  # 1-based line of the opening fence
    language: str
    code: str
    output: str | None = None  # the ```output block that follows, if any
    skip: str = ""  # the reason it is not run
    tested_by: str = ""  # the test file that runs it from this page
    env: dict[str, str] = field(default_factory=dict)

    @property
    def runs(self) -> bool:
        """Run by the page's test (not skipped, not run by a test of its own)."""
        return not self.skip and not self.tested_by

    @property
    def where(self) -> str:
        return f"{self.page.name}:{self.line}"


def blocks(text: str) -> list[tuple[int, str, str, list[str]]]:
    """(line, info, body, directive lines before it) of every fenced block of a Markdown text."""
    lines = text.splitlines()
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = len(m["indent"]), m["fence"], m["info"].lower()
        start, body = i, []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        before, j = [], start - 1
        while j >= 0 and DIRECTIVE.match(lines[j]):
            before.append(lines[j])
            j -= 1
        out.append((start + 1, info, "\n".join(body) + "\n", before))
        i += 1
    return out


def examples(page: Path) -> list[Example]:
    found: list[Example] = []
    previous_run: Example | None = None
    for line, info, body, directives in blocks(page.read_text(encoding="utf-8")):
        if info == "output":
            if previous_run is None or previous_run.output is not None:
                raise ValueError(f"{page}:{line}: an ```output block must follow a ```bash or ```python block")
            previous_run.output = body
            continue
        previous_run = None
        if info not in RUN:
            continue
        example = Example(page, line, info, body)
        for directive in directives:
            m = DIRECTIVE.match(directive)
            if m["verb"] == "skip":
                example.skip = m["rest"] or "no reason given"
            elif m["verb"] == "tested-by":
                example.tested_by = m["rest"]
            else:
                for pair in shlex.split(m["rest"]):
                    name, _, value = pair.partition("=")
                    example.env[name] = value
        found.append(example)
        previous_run = example
    return found


def matches(expected: str, actual: str) -> str | None:
    """None when `actual` prints each expected line in order ('...' matches anything), else what is missing."""
    def squash(s: str) -> str:
        return " ".join(s.split())

    got = [squash(line) for line in actual.splitlines()]
    position = 0
    for want in (squash(w) for w in expected.splitlines()):
        if not want or want == "...":
            continue
        pattern = re.compile(".*".join(map(re.escape, want.split("..."))))
        while position < len(got) and not pattern.search(got[position]):
            position += 1
        if position == len(got):
            return f"expected a line {want!r} (in order)"
        position += 1
    return None
