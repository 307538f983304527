"""Claim verdicts on simulated scores with planted effects (pure statistics): a planted effect holds, a reversed one
is contradicted, a family of equal methods shows a `holds` in fewer than 5% of simulations, and a control that equals
the treatment leaves the claim inconclusive."""

from __future__ import annotations

import numpy as np
import pytest

from bench.report import stats
from bench.report.verdicts import Comparison, holm_levels, overall, threshold_of, verdicts

N_ITEMS = 120
COUNTS = stats.resample_counts(N_ITEMS, 1000)


def runs(rng, items: np.ndarray, effect: float, seeds: int, seed_sd: float = 0.5, noise_sd: float = 2.0):
    """Per-run item scores (a 'mean' aggregate): the items' own difficulty + the method's effect + a seed's shift +
    item noise; returns each run's score on all items (k,) and on the shared item resamples (k, R)."""
    values = items + effect + rng.normal(0, seed_sd, (seeds, 1)) + rng.normal(0, noise_sd, (seeds, len(items)))
    return values.mean(axis=1), values @ COUNTS.T / len(items)


def family(rng, effects: dict[str, float], treatment: float = 0.0, direction: str = "higher", min_effect: float = 0.0,
           datasets: int = 2, same_as_treatment: str | None = None, margin: float = 0.0) -> list[Comparison]:  # fmt: skip
    """The treatment (3 seeds) against an untrained reference (one run) and controls (3 seeds each), per dataset."""
    out = []
    for d in range(datasets):
        items = rng.normal(50, 10, N_ITEMS)
        t_full, t_boot = runs(rng, items, treatment, 3)
        for name, effect in effects.items():
            untrained = name == "vanilla"
            c_full, c_boot = (t_full, t_boot) if name == same_as_treatment else runs(
                rng, items, effect, 1 if untrained else 3, seed_sd=0.0 if untrained else 0.5)  # fmt: skip
            out.append(Comparison(name, f"d{d}", "elong-rand", direction, threshold_of(direction, min_effect, margin), c_full,
                                  c_boot, t_full, t_boot, comparator_seeds_vary=not untrained, n_items=N_ITEMS))  # fmt: skip
    return out


CONTROLS = {"vanilla": 0.0, "simcse": 0.0, "delete-words": 0.0, "random-span": 0.0}


def test_a_planted_effect_holds_and_the_claim_holds():
    rows = verdicts(family(np.random.default_rng(1), CONTROLS, treatment=6.0))
    assert [r.verdict for r in rows] == ["holds"] * 8
    assert all(5.0 < r.difference < 7.0 and r.low > 0 and r.seeds[1] == 3 for r in rows)
    assert {r.seeds[0] for r in rows} == {1, 3}  # the untrained reference is one run
    assert overall(rows, 8) == "holds"


def test_a_planted_reverse_effect_is_contradicted():
    rows = verdicts(family(np.random.default_rng(2), CONTROLS, treatment=-6.0))
    assert [r.verdict for r in rows] == ["contradicted"] * 8
    assert overall(rows, 8) == "does not hold"


def test_equal_methods_show_a_holds_in_fewer_than_5_percent_of_families():
    rng = np.random.default_rng(3)
    families = 200
    any_holds = sum(any(r.verdict == "holds" for r in verdicts(family(rng, CONTROLS))) for _ in range(families))
    assert any_holds / families < 0.05, any_holds


def test_a_control_equal_to_the_treatment_leaves_the_claim_inconclusive():
    rows = verdicts(family(np.random.default_rng(4), CONTROLS, treatment=6.0, same_as_treatment="random-span"))
    by = {(r.comparator, r.dataset): r for r in rows}
    assert by[("random-span", "d0")].verdict == "inconclusive" and by[("random-span", "d0")].difference == 0.0
    assert by[("simcse", "d0")].verdict == "holds"
    assert overall(rows, 8) == "does not hold"


def test_a_smallest_effect_above_the_planted_one_is_not_a_holds():
    """+6 planted, 9 required: the interval excludes 0 but not 9; the p-value is against 9."""
    rows = verdicts(family(np.random.default_rng(5), {"simcse": 0.0}, treatment=6.0, min_effect=9.0))
    assert all(r.verdict != "holds" and r.low > 0 and r.threshold == 9.0 for r in rows)


