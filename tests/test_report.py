"""What the CLI tables tell a reviewer (bench.report.tables): n per dataset, subsets flagged, each method against the
reference with a paired-bootstrap or over-seeds 95% interval, what each attack changed; plus `--limit` validation,
the attack-effect measure and the training-loss warning."""

from __future__ import annotations

import re
import zlib

import numpy as np
import pandas as pd
import pytest

from bench.evaluate.attacks import AttackMeter, attack_effect, attack_texts
from bench.cli import main
from bench.report.tables import comparison_report, differences_table, load_scores, loss_warning
from bench.report.stats import mean_ci, paired_bootstrap
from results_db import ItemValues, ResultsDB, ScoreRecord
from tests.conftest import write_sts

RNG = np.random.default_rng(0)
GOLD = RNG.uniform(0, 5, 40).round(2).tolist()
IDS = [str(i) for i in range(40)]


def _sts_run(db, method, noise, seed=0, changed=1.0, limit=None):
    """A run with clean and elong-2 STS scores whose per-pair cosines are gold + noise."""
    run = db.create_run(model=method, method=method, seed=seed, config={"comparison": "c1"})
    recs = []
    for variant, extra in (("clean", 0.0), ("elong-2", 0.5)):
        rng = np.random.default_rng(zlib.crc32(f"{method}|{seed}|{variant}".encode()))  # stable across processes
        cos = (np.asarray(GOLD) + rng.normal(0, noise + extra, len(GOLD))).tolist()
        from scipy.stats import spearmanr

        info = {"truncated_frac": 0.25} if variant == "clean" else {"changed_frac": changed, "truncated_frac": 0.25}
        if limit:
            info["limit"] = limit
        recs.append(ScoreRecord("sts", "stsb", "spearman", 100 * spearmanr(cos, GOLD).statistic, n=len(GOLD),
                                variant=variant, items=ItemValues("spearman", IDS, cos, GOLD), info=info))  # fmt: skip
    db.add_scores(run, recs)
    db.finish_run(run)
    return run


def test_differences_are_paired_bootstrap_cis_on_the_stored_items(tmp_path):
    db = ResultsDB(tmp_path / "r.sqlite")
    ref, new = _sts_run(db, "vanilla", 0.5), _sts_run(db, "simcse", 3.0)
    runs = {"vanilla": [ref], "simcse": [new]}
    scores = load_scores(db, runs)
    diffs = differences_table(db, scores, "vanilla", list(runs)).set_index("variant")
    clean = scores[(scores["variant"] == "clean")].set_index("method")["id"]
    expected = paired_bootstrap(_items(db, clean["vanilla"]), _items(db, clean["simcse"]))
    # the star sits on the difference (its CI excludes 0), not on the method's name
    assert diffs.loc["clean", "diff"] == f"{expected.difference:.2f}*"
    assert diffs.loc["clean", "ci"] == f"[{expected.low:.2f}, {expected.high:.2f}]"
    assert expected.high < 0 and diffs.loc["clean", "interval"] == "bootstrap"  # much noisier: a real drop
    assert diffs.loc["clean", "n"] == 40

    text = comparison_report(db, runs)
    table = text.splitlines()
    assert table[1].split() == ["suite", "dataset", "metric", "n", "method", "clean", "elong-2", "attacked(mean)", "change(mean)"]
    assert table[2].split()[3] == "40"
    assert "difference vs vanilla" in text and any(line.split()[3:6] == ["elong-2", "simcse", "40"] for line in table if line.startswith("  sts"))
    # --reference: the other way round, the same interval mirrored
    mirrored = differences_table(db, scores, "simcse", list(runs)).set_index("variant")
    assert float(mirrored.loc["clean", "diff"].rstrip("*")) == pytest.approx(-float(diffs.loc["clean", "diff"].rstrip("*")), abs=0.011)
    with pytest.raises(KeyError, match="--reference 'esimcse' is not one of the compared methods"):
        comparison_report(db, runs, reference="esimcse")


def _items(db, score_id):
    items = db.score_items(int(score_id))
    return {"aggregate": items.aggregate, "item_ids": items.item_ids, "values": items.values, "gold": items.gold}


