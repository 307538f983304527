"""A row's interval and its p-value come from the same distribution (issue 37): "the 95% interval excludes 0" and
"p < 0.05" (uncorrected) never disagree, on simulated comparisons near the edge of significance, for the paired
bootstrap of one run against one (mean and Spearman scores) and for the seed-mean difference of `seed_item_ci`."""

from __future__ import annotations

import numpy as np
import pytest

from bench.report import stats


def _pair(rng, n, shift, aggregate):  # noqa: ANN001
    ids = [f"i{k:04d}" for k in range(n)]
    base = rng.normal(0, 1, n)
    if aggregate == "mean":
        a, b, gold = base, base + shift + rng.normal(0, 1, n), None
    else:
        gold = base
        a, b = base + rng.normal(0, 2, n), base + rng.normal(0, 2 - 2 * shift, n)
    item = lambda v: {"aggregate": aggregate, "item_ids": ids, "values": list(v),  # noqa: E731
                      "gold": None if gold is None else list(gold)}  # fmt: skip
    return item(a), item(b)


@pytest.mark.parametrize("aggregate", ["mean", "spearman"])
def test_paired_bootstrap_interval_excludes_zero_exactly_when_p_is_under_5_percent(aggregate):
    """600 simulated pairs, shifts drawn so that about half are significant and many sit near the boundary (small
    samples, skewed resampled differences): the verdicts of the interval and the p agree on every one."""
    rng = np.random.default_rng(11)
    significant, disagree = 0, []
    for trial in range(600):
        n = int(rng.integers(12, 40))
        shift = float(rng.uniform(0.0, 0.8))
        a, b = _pair(rng, n, shift, aggregate)
        ci = stats.paired_bootstrap(a, b, resamples=300, seed=trial)
        significant += ci.excludes_zero
        if ci.excludes_zero != (ci.p < 0.05):
            disagree.append((trial, ci.difference, ci.low, ci.high, ci.p))
    assert not disagree, disagree[:5]
    assert 100 < significant < 500, significant  # both verdicts occur: the check is not vacuous


def test_agreement_holds_at_other_levels_and_with_every_resample_on_one_side():
    rng = np.random.default_rng(5)
    for trial in range(300):
        a, b = _pair(rng, 25, float(rng.uniform(0, 1.5)), "mean")
        for level in (0.8, 0.9, 0.99):
            ci = stats.paired_bootstrap(a, b, resamples=400, level=level, seed=trial)
            assert ci.excludes_zero == (ci.p < 1 - level), (trial, level, ci)
    # every resample above 0: the p is sized by the t approximation, positive, and under 2 / (resamples - 1)
    ids = [f"q{k}" for k in range(30)]
    a = {"aggregate": "mean", "item_ids": ids, "values": [0.0] * 30, "gold": None}
    b = {**a, "values": list(5.0 + rng.normal(0, 1, 30))}
    ci = stats.paired_bootstrap(a, b, resamples=200)
    assert ci.low > 0 and 0 < ci.p < 2 / 199


def test_seed_item_interval_and_p_agree_with_and_without_seed_variance():
    """seeds+items (t interval and t p with the same Welch df) and items only (fewer than 3 seeds: percentile
    interval of the seed-mean differences, p from the same resamples)."""
    rng = np.random.default_rng(9)
    n, resamples = 30, 250
    counts = stats.resample_counts(n, resamples)
    methods = {"seeds+items": 0, "items": 0}
    for trial in range(400):
        k = int(rng.choice([2, 4]))
        item = rng.normal(0, 1, n)
        a = item + rng.normal(0, 0.3, k)[:, None] + rng.normal(0, 1, (k, n))
        b = item + rng.uniform(0, 1) + rng.normal(0, 0.3, k)[:, None] + rng.normal(0, 1, (k, n))
        ci = stats.seed_item_ci(a.mean(1), a @ counts.T / n, b.mean(1), b @ counts.T / n, n_items=n)
        methods[ci.method] += 1
        assert ci.excludes_zero == (ci.p < 0.05), (trial, ci)
    assert min(methods.values()) > 100
