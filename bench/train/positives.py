"""The small method contract: a function that gives each text of a batch its positive (`lenbench.contrastive`).

    fn(texts: list[str], config, rng: random.Random) -> list[str | None]    # one positive per text, None: skip it
    fn(text: str, config, rng) -> str | None                                 # per_text=True: called text by text

The anchor is the text itself; the pair methods' adapter (methods/positives.py) tokenises, pads, pools and trains
with in-batch InfoNCE. `PositivesContract.call` checks what the function returns and turns a broken promise (wrong
return type, wrong length, an exception) into one MethodContractError line naming the function's file and line and
what was expected; `bench method check` adds the checks that need several texts (every text skipped, every
positive empty or identical to its text).
"""

from __future__ import annotations

import random
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from bench.runtime.errors import MethodContractError

EXPECTED_BATCH = "a list with one positive per text (a str, or None to skip the text)"
EXPECTED_ONE = "a str (the text's positive), or None to skip the text"


@dataclass(frozen=True)
class PositivesContract:
    """A positives function and how it is called; `shown` is its file as the user gave it (bench.train.method_file
    sets it), else the file Python compiled it from."""

    fn: Callable[..., Any]
    per_text: bool = False
    shown: str = ""

    def located(self, shown: str) -> "PositivesContract":
        return replace(self, shown=shown)

    @property
    def label(self) -> str:
        return f"{getattr(self.fn, '__name__', 'positives')}()"

    @property
    def where(self) -> str:
        code = getattr(self.fn, "__code__", None)
        file = self.shown or (code.co_filename if code else "?")
        return f"{file}:{code.co_firstlineno if code else 1}"

    def fault(self, problem: str, line: int | None = None) -> MethodContractError:
        where = self.where if line is None else f"{self.where.rsplit(':', 1)[0]}:{line}"
        return MethodContractError(f"{where}: {self.label} {problem}")

    def call(self, texts: Sequence[str], config: Any, rng: random.Random) -> list[str | None]:
        """The positive of each text (None: skipped), checked: MethodContractError on anything else."""
        try:
            if self.per_text:
                out: Any = [self.fn(t, config, rng) for t in texts]
            else:
                out = self.fn(list(texts), config, rng)
        except MethodContractError:
            raise
        except Exception as exc:  # noqa: BLE001 - the author's code: one line at its own line
            raise self.fault(f"raised {_one_line(exc)}", self._line_of(exc)) from exc
        return self.checked(out, len(texts))

    def checked(self, out: Any, n: int) -> list[str | None]:
        if self.per_text:
            bad = next((p for p in out if p is not None and not isinstance(p, str)), None)
            if bad is not None:
                raise self.fault(f"returned {_kind(bad)} for a text; expected {EXPECTED_ONE}")
            return list(out)
        if isinstance(out, str):
            raise self.fault(f"returned one str for {n} texts; expected {EXPECTED_BATCH} (a function of one text "
                             "needs @contrastive(per_text=True))")  # fmt: skip
        if not isinstance(out, (list, tuple)):
            raise self.fault(f"returned {_kind(out)}; expected {EXPECTED_BATCH}")
        if len(out) != n:
            raise self.fault(f"returned {len(out)} positives for {n} texts; expected {EXPECTED_BATCH}")
        bad = next((p for p in out if p is not None and not isinstance(p, str)), None)
        if bad is not None:
            raise self.fault(f"returned a list holding {_kind(bad)}; expected {EXPECTED_BATCH}")
        return list(out)

    def check_sample(self, texts: Sequence[str], positives: Sequence[str | None]) -> None:
        """The promises only several texts show (`bench method check`): not every text skipped, not every positive
        empty, not every positive its text unchanged. MethodContractError, one line, on the first broken one."""
        given = [(t, p) for t, p in zip(texts, positives) if p is not None]
        if not given:
            raise self.fault(f"skipped all {len(texts)} texts it was given (None for each); expected a positive for "
                             "most texts")  # fmt: skip
        if all(not p.strip() for _, p in given):
            raise self.fault(f"returned an empty positive for every text; expected {EXPECTED_BATCH}, with words in it")
        if all(p.strip() == t.strip() for t, p in given):
            raise self.fault("returned every text unchanged as its positive; expected a positive that differs from "
                             "its text (a text against itself, with dropout, is the built-in simcse)")  # fmt: skip

    def _line_of(self, exc: BaseException) -> int | None:
        code = getattr(self.fn, "__code__", None)
        lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__)
                 if code is not None and f.filename == code.co_filename and f.lineno]  # fmt: skip
        return lines[-1] if lines else None


def _kind(value: Any) -> str:
    return "None" if value is None else type(value).__name__


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
