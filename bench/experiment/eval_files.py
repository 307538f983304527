"""Where a `bench eval` row keeps its files, and writing them: the row has no run folder of its own (a trained run
has `--out`), so its results.json goes beside the database, in one folder per row:

    <database folder>/evals/<run id>-<model label>/results.json     (a server database: ./evals/... instead)

The folder is recorded as the row's `output_dir`, as a trained run's folder is. The file is written through
`Recording(artifacts=...)` (bench.experiment.record), so an evaluation row is finished only once its results.json
is on disk; a reused row whose file is missing or damaged gets it written again (bench.experiment.artifacts).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

EVALS = "evals"  # the folder of evaluation rows beside the database


def evals_root(db: Any) -> Path:
    """<database folder>/evals, absolute; ./evals for a database that is not a file (a server)."""
    path = getattr(getattr(db, "location", None), "path", None)
    return (Path(path).resolve().parent if path is not None else Path.cwd().resolve()) / EVALS


def row_folder_name(run_id: int, label: str) -> str:
    """`<run id>-<label as a slug>`: one plain path component (a model folder's label has '/' in it)."""
    slug = re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")[:48].strip("-")
    return f"{run_id}-{slug}" if slug else str(run_id)


def eval_folder(db: Any, run_id: int, label: str) -> Path:
    """The row's folder: its recorded `output_dir`, else a new one under `evals_root`, recorded now (it is made when
    results.json is written into it: bench.runtime.writes, where a refused write is one line)."""
    from bench.runtime.paths import child_folder

    recorded = str(db.get_run(run_id).get("output_dir") or "")
    if recorded:
        return Path(recorded)
    folder = child_folder(evals_root(db), row_folder_name(run_id, label))
    db.update_run(run_id, output_dir=str(folder))
    return folder


def write_eval_results(db: Any, run_id: int, label: str, at: Any) -> Path:
    """The row's results.json, as it will read once the row is finished at `at` (Recording's `artifacts`)."""
    from bench.report.results_file import write_results

    # the path is printed by the command after its table (`bench eval`'s last line), not here, so that with
    # --no-progress the output still opens with the data and run lines
    return write_results(db, run_id, eval_folder(db, run_id, label), finished_at=at)


def check_reused(db: Any, run_id: int, label: str, say: Callable[..., None]) -> None:
    """A finished evaluation row about to be reused: its results.json written again when missing or damaged (a row
    finished before evaluation rows had files gets its folder now)."""
    from bench.experiment.artifacts import reusable

    eval_folder(db, run_id, label)
    reusable(db, db.get_run(run_id), f"[{label}]", say)
