"""Progress output for every command: bars on a terminal, a few plain lines in a log, nothing with --no-progress.

A tqdm bar redraws itself; written to a file or a pipe every redraw becomes a line (a `bench run` log held
thousands of them). So the mode is chosen once per process (`configure`, called by the CLI):

* ``bar``: stderr is a terminal: tqdm bars, as before.
* ``lines``: stderr is not a terminal: a stage prints one line when it has run for a while and then at most
  every `LINE_SECONDS` (with its share done and an ETA), and one line when it ends, so a log holds a line or
  two per stage.
* ``off``: `--no-progress` (or ``LENBENCH_PROGRESS=off``): no bars and no informative lines; results and
  errors only.

``LENBENCH_PROGRESS=bar|lines|off`` overrides the choice (it is inherited by the processes a command starts).
Informative messages that are not results ("exporting to ONNX once", "data  stsb: ...") go through `say`, so
`--no-progress` silences them too. transformers' own bars (loading weights, writing shards) are switched off:
for the models lenbench loads they last well under a second and only add lines to logs.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from bench.runtime.heartbeat import progressed

MODES = ("bar", "lines", "off")
ENV = "LENBENCH_PROGRESS"
LINE_SECONDS = 30.0  # a running stage reports at most this often in a log
FIRST_LINE_SECONDS = 10.0  # a stage shorter than this prints only its closing line

_mode: str | None = None
_saved_env: list[tuple[str | None, str | None]] = []  # $LENBENCH_PROGRESS and $HF_HUB_DISABLE_PROGRESS_BARS before
# each configure (restore undoes one)
HUB_ENV = "HF_HUB_DISABLE_PROGRESS_BARS"  # read by huggingface_hub, and by transformers when it is imported


def configure(quiet: bool = False) -> str:
    """Pick the mode for this process (and, through the environment, the processes it starts); returns it.
    `restore()` undoes it (the CLI calls both, so one in-process command does not set the next one's mode)."""
    global _mode
    _saved_env.append((os.environ.get(ENV), os.environ.get(HUB_ENV)))
    _mode = "off" if quiet else _auto()
    os.environ[ENV] = _mode
    if _mode != "bar":
        # Every Hugging Face bar (transformers' "Writing model shards", hub downloads), also in code lenbench does
        # not call itself (a plug-in's save_pretrained) and in the processes this one starts.
        os.environ[HUB_ENV] = "1"
        if "huggingface_hub" in sys.modules:
            from huggingface_hub.utils import disable_progress_bars

            disable_progress_bars()
    if "transformers" in sys.modules:
        quiet_transformers()
    return _mode


def restore() -> None:
    global _mode
    _mode = None
    if _saved_env:
        for name, before in zip((ENV, HUB_ENV), _saved_env.pop()):
            if before is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = before


def _auto() -> str:
    from bench import environment

    return environment.choice(ENV) or ("bar" if _isatty(sys.stderr) else "lines")


def mode() -> str:
    return _mode if _mode is not None else _auto()


def enabled() -> bool:
    return mode() != "off"


def say(message: str) -> None:
    """An informative line (not a result): above any bar on a terminal, to stderr; nothing when progress is off."""
    if mode() == "off":
        return
    if mode() == "bar":
        from tqdm.auto import tqdm

        tqdm.write(message, file=sys.stderr)
    else:
        print(message, file=sys.stderr, flush=True)


def bar(total: int | None = None, desc: str = "", unit: str = "it", disable: bool = False, initial: int = 0,
        **tqdm_kwargs: Any) -> Any:  # fmt: skip
    """A progress bar (tqdm's interface: update, set_postfix, close, context manager) in the current mode."""
    m = mode()
    if disable or m == "off":
        return LineProgress(total, desc, unit, initial, silent=True)
    if m == "lines":
        return LineProgress(total, desc, unit, initial)
    from tqdm.auto import tqdm

    shown = tqdm(total=total, desc=desc, unit=unit, initial=initial, **tqdm_kwargs)
    update = shown.update

    def update_and_record(n: float = 1) -> Any:
        progressed()
        return update(n)

    shown.update = update_and_record  # every bar's movement is the run's progress (bench.runtime.heartbeat)
    return shown


class LineProgress:
    """tqdm's small interface, written as a few plain lines (see the module docstring)."""

    def __init__(self, total: int | None, desc: str, unit: str, initial: int = 0, silent: bool = False,
                 clock: Any = time.monotonic, stream: Any = None):  # fmt: skip
        self.total = total
        self.desc = desc or "progress"
        self.unit = unit
        self.n = initial
        self._initial = initial
        self._silent = silent
        self._clock = clock
        self._stream = stream
        self._start = clock()
        self._last: float | None = None  # time of the last line written
        self._postfix = ""
        self._closed = False

    def update(self, n: int = 1) -> None:
        self.n += n
        progressed()
        if self._silent:
            return
        now = self._clock()
        since = now - (self._last if self._last is not None else self._start)
        if since >= (LINE_SECONDS if self._last is not None else FIRST_LINE_SECONDS) and not self._finished():
            self._write(self._line(now, final=False))
            self._last = now

    def set_postfix(self, ordered_dict: Any = None, refresh: bool = True, **kwargs: Any) -> None:
        items = dict(ordered_dict or {}, **kwargs)
        self._postfix = ", ".join(f"{k}={v}" for k, v in items.items())

    def set_description(self, desc: str | None = None, refresh: bool = True) -> None:
        self.desc = desc or self.desc

    def refresh(self) -> None:
        pass

    def write(self, message: str) -> None:
        if not self._silent:
            self._write(message)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if not self._silent and self.n > self._initial:
            self._write(self._line(self._clock(), final=True))

    def __enter__(self) -> "LineProgress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _finished(self) -> bool:
        return self.total is not None and self.n >= self.total

    def _line(self, now: float, final: bool) -> str:
        elapsed = now - self._start
        done = self.n - self._initial
        rate = done / elapsed if elapsed > 0 else 0.0
        count = f"{self.n:,}/{self.total:,}" if self.total else f"{self.n:,}"
        unit = self.unit if self.unit.endswith("s") else self.unit + "s"
        parts = [f"{self.desc}: {count} {unit}"]
        if self.total and not final:
            parts[0] += f" ({100 * self.n / self.total:.0f}%)"
        parts.append(f"{duration(elapsed)}")
        if rate > 0:
            parts.append(f"{rate:,.1f} {unit}/s")
        if not final and self.total and rate > 0:
            parts.append(f"ETA {duration((self.total - self.n) / rate)}")
        if self._postfix:
            parts.append(self._postfix)
        return ", ".join(parts) + (" (done)" if final and self._finished() else "")

    def _write(self, line: str) -> None:
        print(line, file=self._stream or sys.stderr, flush=True)


def duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, sec = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes} min {sec:02d} s"
    hours, minutes = divmod(int(round(seconds / 60)), 60)  # to the nearest minute: 303 h 37 min 47 s is 303 h 38 min
    return f"{hours} h {minutes:02d} min"


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def quiet_transformers() -> None:
    """transformers' sub-second bars (loading weights, writing shards) off. Called where lenbench loads or saves a
    model (transformers is imported there anyway), so a command that loads none does not import it for this."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    _drop_pooler_reports()


class _PoolerOnlyReport:
    """A logging filter: drops transformers' LOAD REPORT when every key it lists is a `pooler.*` weight reported
    MISSING. lenbench pools the last hidden states itself (mean or CLS) and never runs BERT's pooler, and the
    backbones it builds (random-bert-*) and the encoders it saves have none, so that report is noise; any other
    report (a missing or unexpected encoder weight) still shows."""

    def filter(self, record: Any) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a record that cannot be formatted is not ours to judge
            return True
        if "LOAD REPORT" not in message:
            return True
        rows = []
        for line in message.splitlines()[1:]:
            cells = [c.strip() for c in line.split("|")]
            if len(cells) >= 2 and cells[0] and cells[0] != "Key" and not set(cells[0]) <= set("-+"):
                rows.append((cells[0], cells[1]))
        pooler_only = bool(rows) and all(key.startswith("pooler.") and status == "MISSING" for key, status in rows)
        return not pooler_only


def _drop_pooler_reports() -> None:
    import logging

    target = logging.getLogger("transformers.modeling_utils")
    if not any(isinstance(f, _PoolerOnlyReport) for f in target.filters):
        target.addFilter(_PoolerOnlyReport())