def test_several_seeds_give_mean_and_a_seed_and_item_interval(tmp_path):
    """3 seeds against the untrained reference: the difference of the means, its interval from the seeds' variance
    plus the paired item bootstrap (every run on the same item resamples), computed here from the stored items."""
    from bench.report import stats

    db = ResultsDB(tmp_path / "r.sqlite")
    ref = _sts_run(db, "vanilla", 1.0)
    seeds = [_sts_run(db, "simcse", 1.5, seed=s) for s in (0, 1, 2)]
    for run in seeds:
        db.update_run(run, kind="train")
    runs = {"vanilla": [ref], "simcse": seeds}
    scores = load_scores(db, runs)
    per_seed = scores[(scores["method"] == "simcse") & (scores["variant"] == "clean")].sort_values("run_id")
    ref_clean = scores[(scores["method"] == "vanilla") & (scores["variant"] == "clean")]
    items = [_items(db, i) for i in [*ref_clean["id"], *per_seed["id"]]]
    common = stats.common_items(*items)
    resampled = [stats.resampled(item, common) for item in items]
    full, boot = np.array([r[0] for r in resampled]), np.array([r[1] for r in resampled])
    expected = stats.seed_item_ci(full[:1], boot[:1], full[1:], boot[1:], seeds_vary=(False, True), n_items=len(common))
    assert expected.method == "seeds+items"
    scores["run_seed"] = scores["run_id"].map(db.runs().set_index("id")["seed"])
    scores["run_kind"] = scores["run_id"].map(db.runs().set_index("id")["kind"])
    diffs = differences_table(db, scores, "vanilla", list(runs)).set_index("variant")
    assert diffs.loc["clean", "diff"].rstrip("*") == f"{per_seed['value'].mean() - ref_clean['value'].iloc[0]:.2f}"
    assert diffs.loc["clean", "interval"] == "seeds+items (3 seeds)"
    assert diffs.loc["clean", "ci"] == f"[{expected.low:.2f}, {expected.high:.2f}]"
    # the star is Holm's over the table's 2 differences
    holm = stats.adjust_p([expected.p, float(diffs.loc["elong-2", "p"])], "holm")[0]
    assert diffs.loc["clean", "diff"].endswith("*") == (holm < 0.05)
    per_seed = per_seed["value"]
    text = comparison_report(db, runs)
    ci = mean_ci(per_seed)
    row = next(line for line in text.splitlines() if " simcse " in line and "±" in line)
    assert f"{ci.mean:.2f}±{(ci.high - ci.low) / 2:.2f}" in row and row.split()[5] == "3"  # seeds column


def test_subsets_are_flagged_and_weak_attacks_warned(tmp_path):
    db = ResultsDB(tmp_path / "r.sqlite")
    ref, new = _sts_run(db, "vanilla", 1.0, changed=0.3, limit=40), _sts_run(db, "simcse", 2.0, changed=0.3, limit=40)
    text = comparison_report(db, {"vanilla": [ref], "simcse": [new]})
    # every table names the subset; a row without a limit mode predates the sample: its items were the first 40
    assert " stsb (first 40) " in text and not re.search(r" stsb (?!\(first 40\))", text)
    attacks = text[text.index("attacks ("):].splitlines()
    assert attacks[2].split() == ["stsb", "(first", "40)", "elong-2", "30%", "25%"]  # one row: both saw the same attack
    assert attacks[3].startswith("warning: elong-2 changed only 30% of stsb (first 40)'s texts")


@pytest.mark.parametrize("variant,changed,truncated", [("elong-rand", 0.44, 0.01), ("elong-2", 0.27, 0.73), ("elong-rand", 0.0, 0.73)])
def test_the_elong_warning_reasons_add_up_to_the_share_unchanged(variant, changed, truncated):
    """Every text an elongation left as it was is counted under one reason: the shares sum to 100% - changed."""
    import re

    from bench.report.tables import attack_warnings

    table = pd.DataFrame([{"dataset": "stsb", "variant": variant, "changed": changed, "truncated(clean)": truncated}])
    (line,) = attack_warnings(table)
    unchanged, *parts = [int(p) for p in re.findall(r"(\d+)% (?:left|already|drew|were)", line)]
    assert unchanged == round(100 * (1 - changed)) and sum(parts) == unchanged, line
    assert ("drew m = 1" in line) == (variant == "elong-rand" and round(100 * (1 - changed)) > round(100 * truncated))


