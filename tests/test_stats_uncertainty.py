"""Uncertainty that means something (issue 27): the seed-and-item interval covers the true difference about 95% of
the time on simulated data, Holm-corrected stars keep the family's false positives at 5% when every method is
equal, and the aggregates over datasets (mean, IQM, probability of improvement) are rliable's."""

from __future__ import annotations

import numpy as np
import pytest

from bench.report import stats


def simulate(rng, n, seeds, delta, sd_seed, sd_item=1.0, sd_interaction=0.5, sd_noise=0.5):
    """Per-item scores of two methods on the same n items: a shared item difficulty, a method-by-item interaction
    (so the difference itself depends on which items were drawn), a training-seed effect and per-run noise. The
    true difference of the methods' expected scores is delta."""
    item = rng.normal(0, sd_item, n)
    out = []
    for m, k in enumerate(seeds):
        values = (m * delta + item + rng.normal(0, sd_interaction, n) + rng.normal(0, sd_seed, k)[:, None]
                  + rng.normal(0, sd_noise, (k, n)))  # fmt: skip
        out.append(values)
    return out


@pytest.mark.parametrize("sd_seed", [0.05, 0.3, 1.0])
def test_seed_and_item_interval_covers_the_true_difference_95_percent_of_the_time(sd_seed):
    """1,000 simulated comparisons of 5 against 5 seeds on 100 items, from item-dominated to seed-dominated noise:
    the interval contains the true difference in 93-97% of them (binomial SE 0.7%). The interval over the items
    alone, which ignores the seeds, covers far less once seeds vary."""
    rng = np.random.default_rng(7)
    n, resamples, delta = 100, 200, 0.2
    counts = stats.resample_counts(n, resamples)
    covered, items_only = 0, 0
    for _ in range(1000):
        a, b = simulate(rng, n, (5, 5), delta, sd_seed)
        ci = stats.seed_item_ci(a.mean(1), a @ counts.T / n, b.mean(1), b @ counts.T / n)
        assert ci.method == "seeds+items"
        covered += ci.low <= delta <= ci.high
        boot = (b @ counts.T / n).mean(0) - (a @ counts.T / n).mean(0)
        low, high = np.quantile(boot, [0.025, 0.975])
        items_only += low <= delta <= high
    assert 0.93 <= covered / 1000 <= 0.97, covered
    if sd_seed >= 1.0:
        assert items_only / 1000 < 0.6


def test_fewer_than_three_seeds_say_seed_variance_is_not_estimated():
    """Two seeds: no t(1) interval (t = 12.7); the item interval of the seed means, and a note that says the seed
    variance is not estimated."""
    rng = np.random.default_rng(0)
    a, b = simulate(rng, 50, (2, 2), 0.5, 0.3)
    counts = stats.resample_counts(50, 300)
    ci = stats.seed_item_ci(a.mean(1), a @ counts.T / 50, b.mean(1), b @ counts.T / 50)
    assert ci.method == "items" and "seed variance not estimated (2 seeds" in ci.note
    assert ci.difference == pytest.approx(b.mean() - a.mean())
    # an untrained reference (one model, no seed variance) against 3 seeds: seeds and items
    ref = a[:1]
    ci = stats.seed_item_ci(ref.mean(1), ref @ counts.T / 50, np.r_[b, b[:1] + 0.1].mean(1),
                            np.r_[b, b[:1] + 0.1] @ counts.T / 50, seeds_vary=(False, True))  # fmt: skip
    assert ci.method == "seeds+items" and ci.note == ""


