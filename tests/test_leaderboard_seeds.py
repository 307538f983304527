"""The leaderboard's difference from the reference with several seeds is `bench results`'s: on a comparison of
3 seeds per trained method (and one of 2 seeds, under the 3-seed rule), the main board's Δ column prints the same
interval bounds, to the printed digits, as `bench results --correction none`, and its stars are the Holm-corrected
verdicts of the same p-values (`stats.seed_item_ci` on every seed's per-item values), none on the 2-seed method."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("streamlit")

from bench.cli import main  # noqa: E402
from leaderboard import grouping, queries  # noqa: E402
from results_db import ItemValues, ResultsDB, ScoreRecord  # noqa: E402
from tests.test_leaderboard_fixtures import _spearman  # noqa: E402

ITEMS = 60
# (method, seeds, shift of the method's scores, seed-to-seed spread): laser3-self clearly better, simcse close to
# vanilla, esimcse with 2 seeds (its seed variance is not estimated)
METHODS = [("vanilla", 1, 0.0, 0.0), ("simcse", 3, 0.02, 0.05), ("laser3-self", 3, 0.35, 0.03), ("esimcse", 2, 0.2, 0.05)]


def fill_seeds(path: Path) -> Path:
    db = ResultsDB(path)
    rng = np.random.default_rng(3)
    gold = np.round(rng.uniform(0, 5, ITEMS), 2)
    ids = [f"p{i}" for i in range(ITEMS)]
    base = gold / 5 + rng.normal(0, 0.3, ITEMS)
    for method, seeds, shift, spread in METHODS:
        trains = method != "vanilla"
        for seed in range(seeds):
            run_id = db.create_run(
                kind="train" if trains else "eval", model=f"runs/{method}-{seed}" if trains else "minilm", method=method,
                backbone="minilm", suite="sts:stsb", train_corpus="wiki1m" if trains else "",
                budget_label="steps=5" if trains else "", seed=seed, config={"comparison": "seeds"}, status="running")  # fmt: skip
            # a method's seeds: a shared improvement on the items that depend on gold, a seed's own offset, item noise
            values = base * (1 - shift) + shift * gold / 5 + rng.normal(0, spread, 1) * gold / 5 + rng.normal(0, 0.05, ITEMS)
            items = ItemValues("spearman", ids, values.tolist(), gold.tolist())
            db.add_scores(run_id, [ScoreRecord("sts", "stsb", "spearman", _spearman(items.values, items.gold), ITEMS,
                                               "clean", items)])  # fmt: skip
            db.finish_run(run_id)
    db.engine.dispose()
    return path


@pytest.fixture(scope="module")
def seeds_db(tmp_path_factory) -> Path:
    return fill_seeds(tmp_path_factory.mktemp("seeds") / "results.sqlite")


def cli_rows(path: Path, capsys, reference: str) -> dict[str, tuple[str, str, float, str]]:  # noqa: ANN001
    """method -> (printed difference, printed interval, p, interval kind) of `bench results --correction none`."""
    assert main(["results", "--db", str(path), "--reference", reference, "--correction", "none"]) == 0
    text = capsys.readouterr().out
    out = {}
    for line in text[text.index("difference vs") :].splitlines()[2:]:
        m = re.match(r"\s*sts\s+stsb\s+spearman\s+clean\s+(\S+)\s+\d+\s+(\S+)\s+(\[\S+, \S+\])\s+(\S+)\s+(.*)$", line)
        if not m:
            break
        out[m.group(1)] = (m.group(2), m.group(3), float(m.group(4)), m.group(5).strip())
    return out


@pytest.mark.parametrize("reference", ["vanilla", "simcse"])
def test_delta_column_prints_bench_results_seed_intervals(seeds_db, capsys, reference):
    from bench.report import stats
    from leaderboard.views import main as main_view

    cli = cli_rows(seeds_db, capsys, reference)
    assert set(cli) == {m for m, *_ in METHODS} - {reference}
    assert "seeds+items (3 seeds)" in cli["laser3-self"][3] and "seed variance not estimated" in cli["esimcse"][3]
    state = queries.db_state(str(seeds_db))
    table = main_view.main_table(main_view.BoardQuery(state.location, state.version, "sts", "spearman", "clean",
                                                      grouping.RunFilters(), False, reference))  # fmt: skip
    delta = dict(zip(table.board.info["method"], table.delta))
    seeds = dict(zip(table.board.info["method"], table.board.count["stsb"]))
    assert seeds == {m: s for m, s, *_ in METHODS}  # every seed pooled in one row
    assert delta[reference] == "reference"
    others = [m for m in table.board.info["method"] if m != reference]
    seeds_of = {m: k for m, k, *_ in METHODS}
    judged = [stats.seed_variance_estimated((seeds_of[reference], seeds_of[m]), (reference != "vanilla", m != "vanilla"))
              for m in others]  # fmt: skip
    stars = stats.corrected_stars([cli[m][2] for m in others], "holm", judged=judged)
    for method, star in zip(others, stars):
        diff, interval, _, _ = cli[method]
        shown = re.fullmatch(r"([+-]\d+\.\d\d) (\[\S+, \S+\])(\*?)", delta[method])
        assert shown, delta[method]
        assert float(shown.group(1)) == float(diff.rstrip("*")) and shown.group(2) == interval, (method, cli[method])
        assert (shown.group(3) == "*") == bool(star), (method, cli[method])
    assert any(stars) and not all(stars)
    # esimcse rests on 2 seeds: whatever its p, no star, in bench results (even uncorrected) and on the board
    assert not cli["esimcse"][0].endswith("*") and not delta["esimcse"].endswith("*")
    if reference == "vanilla":
        assert cli["esimcse"][2] < 0.05  # uncorrected, the items alone would have starred it


def test_the_rank_calls_the_pairs_different_that_bench_results_p_values_and_the_seed_rule_do(seeds_db, capsys):
    """The rank's family is every pair of rows; each pair's p is `bench results`' for those two methods (over their
    seeds where a side has several), Holm-corrected over the 6 pairs and judged by the seed rule: esimcse (2 seeds)
    is never outranked nor outranks, whatever its p."""
    import itertools

    from bench.report import stats
    from leaderboard.views import main as main_view

    methods = [m for m, *_ in METHODS]
    p_of = {}
    for reference in methods:
        cli = cli_rows(seeds_db, capsys, reference)
        p_of.update({(reference, m): cli[m][2] for m in cli})
    seeds_of = {m: k for m, k, *_ in METHODS}
    pairs = list(itertools.combinations(methods, 2))
    judged = [stats.seed_variance_estimated((seeds_of[a], seeds_of[b]), (a != "vanilla", b != "vanilla")) for a, b in pairs]
    expected = stats.corrected_stars([p_of[pair] for pair in pairs], "holm", judged=judged)
    state = queries.db_state(str(seeds_db))
    table = main_view.main_table(main_view.BoardQuery(state.location, state.version, "sts", "spearman", "clean",
                                                      grouping.RunFilters(), False, "vanilla"))  # fmt: skip
    method_of = dict(zip(table.board.groups.tolist(), table.board.info["method"]))
    rank_says = {frozenset((method_of[h], method_of[g])) for h, g in table.better["stsb"]}
    for (a, b), star in zip(pairs, expected):
        assert (frozenset((a, b)) in rank_says) == bool(star), (a, b, p_of[(a, b)])
    assert any(expected) and not any(star for (a, b), star in zip(pairs, expected) if "esimcse" in (a, b))
    assert p_of[("vanilla", "esimcse")] < 0.05  # the items call it; the seed rule withholds it
