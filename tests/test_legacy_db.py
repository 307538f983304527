"""A database written by an earlier lenbench reads back with the same tables: the layout and attack changes keep
variant names, their order and every stored score as they were."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

LEGACY = Path(__file__).parent / "data" / "legacy"


def test_bench_results_prints_the_tables_it_printed_when_written(tmp_path):
    db = tmp_path / "legacy.sqlite"
    shutil.copy(LEGACY / "lenbench-0.1.sqlite", db)
    proc = subprocess.run([sys.executable, "-m", "bench", "results", "--db", str(db)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (LEGACY / "results-table.txt").read_text()
