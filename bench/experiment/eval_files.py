"""Where a `bench eval` row keeps its files, and writing them: the row has no run folder of its own (a trained run
has `--out`), so its results.json goes beside the database, in one folder per row:

    <database folder>/evals/<database file stem>-<database id>/<run id>-<model label>/results.json

(a server database: ./evals/<database name>-<database id>/... instead). The database's own id (results_db.database_id)
keeps the rows of two databases in one folder, or of a database made again under an old one's name, apart: run 1 of
a.sqlite and run 1 of b.sqlite never share a folder. Rows recorded before (`evals/<run id>-<model label>/`) keep
their recorded folder and are read and rewritten there.

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
    """This database's folder of evaluation rows, absolute: <database folder>/evals/<file stem>-<id>; for a
    database that is not a file (a server) ./evals/<database name>-<id>."""
    location = db.location
    if location.path is not None:
        base, name = Path(location.path).resolve().parent, Path(location.path).stem
    else:
        from sqlalchemy.engine import make_url

        base, name = Path.cwd().resolve(), make_url(location.url).database or "database"
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-.")[:48] or "database"
    return base / EVALS / f"{slug}-{db.database_id()[:12]}"


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
