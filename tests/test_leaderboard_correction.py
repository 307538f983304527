"""The leaderboard's stars are corrected over the family each table shows (issue 27), with the function `bench
results` uses (`bench.report.stats.corrected_stars`): a difference that is real on its own (p about 0.02) but one
of several comparisons loses its star under Holm, on the rank's verdicts and on the Δ-vs-reference column."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bench.report import stats
from leaderboard import ranking, significance

N = 100


def items(values) -> dict:  # noqa: ANN001
    return {"aggregate": "mean", "item_ids": [f"q{i:03d}" for i in range(N)], "values": list(map(float, values)), "gold": None}


def _noise() -> np.ndarray:
    e = np.random.default_rng(0).normal(size=N)
    return (e - e.mean()) / e.std(ddof=1)  # mean 0, sd 1 exactly: the shifted row's p is about 0.02


BASE = np.random.default_rng(1).uniform(0, 10, N)
SHIFTED = BASE + 0.23 + _noise()  # mean difference 0.23, standard error 0.1: t = 2.3


def test_rank_verdicts_are_holm_corrected_over_every_pair_of_the_table():
    one = {0: items(BASE), 1: items(SHIFTED)}
    p = stats.paired_bootstrap(one[0], one[1]).p
    assert 0.0125 < p < 0.05  # significant alone, not after Holm over 4 comparisons
    alone = ranking.rank_groups({"d1": one})
    assert alone.better["d1"] == {(1, 0)}  # a family of one: Holm changes nothing
    # three more datasets where the two rows score the same: four comparisons in the table
    table = {"d1": one, **{f"d{k}": {0: items(BASE), 1: items(BASE)} for k in range(2, 5)}}
    assert ranking.rank_groups(table).better["d1"] == set()
    assert ranking.rank_groups(table, correction="none").better["d1"] == {(1, 0)}  # uncorrected stays available


def test_reference_column_is_holm_corrected_over_the_rows_of_the_table():
    rows = [0, 1, 2, 3, 4]
    values = {0: BASE, 1: SHIFTED, 2: BASE, 3: BASE, 4: BASE}
    by_score = {g: items(v) for g, v in values.items()}
    reps = {"stsb": {g: g for g in rows}}  # score id = group code
    long = pd.DataFrame([{"group": g, "seed": 0, "dataset": "stsb", "value": float(np.mean(v))} for g, v in values.items()])

    def texts(correction: str, shown: list[int]) -> dict[int, str]:
        evidence = significance.ItemEvidence(reps, by_score, lambda s: ("t", s))
        return significance.reference_differences(long, 0, shown, ["stsb"], evidence, set(shown), correction)

    assert texts("holm", [0, 1])[1].endswith("*")  # the only difference of its table
    holm = texts("holm", rows)
    assert not holm[1].endswith("*") and holm[0] == "reference"  # one of four: Holm takes the star away
    assert texts("none", rows)[1].endswith("*")
    # the same verdict `bench results` gives the same p-values
    p = [stats.paired_bootstrap(by_score[0], by_score[g]).p for g in rows[1:]]
    assert [t.endswith("*") for g, t in sorted(holm.items()) if g] == stats.corrected_stars(p, "holm").tolist()
