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


def test_no_verdict_rests_on_fewer_than_3_seeds_of_a_trained_row():
    """The rule of every star (bench results, Δ, rank, Compare): a trained side needs 3 seeds; an untrained model
    scored once has no seed variance to estimate."""
    assert stats.seed_variance_estimated((1, 1), (False, False))  # two untrained models: the items decide
    assert not stats.seed_variance_estimated((1, 1), (False, True))  # one seed of a trained method
    assert not stats.seed_variance_estimated((1, 2), (False, True))
    assert stats.seed_variance_estimated((1, 3), (False, True)) and stats.seed_variance_estimated((3, 5), (True, True))
    assert not stats.seed_variance_estimated((3, 2), (True, True))
    # the star goes, the family stays: the unjudged p still counts in Holm's family
    p = [0.001, 0.02]
    assert stats.corrected_stars(p, "holm").tolist() == [True, True]
    assert stats.corrected_stars(p, "holm", judged=[False, True]).tolist() == [False, True]
    assert stats.corrected_stars([0.02], "holm").tolist() == [True]
    # the rank: a separation the items show is not called different when a row is one trained seed
    clear = {0: items(BASE), 1: items(BASE + 1.0 + _noise())}
    assert ranking.rank_groups({"d1": clear}).better["d1"] == {(1, 0)}
    one_seed = ranking.SeedEvidence(items={"d1": {0: [clear[0]], 1: [clear[1]]}}, keys={"d1": {0: ["a"], 1: ["b"]}},
                                    trained={1})  # fmt: skip
    assert ranking.rank_groups({"d1": clear}, seeds=one_seed).better["d1"] == set()
    untrained = ranking.SeedEvidence(items=one_seed.items, keys=one_seed.keys)  # two models scored once
    assert ranking.rank_groups({"d1": clear}, seeds=untrained).better["d1"] == {(1, 0)}


def test_the_rank_judges_rows_of_several_seeds_over_their_seeds_as_bench_results_does():
    """Three seeds a row: the rank's verdict is `stats.seed_item_ci`'s, the seed-to-seed spread included. Seeds that
    disagree widely make a gain the items alone call real (on one seed) inconclusive, and seeds that agree keep it."""
    rng = np.random.default_rng(5)
    gain = BASE + 0.6 + 0.5 * _noise()

    def seeds_of(offsets):  # noqa: ANN001, ANN202
        return [items(gain + o + 0.1 * rng.normal(size=N)) for o in offsets]

    for offsets, real in (([-0.02, 0.0, 0.02], True), ([-3.0, 0.0, 3.0], False)):
        mine = seeds_of(offsets)
        evidence = ranking.SeedEvidence(items={"d1": {0: [items(BASE)], 1: mine}},
                                        keys={"d1": {0: ["base"], 1: [f"s{i}{offsets[0]}" for i in range(3)]}},
                                        trained={1})  # fmt: skip
        ranks = ranking.rank_groups({"d1": {0: items(BASE), 1: mine[-1]}}, seeds=evidence)
        ci = ranking.seed_ci([items(BASE)], mine, ["base"], [f"s{i}{offsets[0]}" for i in range(3)], (False, True))
        assert ci.method == "seeds+items" and (ranks.better["d1"] == {(1, 0)}) == real == (ci.p < 0.05), (offsets, ci)
        # the representative alone (the last seed) would be called better either way
        assert stats.paired_bootstrap(items(BASE), mine[-1]).p < 0.05


def test_a_row_of_several_seeds_against_one_without_per_item_values_gets_no_verdict_from_one_run_each():
    """The rank judges a row of several seeds over its seeds; where the other row's seeds lack per-item values there
    is no such interval, and no verdict: not one representative run against the other (the Δ column's rule too)."""
    clear = {0: items(BASE), 1: items(BASE + 1.0 + _noise())}
    assert ranking.rank_groups({"d1": clear}).better["d1"] == {(1, 0)}  # the two runs alone would be told apart
    three = [clear[1], items(BASE + 1.0 + _noise()), items(BASE + 1.0 + _noise())]
    evidence = ranking.SeedEvidence(items={"d1": {1: three}}, keys={"d1": {1: ["s0", "s1", "s2"]}}, trained={0, 1})
    assert ranking.pairwise_cis(clear, seeds=evidence, dataset="d1") == {}
    assert ranking.rank_groups({"d1": clear}, seeds=evidence).better["d1"] == set()