# ------------------------------------------------------------------------------------------------ attack effect
def test_attack_effect_counts_texts_whose_model_input_changed(tiny_model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    short = "a cat sat on the mat"
    long = " ".join(f"word{i}" for i in range(100))  # far more than 16 tokens
    meter = AttackMeter([short, long, short], tok, max_len=16)
    assert meter.truncated_frac == pytest.approx(1 / 3)
    attacked = attack_texts([short, long, short], "2", tok, 16)
    effect = meter.measure(attacked)
    # the long text already fills max_len: its elongated copy is cut back to the same first tokens
    assert effect.changed_frac == pytest.approx(2 / 3) and effect.truncated_frac == pytest.approx(1 / 3)
    assert effect.info() == {"changed_frac": pytest.approx(2 / 3), "truncated_frac": pytest.approx(1 / 3)}
    assert attack_effect([(1, 2), (3,)], [(1, 2), (3, 3)], [False, True]).changed_frac == 0.5
    with pytest.raises(ValueError, match="2 clean inputs, 1 attacked"):
        attack_effect([(1,), (2,)], [(1,)], [False, False])


def test_eval_records_limit_and_attack_fractions_in_score_info(tiny_model_dir, tmp_path, capsys):
    data = tmp_path / "data"
    rows = [(f"sentence {i} about a cat", f"a cat {i} sentence", float(i % 5)) for i in range(8)]
    rows[0] = (" ".join(["long"] * 60), "short one", 1.0)  # fills max_len 32 on its own
    write_sts(data / "sts" / "stsb-test.tsv", rows)
    db = tmp_path / "r.sqlite"
    rc = main(["eval", "--model", str(tiny_model_dir), "--suite", "sts:stsb@elong", "--elong", "2", "--limit", "5",
               "--limit-mode", "first", "--data-dir", str(data), "--db", str(db), "--max-len", "32", "--no-cache"])  # fmt: skip
    assert rc == 0  # the first 5 pairs: the long one among them
    out = capsys.readouterr().out
    assert "stsb (first 5 of 8)" in out and "elong-2" in out
    info = ResultsDB(db).scores().set_index("variant")["info"]
    # 10 texts (5 pairs x 2 sides); the long one was already cut at max_len, so m=2 left its input as it was
    pick = lambda d, keys: {k: d[k] for k in keys if k in d}  # noqa: E731 - beside bench.evaluate.score_info's keys
    assert pick(info["clean"], ("changed_frac", "truncated_frac", "limit")) == {"truncated_frac": 0.1, "limit": 5}
    assert pick(info["elong-2"], ("changed_frac", "truncated_frac", "limit")) == {"changed_frac": 0.9, "truncated_frac": 0.1, "limit": 5}


@pytest.mark.parametrize("command", ["eval", "run"])
@pytest.mark.parametrize("value, message", [("0", "0 is not positive"), ("-3", "-3 is not positive"),
                                            ("ten", "'ten' is not a whole number")])  # fmt: skip
def test_limit_must_be_a_positive_integer(command, value, message, tmp_path, capsys):
    argv = [command, "--limit", value, "--db", str(tmp_path / "r.sqlite")] + (["--model", "minilm", "--suite", "sts"] if command == "eval" else [])
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"error: argument --limit: {message}" in err
    assert not (tmp_path / "r.sqlite").exists()


def test_loss_note_only_when_the_loss_never_leaves_the_floor():
    note = loss_warning("simcse", [2e-5, 1e-5, 3e-6])
    assert note.startswith("note: [simcse] loss < 1e-03 from step 1 (max 2.00e-05)")
    assert note.endswith("the backbone already solves this method's training task")  # the fact, no forecast
    assert loss_warning("simcse", [0.5, 1e-5]) is None and loss_warning("simcse", []) is None


def test_results_groups_a_comparison_and_takes_a_reference(tmp_path, capsys):
    path = tmp_path / "r.sqlite"
    db = ResultsDB(path)
    _sts_run(db, "vanilla", 1.0), _sts_run(db, "simcse", 2.0), _sts_run(db, "laser3-self", 1.2)
    assert main(["results", "--db", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("comparison c1: vanilla #1 [finished], simcse #2 [finished], laser3-self #3 [finished]")
    assert "difference vs vanilla" in out
    assert main(["results", "--db", str(path), "--reference", "laser3-self"]) == 0
    assert "difference vs laser3-self" in capsys.readouterr().out
    assert main(["results", "--db", str(path), "--reference", "nope"]) == 2
    assert "bench: error: --reference 'nope': no listed run has that method" in capsys.readouterr().err


def test_results_on_several_seeds_and_datasets_print_corrected_stars_aggregates_and_improvement(tmp_path, capsys):
    """bench results on a 3-seed, 3-dataset comparison: the stars' correction named, each method's mean and IQM
    over the datasets with intervals, and the probability of improvement over the reference, as computed here."""
    from bench.report import stats

    db = ResultsDB(tmp_path / "r.sqlite")
    datasets = ("stsb", "sts12", "sts13")

    def run(method, noise, seed, kind):
        run_id = db.create_run(model=method, method=method, seed=seed, kind=kind, config={"comparison": "c9"})
        recs = []
        for d in datasets:
            rng = np.random.default_rng(zlib.crc32(f"{method}|{seed}|{d}".encode()))
            cos = (np.asarray(GOLD) + rng.normal(0, noise, len(GOLD))).tolist()
            from scipy.stats import spearmanr

            recs.append(ScoreRecord("sts", d, "spearman", 100 * spearmanr(cos, GOLD).statistic, n=len(GOLD),
                                    items=ItemValues("spearman", IDS, cos, GOLD)))  # fmt: skip
        db.add_scores(run_id, recs)
        db.finish_run(run_id)
        return run_id

    ref = run("vanilla", 2.0, 0, "eval")
    good = [run("simcse", 0.6, s, "train") for s in (0, 1, 2)]
    assert main(["results", "--db", str(db.location.shown)]) == 0
    out = capsys.readouterr().out
    assert out.count("comparison c9") == 1 and "after Holm correction over the 3 differences of this table" in out
    diffs = [line.split() for line in out.splitlines() if line.startswith("  sts") and "seeds+items" in line]
    assert len(diffs) == 3 and all(d[6].endswith("*") for d in diffs)  # a large gain on every dataset
    head = out.index("aggregate over datasets")
    agg = {line.split()[2]: line for line in out[head:].splitlines()[2:4]}
    scores = load_scores(db, {"vanilla": [ref], "simcse": good})
    per = {m: [scores[(scores["method"] == m) & (scores["dataset"] == d)].sort_values("run_id")["value"].to_numpy()
               for d in datasets] for m in ("vanilla", "simcse")}  # fmt: skip
    mean = np.mean([v.mean() for v in per["simcse"]])
    assert f"{mean:.2f} [" in agg["simcse"] and f"{stats.iqm(np.array(per['simcse'])):.2f} [" in agg["simcse"]
    assert agg["simcse"].split()[-1] == f"{stats.probability_of_improvement(per['simcse'], per['vanilla']):.2f}" == "1.00"
    assert "P(> vanilla)" in out[head:] and "mean and interquartile mean" in out[head:]
    assert main(["results", "--db", str(db.location.shown), "--correction", "none"]) == 0
    assert "* = p < 0.05, uncorrected" in capsys.readouterr().out


def test_one_training_seed_gets_its_interval_and_no_star_three_seeds_can_earn_one(tmp_path):
    """The rule of every star (stats.seed_variance_estimated): a trained method's single seed is clearly better on
    the items, and the table prints its interval without a star; the caption says why. Its seeds 1 and 2 added,
    pooled, the difference earns it."""
    from results_db.models import Run

    db = ResultsDB(tmp_path / "r.sqlite")
    ref = _sts_run(db, "vanilla", 3.0)
    trained = [_sts_run(db, "simcse", 0.3, seed=s) for s in (0, 1, 2)]
    with db.session() as s:  # simcse's runs are training runs (the seed varies the model, not just the items)
        for run_id in trained:
            s.get(Run, run_id).kind = "train"
    text = comparison_report(db, {"vanilla": [ref], "simcse": trained[:1]})
    rows = [ln.split() for ln in text[text.index("difference vs"):].splitlines()[2:4]]
    assert all(r[4] == "simcse" and not r[6].endswith("*") and float(r[9]) < 0.01 for r in rows), rows
    assert "none where a learned method has fewer than 3 seeds" in text
    text = comparison_report(db, {"vanilla": [ref], "simcse": trained})
    rows = [ln.split() for ln in text[text.index("difference vs"):].splitlines()[2:4]]
    assert all(r[6].endswith("*") and "seeds+items" in " ".join(r) for r in rows), rows