def test_holm_stars_keep_the_family_false_positive_rate_at_5_percent_when_all_methods_are_equal():
    """1,000 simulated tables of 4 methods against a reference on 20 (dataset, variant) cells, every method equal
    (80 comparisons per table, paired item bootstrap): without correction nearly every table shows a star; with
    Holm at most 5% of the tables show any (family-wise; simulation SE 0.7%), and at most 5% of comparisons."""
    rng = np.random.default_rng(3)
    n, resamples, methods, cells = 60, 200, 4, 20
    counts = stats.resample_counts(n, resamples)
    any_raw = any_holm = starred = 0
    for _ in range(1000):
        item = rng.normal(0, 1, (cells, 1, n))
        values = item + rng.normal(0, 0.5, (cells, methods + 1, n))  # reference = method 0
        full = values.mean(-1)
        boot = values @ counts.T / n  # (cells, methods + 1, R)
        diff = full[:, 1:] - full[:, :1]
        resampled_diffs = (boot[:, 1:] - boot[:, :1]).reshape(-1, resamples)
        p = np.array([stats.bootstrap_p(d, r, n) for d, r in zip(diff.ravel(), resampled_diffs)])
        holm = stats.adjust_p(p, "holm") < 0.05
        any_raw += bool((p < 0.05).any())
        any_holm += bool(holm.any())
        starred += int(holm.sum())
    assert any_raw / 1000 > 0.9
    assert any_holm / 1000 <= 0.05 + 0.01, any_holm  # 0.05 plus about 1.5 simulation SE
    assert starred / (1000 * methods * cells) <= 0.05


def test_adjusted_p_values_hand_computed():
    p = [0.01, 0.04, 0.03, 0.005]
    # Holm: sorted .005 .01 .03 .04 times 4 3 2 1 = .02 .03 .06 .04, running max .02 .03 .06 .06
    assert stats.adjust_p(p, "holm") == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # BH: sorted times 4/1 4/2 4/3 4/4 = .02 .02 .04 .04, running min from the top
    assert stats.adjust_p(p, "bh") == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert np.isnan(stats.adjust_p([0.01, np.nan], "holm")[1]) and stats.adjust_p([0.01, np.nan])[0] == 0.01
    assert stats.adjust_p(p, "none") == pytest.approx(p)


def test_aggregates_and_probability_of_improvement_agree_with_rliable():
    metrics = pytest.importorskip("rliable.metrics")
    rng = np.random.default_rng(5)
    x = rng.normal(50, 3, (5, 6))  # runs x datasets
    y = rng.normal(49, 3, (4, 6))
    y[:, 2] = np.round(y[:, 2])  # ties
    x[:, 2] = np.round(x[:, 2])
    y[:, 3] = x[:4, 3]
    cols = lambda m: [m[:, d] for d in range(m.shape[1])]  # noqa: E731
    assert stats.probability_of_improvement(cols(x), cols(y)) == pytest.approx(metrics.probability_of_improvement(x, y))
    same = rng.normal(0, 1, (3, 2))
    assert stats.probability_of_improvement(cols(same), cols(same)) == 0.5 == metrics.probability_of_improvement(same, same)
    agg = stats.aggregate_over_datasets(cols(x), [c[:, None] for c in cols(x)], resamples=200)
    assert agg["mean"].value == pytest.approx(metrics.aggregate_mean(x))
    assert agg["IQM"].value == pytest.approx(metrics.aggregate_iqm(x))


def test_stratified_bootstrap_interval_matches_a_direct_one():
    """Without item noise (every item resample scores as the full set), the interval is the stratified bootstrap
    of seeds within each dataset (rliable's StratifiedBootstrap): compared with a direct loop of it."""
    rng = np.random.default_rng(11)
    x = rng.normal(50, 2, (5, 4))
    cols = [x[:, d] for d in range(4)]
    agg = stats.aggregate_over_datasets(cols, [np.repeat(c[:, None], 5, 1) for c in cols], resamples=4000)
    direct = np.array([np.mean([rng.choice(c, len(c)).mean() for c in cols]) for _ in range(4000)])
    low, high = np.quantile(direct, [0.025, 0.975])
    width = high - low
    assert agg["mean"].low == pytest.approx(low, abs=0.1 * width) and agg["mean"].high == pytest.approx(high, abs=0.1 * width)
    # item noise widens it
    noisy = [c[:, None] + rng.normal(0, 1.0, (5, 200)) for c in cols]
    wider = stats.aggregate_over_datasets(cols, noisy, resamples=2000)["mean"]
    assert wider.high - wider.low > 1.08 * width  # seed variance 0.16 + item noise 0.05: about 1.15x