def test_non_inferiority_holds_within_the_margin_and_is_contradicted_beyond_it():
    """not-lower with margin 5: no difference holds (not worse by 5); 12 points worse is contradicted."""
    rng = np.random.default_rng(7)
    same = verdicts(family(rng, {"simcse": 0.0}, direction="not-lower", datasets=1, margin=5.0))
    assert same[0].threshold == -5.0 and same[0].verdict == "holds"
    worse = verdicts(family(rng, {"simcse": 0.0}, treatment=-12.0, direction="not-lower", datasets=1, margin=5.0))
    assert worse[0].verdict == "contradicted" and worse[0].high < -5.0


def test_holm_levels_step_down_and_stop_at_the_first_kept():
    """m = 4, alpha 0.05: sorted p 0.001, 0.01, 0.03, 0.04 against 0.0125, 0.0167, 0.025, 0.05: the first two are
    rejected, 0.03 is kept at rank 3 (level 1 - 0.05/2) and 0.04 after it gets the same level."""
    levels = holm_levels([0.04, 0.001, 0.03, 0.01], 0.05)
    assert levels.tolist() == pytest.approx([1 - 0.05 / 2, 1 - 0.05 / 4, 1 - 0.05 / 2, 1 - 0.05 / 3])
    stopped = holm_levels([0.9, 0.001, 0.03, 0.02], 0.05)  # 0.02 at rank 2 > 0.0167: kept, and so is everything after
    assert stopped.tolist() == pytest.approx([1 - 0.05 / 3, 1 - 0.05 / 4, 1 - 0.05 / 3, 1 - 0.05 / 3])
    # the interval at its Holm level clears 0 exactly when Holm's adjusted p is under alpha
    p = np.array([0.04, 0.001, 0.03, 0.01])
    assert ((stats.adjust_p(p, "holm") < 0.05) == (p < 1 - holm_levels(p, 0.05))).all()


def test_a_psi_claim_reads_each_runs_index_and_its_resamples_from_its_depth_scores():
    """Two runs' depth scores (50 queries, 5 depths) in a stand-in database: each run's PSI on all items is the index
    of its five means, and a planted position effect in one run makes the index higher than the flat run's."""
    import pandas as pd

    from bench.claim.position import psi_inputs
    from bench.evaluate.suites.position import position_sensitivity

    rng = np.random.default_rng(0)
    ids = [f"q{i:03d}" for i in range(50)]
    items, rows = {}, []
    for run, drop in ((1, 0.0), (2, 0.6)):  # run 2 finds fewer facts the deeper they sit
        for k, depth in enumerate((0, 25, 50, 75, 100)):
            found = rng.random(50) > drop * depth / 100
            score_id = run * 10 + k
            items[score_id] = {"aggregate": "mean", "item_ids": ids, "values": (100.0 * found).tolist(), "gold": None}
            rows.append({"id": score_id, "run_id": run, "dataset": "passkey", "metric": "ndcg_at_1",
                         "variant": f"depth-{depth}", "value": 100.0 * found.mean()})

    class DB:
        url = "memory://psi"

        def score_items(self, score_id):  # noqa: ANN001, ANN202
            from types import SimpleNamespace

            return SimpleNamespace(**items[score_id])

    scores = pd.DataFrame(rows)
    (c_full, c_boot), (t_full, t_boot), n = psi_inputs(DB(), scores, [1], [2], "passkey")
    assert n == 50 and c_boot.shape == (1, 1000)
    for full, run in ((c_full, 1), (t_full, 2)):
        means = scores[scores["run_id"] == run].sort_values("id")["value"].to_numpy()
        assert full[0] == pytest.approx(float(position_sensitivity(means)))
    assert t_full[0] > c_full[0] + 30
    assert psi_inputs(DB(), scores[scores["variant"] != "depth-50"].query("run_id == 1 or variant != 'depth-0'"),
                      [1], [2], "passkey") is None  # a run short of a depth: no comparison
