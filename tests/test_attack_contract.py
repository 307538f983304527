"""An attack (built-in or plug-in) is checked where its output meets the scoring: one text per input, of the
input's kind, and the same texts for the same seed (run twice on a small sample before anything is scored). A
broken attack is one line naming it, its code and the rule; its run row fails and earlier rows stay."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from bench.evaluate.attacks import Attack, AttackFamily, apply_attack
from bench.evaluate.attacks.output_check import AttackError


@dataclass(frozen=True)
class Broken(Attack):
    how: str = ""

    def apply_words(self, texts, max_len, rng, where):  # noqa: ANN001
        texts = list(texts)
        if self.how == "none":
            return None
        if self.how == "fewer":
            return texts[:-1]
        if self.how == "not-a-string":
            return [len(t) for t in texts]
        if self.how == "global-random":  # ignores its rng: a different output on every run
            return [f"{t} {random.random()}" for t in texts]
        return [f"{t} {rng.random()}" for t in texts]  # "seeded": deterministic

    def apply(self, texts, tokenizer, max_len, rng, where):  # noqa: ANN001
        return self.apply_words(texts, max_len, rng, where)


def broken(how: str) -> Broken:
    return Broken(name=f"broken-{how}", family="broken", param=how, x=None, order=0, how=how)


@pytest.mark.parametrize("how, message", [
    ("none", "returned NoneType for 3 texts"),
    ("fewer", "returned 2 texts for 3"),
    ("not-a-string", "text 0 came back as int"),
    ("global-random", "two runs from the same seed gave different texts"),
])  # fmt: skip
def test_a_broken_attack_is_one_line_naming_it_and_the_rule(how, message):
    with pytest.raises(AttackError) as err:
        apply_attack(broken(how), ["a b", "c d", "e f"], None, 32, seed=0, words=True)
    text = str(err.value)
    assert text.startswith(f"attack 'broken-{how}' (tests.test_attack_contract.Broken): ") and message in text
    assert "\n" not in text


def test_a_seeded_attack_passes_and_gives_the_same_texts_for_one_seed():
    texts = ["a b", "c d", "e f"] * 5
    first = apply_attack(broken("seeded"), texts, None, 32, seed=3, words=True)
    assert first == apply_attack(broken("seeded"), texts, None, 32, seed=3, words=True)
    assert first != apply_attack(broken("seeded"), texts, None, 32, seed=4, words=True)


def test_bench_eval_with_a_broken_plugin_attack_fails_its_row_and_keeps_earlier_ones(tmp_path, monkeypatch, capsys):
    from bench.cli import main
    from bench.evaluate.attacks import registry
    from results_db import ResultsDB
    from tests.test_credentials import _beir

    monkeypatch.setattr(registry, "FAMILIES", registry.FAMILIES.fresh())
    registry.register(AttackFamily(name="broken", summary="test", axis="x", defaults=("fewer",), make=broken))
    data, db = _beir(tmp_path / "data"), tmp_path / "r.sqlite"
    common = ["--model", "bm25", "--data-dir", str(data), "--db", str(db), "--no-progress"]
    assert main(["eval", "--suite", "beir:scifact", *common]) == 0
    before = ResultsDB(db).scores()
    capsys.readouterr()
    assert main(["eval", "--suite", "beir:scifact@broken", *common]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bench: error: attack 'broken-fewer' (tests.test_attack_contract.Broken): returned ") and "Traceback" not in err
    runs = ResultsDB(db).runs()
    assert runs["status"].tolist() == ["finished", "failed"] and "returned" in runs["error"].iloc[1]
    assert ResultsDB(db).scores()[before.columns].equals(before)  # the first run's scores, nothing added
