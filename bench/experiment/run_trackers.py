"""The --report-to trackers of one run of a comparison, opened and closed with it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.experiment.run_spec import RunSpec


def open_trackers(spec: RunSpec, run_id: int, method: str, seed: int, multi_seed: bool, config: dict, out_dir: Path) -> Any:
    """The --report-to trackers of one run (None without any): one tracker run named like the run's folder."""
    from bench.runtime.trackers import Trackers, parse_report_to

    names = parse_report_to(spec.report_to)
    if not names:
        return None
    label = f"{method}-seed{seed}" if multi_seed else method
    return Trackers(names, Path(out_dir), f"{label} (run {run_id})", {**config, "run_id": run_id})


class close_trackers:  # noqa: N801 - a context manager used like a function
    """Finish the trackers when the run ends, however it ends (their files are complete either way)."""

    def __init__(self, trackers: Any):
        self.trackers = trackers

    def __enter__(self) -> Any:
        return self.trackers

    def __exit__(self, *exc: Any) -> None:
        if self.trackers is not None:
            self.trackers.finish()
