"""A claim file is checked whole before anything trains: a test's dataset, variant or metric its scale's suite does
not score, a comparator that is the treatment (or another comparator) under another name, a number that is not
finite, a test or a seed given twice: each is one line naming the file, table and key, and nothing runs."""

from __future__ import annotations

import pytest

from bench.claim.check import load_checked
from bench.claim.spec import ClaimFileError
from bench.cli import main
from results_db import ResultsDB
from tests.test_claim_cli import write_claim


def faults_of(path, scale="cpu") -> list[str]:
    with pytest.raises(ClaimFileError) as refused:
        load_checked(path, scale)
    return refused.value.faults


def edit(path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def test_the_tiny_claim_is_clean(tmp_path, tiny_model_dir):
    spec, arms = load_checked(write_claim(tmp_path / "tiny.toml", tiny_model_dir), "cpu")
    assert [a.name for a in arms] == ["laser3-self", "vanilla", "no-elongation"] and len(spec.tests) == 2


@pytest.mark.parametrize("old,new,where,says", [
    ('dataset = "stsb"', 'dataset = "sickr"', "[[test]] #1 dataset", "'sickr' is not scored at scale cpu (suite sts:stsb@elong); it scores stsb"),
    ('variant = "elong-2"', 'variant = "elong-5"', "[[test]] #2 variant", "'elong-5' is not scored at scale cpu (suite sts:stsb@elong); it scores clean, elong-2"),
    ('metric = "spearman"', 'metric = "spearmann"', "[claim] metric", "'spearmann' is not a metric of suite 'sts' (it stores spearman)"),
    ('suite = "sts"\n', 'suite = "beir"\n', "[claim] suite", "'beir' is not scored at scale cpu"),
    ('metric = "spearman"', 'metric = "psi"', "[claim] metric", "'psi' is the position suite's index"),
])  # fmt: skip
def test_what_the_scale_does_not_score_is_refused_before_anything_runs(tmp_path, tiny_model_dir, old, new, where, says):
    path = write_claim(tmp_path / "tiny.toml", tiny_model_dir)
    edit(path, old, new)
    (fault,) = faults_of(path)
    assert fault.startswith(f"{path} {where}: ") and says in fault


@pytest.mark.parametrize("comparator,same_as", [
    ('name = "alias"\nmethod = "laser3"', "the treatment"),  # laser3 is laser3-self's alias
    ('name = "default"\nmethod = "laser3-self"\nhp = ["m_mode=random"]', "the treatment"),  # its default m_mode
    ('name = "vanilla-again"\nmethod = "vanilla"', "comparator 'vanilla'"),
    ('name = "no-elong-again"\nmethod = "laser3"\nhp = ["m_mode=none"]', "comparator 'no-elongation'"),
])
def test_a_comparator_that_is_another_arm_under_another_name_is_refused(tmp_path, tiny_model_dir, comparator, same_as):
    path = write_claim(tmp_path / "tiny.toml", tiny_model_dir)
    edit(path, "[[test]]", f"[[comparator]]\n{comparator}\n[[test]]")
    (fault,) = faults_of(path)
    assert fault.startswith(f"{path} [[comparator]] #3: ") and f"the same model as {same_as}" in fault


@pytest.mark.parametrize("old,new,where", [
    ("margin = 1.0", "margin = nan", "[[test]] #2 margin"),
    ("margin = 1.0", "margin = inf", "[[test]] #2 margin"),
    ("margin = 1.0", "margin = -1.0", "[[test]] #2 margin"),
    ('direction = "higher"', 'direction = "higher"\nmin_effect = 1e308', "[[test]] #1 min_effect"),
    ('direction = "higher"', 'direction = "higher"\nmin_effect = -inf', "[[test]] #1 min_effect"),
    ("[[test]]", "[claim2]\n[[test]]", "unknown table(s) ['claim2']"),
])
def test_numbers_that_are_not_finite_effects_are_refused(tmp_path, tiny_model_dir, old, new, where):
    path = write_claim(tmp_path / "tiny.toml", tiny_model_dir)
    edit(path, old, new)
    (fault,) = faults_of(path)
    assert where in fault and fault.startswith(str(path))
    if "margin" in where or "min_effect" in where:
        assert "is not a number from 0 to 200" in fault


def test_a_test_given_twice_is_refused(tmp_path, tiny_model_dir):
    path = write_claim(tmp_path / "tiny.toml", tiny_model_dir)
    edit(path, "[scale.cpu]", '[[test]]\ndataset = "stsb"\nvariant = "clean"\ndirection = "not-lower"\nmargin = 1.0\n[scale.cpu]')
    (fault,) = faults_of(path)
    assert fault.startswith(f"{path} [[test]] #3: tests stsb clean again (as [[test]] #1 does)")


def test_duplicate_seeds_are_named_as_such(tmp_path, tiny_model_dir):
    path = write_claim(tmp_path / "tiny.toml", tiny_model_dir)
    edit(path, "seeds = [0, 1, 2]", "seeds = [0, 0, 1, 2]")
    (fault,) = faults_of(path)
    assert fault.startswith(f"{path} [claim] seeds: 0 listed more than once")
    assert "device, progress" not in fault


def test_every_fault_is_one_line_and_nothing_trains(tmp_path, tiny_model_dir, capsys):
    path = write_claim(tmp_path / "tiny.toml", tiny_model_dir)
    edit(path, 'dataset = "stsb"', 'dataset = "sickr"')
    edit(path, "margin = 1.0", "margin = nan")
    edit(path, "seeds = [0, 1, 2]", "seeds = [0, 0, 1, 2]")
    edit(path, "[[test]]", '[[comparator]]\nname = "alias"\nmethod = "laser3"\n[[test]]')
    db = tmp_path / "r.sqlite"
    assert main(["claim", str(path), "--db", str(db)]) == 2
    out = capsys.readouterr()
    lines = out.err.strip().splitlines()
    assert len(lines) == 4 and all(ln.startswith(f"bench: error: {path} ") for ln in lines), out.err
    assert ["seeds" in lines[0], "margin" in lines[1], "alias" in lines[2], "sickr" in lines[3]] == [True] * 4
    assert "runs:" not in out.out
    assert not db.exists() or ResultsDB(db).runs().empty


def test_every_shipped_claim_file_passes_the_checks_at_each_scale():
    from tests.conftest import REPO

    for path in sorted((REPO / "claims").glob("*.toml")):
        spec, _ = load_checked(path, "cpu")
        for scale in spec.scales:
            load_checked(path, scale)
