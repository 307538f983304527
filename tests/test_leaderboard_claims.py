"""The leaderboard's Claims view shows each stored claim verdict and its comparisons, controls marked by role; the
Robustness view shows the position suite's depth curve with its PSI per row (AppTest, no browser)."""

from __future__ import annotations

import numpy as np
import pytest

from bench.report.verdicts import verdicts
from results_db import ResultsDB
from results_db.records import ItemValues, ScoreRecord
from tests.test_claim_verdicts import CONTROLS, family
from tests.test_leaderboard_app import go, texts
from tests.test_leaderboard_every_kind import open_on
from tests.test_leaderboard_fixtures import fill_db

pytest.importorskip("streamlit.testing.v1")


def _store_claim(db: ResultsDB) -> list[dict]:
    role = {"vanilla": "reference", "simcse": "baseline", "delete-words": "control", "random-span": "control"}
    rows = [{**v.as_dict(), "role": role[v.comparator]}
            for v in verdicts(family(np.random.default_rng(1), CONTROLS, treatment=6.0))]  # fmt: skip
    db.add_claim_verdict(claim="laser3-length", scale="cpu", statement="laser3-self is length-robust", treatment="laser3-self",
                         verdict="holds", summary="claim laser3-length HOLDS at scale cpu", rows=rows, run_ids=[1, 2])  # fmt: skip
    return rows


def _position_run(db: ResultsDB, method: str, scores: list[float]) -> None:
    run = db.create_run(kind="eval", model=method, method=method, suite="position", status="running")
    ids = [f"q{i:03d}" for i in range(10)]
    db.add_scores(run, [ScoreRecord("position", "passkey", "ndcg_at_1", s, 10, f"depth-{d}",
                                    ItemValues("mean", ids, [s] * 10)) for d, s in zip((0, 25, 50, 75, 100), scores)])  # fmt: skip
    db.finish_run(run)


def test_claims_view_and_the_position_curves_psi(tmp_path, monkeypatch):
    path = fill_db(tmp_path / "r.sqlite")
    db = ResultsDB(path)
    rows = _store_claim(db)
    _position_run(db, "flat-model", [80.0] * 5)
    _position_run(db, "first-half-model", [100.0, 100.0, 60.0, 20.0, 0.0])
    db.engine.dispose()
    at = open_on(path, monkeypatch)
    go(at, "Claims")
    overview = at.dataframe[0].value
    assert overview[["claim", "scale", "verdict", "treatment"]].values.tolist() == [["laser3-length", "cpu", "holds", "laser3-self"]]
    assert overview["holds"].iloc[0] == f"{len(rows)} of {len(rows)}" and overview["controls"].iloc[0] == "delete-words, random-span"
    comparisons = at.dataframe[1].value
    assert len(comparisons) == len(rows) and set(comparisons["verdict"]) == {"holds"}
    assert comparisons.set_index("comparator")["role"].to_dict() == {"vanilla": "reference", "simcse": "baseline",
                                                                     "delete-words": "control", "random-span": "control"}
    assert "HOLDS at scale cpu" in texts(at)  # the stored line (shown literally: Markdown punctuation escaped)

    go(at, "Robustness")
    at.sidebar.selectbox(key="rob_suite").set_value("position").run()
    assert not at.exception, at.exception
    table = next(d.value for d in at.dataframe if "PSI" in d.value.columns)
    psi = table.set_index("label")["PSI"] if "label" in table else table.set_index(table.columns[0])["PSI"]
    assert sorted(np.round(psi.to_numpy(dtype=float), 6)) == [0.0, 100.0]  # flat: 0; 100 at the start, 0 at the end: 100
    assert any("Score vs depth of the fact" in h.value for h in at.subheader)
