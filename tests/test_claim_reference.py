"""`bench results` on a claim's runs takes differences against the comparator the claim file names as its
reference (stored with the claim's verdict), not the default reference row (vanilla, else the first method)."""

from __future__ import annotations

import sqlite3

from bench.cli import main
from bench.report.verdicts import MISSING
from results_db import ResultsDB
from tests.test_report import _sts_run


def _claim_database(path, reference: str):  # noqa: ANN001
    """vanilla, simcse and laser3-self runs of claim `x` at scale cpu (sweep points, as bench claim records them),
    with a stored verdict whose rows name `reference` as the claim's reference row."""
    db = ResultsDB(path)
    ids = [_sts_run(db, method, noise) for method, noise in (("vanilla", 0.5), ("simcse", 1.0), ("laser3-self", 2.0))]
    with sqlite3.connect(path) as conn:
        for run_id, method in zip(ids, ("vanilla", "simcse", "laser3-self")):
            conn.execute("UPDATE runs SET sweep = 'claim-x-cpu', sweep_point = ? WHERE id = ?",
                         (f"variant={method} seed=0", run_id))  # fmt: skip
    others = [m for m in ("vanilla", "simcse") if m != reference]
    rows = [{"comparator": name, "role": role, "dataset": "stsb", "variant": "clean", "direction": "higher",
             "verdict": MISSING} for name, role in [(reference, "reference"), *((m, "control") for m in others)]]  # fmt: skip
    db.add_claim_verdict(claim="x", scale="cpu", statement="s", treatment="laser3-self", verdict="holds",
                         summary="claim x holds", rows=rows, run_ids=ids)  # fmt: skip
    db.engine.dispose()


def test_bench_results_on_a_claims_runs_compares_against_the_claims_reference(tmp_path, capsys):
    _claim_database(tmp_path / "r.sqlite", "simcse")
    assert main(["results", "--db", str(tmp_path / "r.sqlite")]) == 0
    out = capsys.readouterr().out
    assert "reference: simcse, the reference row of the claim" in out
    assert "difference vs simcse" in out and "difference vs vanilla" not in out
    assert main(["results", "--db", str(tmp_path / "r.sqlite"), "--reference", "vanilla"]) == 0  # asked: as asked
    assert "difference vs vanilla" in capsys.readouterr().out
