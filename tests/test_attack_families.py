"""Attack families beyond repetition (pad, shuffle), the attack registry and its plug-ins, and the needle suite.

Tokenizer-level checks use the packaged all-MiniLM-L6-v2 tokenizer (bert-base-uncased WordPiece); nothing here
loads a model except the one small end-to-end BM25 run.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from bench.evaluate.attacks import (
    AttackedTexts, AttackMeter, Distractors, apply_attack, attacks_for, describe_variant, order_variants,
    parse_attack_options, split_sentences,
)  # fmt: skip
from bench.evaluate.attacks.base import AttackInput
from bench.runtime.errors import ConfigError

PLUGIN_SRC = Path(__file__).resolve().parent / "attack_plugin_pkg"

OWN = "The cat sat on the mat. It was a sunny day. Birds sang outside. The cat slept."
OTHERS = [
    "Quantum fields fluctuate. Electrons tunnel through barriers.",
    "Volcanoes erupt with lava. Ash clouds drift for miles.",
    "Markets rallied on Monday. Bonds fell sharply.",
]


@pytest.fixture(scope="module")
def tok(reference_dir):
    return AutoTokenizer.from_pretrained(reference_dir)


def n_tokens(tok, text: str) -> int:
    return len(tok(text, add_special_tokens=False)["input_ids"])


def pool_of(texts: list[str], seed: int = 0) -> Distractors:
    return Distractors.build(texts, seed)


def pad(param: str):
    (attack,) = attacks_for("pad", [param])
    return attack


# ------------------------------------------------------------------------------------------------ pad
@pytest.mark.parametrize("m", [2, 4])
def test_pad_makes_the_text_m_times_its_length_and_never_passes_max_len(tok, m):
    texts = [OWN, *OTHERS]
    n = n_tokens(tok, OWN)
    for position in ("start", "middle", "end"):
        out = apply_attack(pad(f"{position}-{m}"), texts, tok, max_len=512, seed=1, pool=pool_of(texts))
        # the block is cut at (m - 1) * n tokens; joining with spaces can merge or split a token at the seams
        assert abs(n_tokens(tok, out[0]) - m * n) <= 2, (position, out[0])
        for max_len in (16, 24, 40):
            for text in apply_attack(pad(f"{position}-{m}"), texts, tok, max_len, seed=1, pool=pool_of(texts)):
                assert len(tok(text)["input_ids"]) <= max_len


def test_pad_inserts_at_the_start_middle_or_end_and_never_an_items_own_sentences(tok):
    texts = [OWN, *OTHERS]
    pool = pool_of(texts)
    start, middle, end = (apply_attack(pad(f"{p}-2"), texts, tok, 512, seed=3, pool=pool)[0] for p in ("start", "middle", "end"))
    assert start.endswith(OWN) and not start.startswith("The cat")
    assert end.startswith(OWN) and not end.endswith("The cat slept.")
    own = split_sentences(OWN)  # 4 sentences: the middle boundary is after the second
    assert middle.startswith(" ".join(own[:2]) + " ") and middle.endswith(" " + " ".join(own[2:]))
    inserted = middle[len(" ".join(own[:2])) : -len(" ".join(own[2:]))]
    assert inserted.strip() and all(s not in inserted for s in own)
    # an item whose only sentences are its own gets nothing to pad with: unchanged
    alone = Distractors.build([OWN], seed=0)
    assert apply_attack(pad("start-2"), [OWN], tok, 512, seed=0, pool=alone) == [OWN]


def test_attacks_are_deterministic_under_a_seed_and_equal_chunk_by_chunk(tok, monkeypatch):
    texts = [OWN, *OTHERS] * 3
    for attack in attacks_for("pad") + attacks_for("shuffle"):
        a = apply_attack(attack, texts, tok, 64, seed=7, pool=pool_of(texts))
        assert a == apply_attack(attack, texts, tok, 64, seed=7, pool=pool_of(texts))
        if attack.family == "pad":
            assert a != apply_attack(attack, texts, tok, 64, seed=8, pool=pool_of(texts))
    monkeypatch.setattr("bench.evaluate.attacks.base.ATTACK_CHUNK", 4)  # the generator's state crosses chunks
    for attack in (pad("middle-4"), *attacks_for("shuffle")):
        whole = apply_attack(attack, texts, tok, 64, seed=7, pool=pool_of(texts))
        lazy = AttackedTexts(texts, None, tok, 64, seed=7, attack=attack, where=AttackInput(pool=pool_of(texts)))
        assert lazy[9:12] == whole[9:12] and list(lazy) == whole


def test_changed_fraction_counts_pad_end_on_a_full_text_as_a_no_op(tok):
    long = " ".join(f"word{i}" for i in range(200))  # fills max_len 32 many times over
    texts = [long, OTHERS[0], OTHERS[1]]
    meter = AttackMeter(texts, tok, 32)
    pool = Distractors.build(texts, seed=0)
    end = meter.measure(apply_attack(pad("end-2"), texts, tok, 32, seed=0, pool=pool))
    start = meter.measure(apply_attack(pad("start-2"), texts, tok, 32, seed=0, pool=pool))
    assert end.changed_frac == pytest.approx(2 / 3) and end.truncated_frac == pytest.approx(1 / 3)
    assert start.changed_frac == 1.0  # the long text loses its own content to the distractors


def test_shuffle_permutes_sentences_and_leaves_one_sentence_texts(tok):
    one = "Just one sentence here."
    (shuffled, same) = apply_attack(attacks_for("shuffle")[0], [OWN, one], tok, 512, seed=0)
    assert sorted(split_sentences(shuffled)) == sorted(split_sentences(OWN)) and shuffled != OWN
    assert same == one
    meter = AttackMeter([OWN, one], tok, 512)
    assert meter.measure([shuffled, same]).changed_frac == 0.5


def test_word_level_forms_for_bm25():
    texts = [("Cats", OWN), ("", OTHERS[0]), OTHERS[1]]
    pool = Distractors.build(texts, seed=0)
    words = [len(f"{t[0]} {t[1]}".split()) if isinstance(t, tuple) else len(t.split()) for t in texts]
    for m in (2, 4):
        out = pad(f"start-{m}").apply_words(texts, 256, random.Random(0), AttackInput(pool=pool))
        assert out[0][0] == "Cats" and out[0][1].endswith(OWN)  # the title stays; the text field is padded
        assert len(out[0][1].split()) == len(OWN.split()) + (m - 1) * words[0]
        assert isinstance(out[2], str) and len(out[2].split()) == m * words[2]  # nothing is cut for BM25
    shuffled = attacks_for("shuffle")[0].apply_words(texts, 256, random.Random(0), AttackInput())
    assert shuffled[0][0] == "Cats" and sorted(split_sentences(shuffled[0][1])) == sorted(split_sentences(OWN))


# ------------------------------------------------------------------------------------------- registry
def test_variant_order_labels_and_options():
    assert order_variants(["elong-rand", "pad-start-2", "clean", "elong-8", "elong-2", "shuffle", "pad-end-4", "x"]) == [
        "clean", "elong-2", "elong-8", "elong-rand", "pad-start-2", "pad-end-4", "shuffle", "x"]
    info = describe_variant("pad-middle-4")
    assert (info.family, info.x, info.axis) == ("pad", 4.0, "m (length factor)")
    assert describe_variant("len-512").axis == "context length (tokens)" and describe_variant("elong-rand").x is None
    assert [a.name for a in attacks_for("pad")] == [f"pad-{p}-{m}" for p in ("start", "middle", "end") for m in (2, 4)]
    assert parse_attack_options(["pad=start-2,end-4", "elong=2"]) == {"pad": ["start-2", "end-4"], "elong": ["2"]}
    with pytest.raises(ConfigError, match="POSITION-M"):
        parse_attack_options(["pad=top-2"])
    with pytest.raises(ConfigError, match="unknown attack family 'len'"):
        attacks_for("len")  # the needle suite's lengths name variants; they are not a suffix


def test_suite_suffix_names_several_families():
    from bench.evaluate.suites import EvalContext, SuiteError, parse_suites

    ((suite, families),) = parse_suites("beir:scifact,nfcorpus@elong,pad")
    assert suite.datasets() == ["scifact", "nfcorpus"] and families == ("elong", "pad")
    ctx = EvalContext(attacked=True, families=families, elong=["2"], attack_params={"pad": ["end-2"]})
    assert ctx.variants() == ["clean", "elong-2", "pad-end-2"]
    with pytest.raises(SuiteError, match="unknown attack family 'nope'"):
        parse_suites("sts@nope")


# ----------------------------------------------------------------------------------- retrieval @pad
def test_pad_in_retrieval_never_inserts_a_relevant_document(tmp_path):
    from bench.evaluate.lexical import BM25Model
    from bench.evaluate.suites import EvalContext, parse_suites
    from bench.evaluate.suites.retrieval import load_retrieval, retrieval_pool
    from tests.test_retrieval import write_beir

    relevant = {f"r{i}": ("", f"Zebraword{i} answers question {i}. It is the judged document.") for i in range(3)}
    others = {f"o{i}": ("", f"Filler document {i} talks about weather. Rain fell in town {i}.") for i in range(12)}
    write_beir(tmp_path / "beir" / "scifact", {**relevant, **others}, {f"q{i}": f"question {i}" for i in range(3)},
               [(f"q{i}", f"r{i}", 1) for i in range(3)])  # fmt: skip
    ctx = EvalContext(data_dir=str(tmp_path), attacked=True, families=("pad",))
    data = load_retrieval("scifact", ctx)
    pool = retrieval_pool(data, [data.doc_texts([d])[0] for d in data.corpus])(0)
    assert pool.sentences and not any("Zebraword" in s for s in pool.sentences)
    ((suite, _),) = parse_suites("beir:scifact@pad")
    recs = suite.evaluate(BM25Model(), "scifact", ctx)
    assert {r.variant for r in recs} == {"clean", *(f"pad-{p}-{m}" for p in ("start", "middle", "end") for m in (2, 4))}
    assert all(r.info["changed_frac"] == 1.0 for r in recs if r.variant != "clean")


# ----------------------------------------------------------------------------------------- needle
@pytest.mark.parametrize("dataset", ["passkey", "needle"])
def test_needle_items_are_answerable_only_from_their_own_document(dataset, reference_dir):
    from bench.evaluate.suites.needle import build

    data = build(dataset, 64, seed=0, limit=10)
    assert len(data.queries) == 10 and len(data.docs) == 20
    for i, (query, name) in enumerate(zip(data.queries, data.names)):
        assert name in query
        holders = [j for j, doc in enumerate(data.docs) if any(part in doc for part in name.split())]
        assert holders == [i], (name, holders)
    assert all(0.0 <= d <= 1.0 for d in data.depths) and max(data.tokens) <= 64
    assert build(dataset, 64, seed=0, limit=10).docs == data.docs  # deterministic
    longer = build(dataset, 256, seed=0, limit=10)
    assert min(longer.tokens) > 200 and max(longer.tokens) <= 256


# ------------------------------------------------------------------------------------------- plug-in
@pytest.fixture(scope="module")
def plugin_target(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("attack-plugin")
    src = work / "src"
    shutil.copytree(PLUGIN_SRC, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    target = work / "site"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
                           "--quiet", "--disable-pip-version-check", "--target", str(target), str(src)],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return target


def test_a_plugin_attack_registers_through_the_entry_point_group(plugin_target, monkeypatch, tok):
    import importlib

    from bench.evaluate.attacks import registry
    from bench.evaluate.suites import EvalContext, parse_suites

    monkeypatch.syspath_prepend(str(plugin_target))
    monkeypatch.setattr(registry, "FAMILIES", registry.FAMILIES.fresh())
    importlib.invalidate_caches()
    assert {"elong", "pad", "shuffle", "upper"} <= {f.name for f in registry.families()}
    ((_, families),) = parse_suites("sts:stsb@elong,upper")
    ctx = EvalContext(attacked=True, families=families, elong=["2"])
    assert ctx.variants() == ["clean", "elong-2", "upper", "upper-2"]
    (upper,) = attacks_for("upper", ["2"])
    assert apply_attack(upper, ["a cat sat here"], tok, 32) == ["A CAT sat here"]
    assert order_variants(["upper-2", "shuffle", "clean"]) == ["clean", "shuffle", "upper-2"]


# ------------------------------------------------------------------------------------- leaderboard view
def test_leaderboard_robustness_filters_by_family_and_plots_needle_against_length():
    import numpy as np

    from bench.evaluate.attacks import order_variants
    from leaderboard import attack_curves
    from leaderboard.views.robustness import family_variants
    from tests.test_leaderboard_tables import runs_frame, scores_frame

    assert order_variants(["pad-end-2", "elong-rand", "clean", "pad-start-4", "elong-2"]) == [
        "clean", "elong-2", "elong-rand", "pad-start-4", "pad-end-2"]
    assert [attack_curves.variant_m(v) for v in ("clean", "elong-8", "pad-middle-2", "len-512", "shuffle")] == [
        "1 (clean)", "8", "middle-2", "512", "shuffle"]
    assert attack_curves.family_axis("len") == "context length (tokens)"
    runs = runs_frame([(1, "a", "b", "", "", 0), (2, "a", "b", "", "", 1)])
    scores = scores_frame([(1, "scifact", 60, "clean"), (1, "scifact", 59, "elong-2"), (1, "scifact", 40, "pad-start-2"),
                           (2, "scifact", 62, "clean"), (2, "scifact", 61, "elong-2"), (2, "scifact", 44, "pad-start-2")])
    pad_only = family_variants(scores, "pad")
    assert set(pad_only["variant"]) == {"clean", "pad-start-2"}
    table = attack_curves.build_robustness(pad_only, runs).set_index("method")
    assert table.loc["a", "change pad-start-2"] == -19 and "elong-2" not in table
    needle = scores_frame([(1, "passkey", 100, "len-64"), (1, "passkey", 40, "len-512"), (2, "passkey", 90, "len-64"),
                           (2, "passkey", 50, "len-512"), (1, "passkey", 70, "len-mean"), (2, "passkey", 70, "len-mean")])
    curve = attack_curves.length_curve(needle, runs).set_index("variant")
    assert list(curve.index) == ["len-64", "len-512", "len-mean"] and curve.loc["len-64", "score"] == 95
    assert curve.loc["len-512", "m"] == "512" and curve.loc["len-64", "seeds"] == 2 and np.isnan(curve.loc["len-64", "changed_frac"])


# ---------------------------------------------------------------------------------------- the variant loop
def test_the_variant_loop_keeps_each_suites_seed_salt(tok):
    """elong-rand texts equal the pre-loop code's: attack_texts seeded by ctx.rng(salt) with the suite's own salt."""
    from bench.evaluate.attacks import attack_texts
    from bench.evaluate.suites import EvalContext
    from bench.evaluate.suites.diag import DiagSuite
    from bench.evaluate.suites.variants import variant_loop

    class Model:  # what the loop reads of an encoder
        tokenizer, max_len = tok, 32

        def encode(self, texts):  # noqa: ANN001, ANN201
            raise AssertionError("the loop never encodes")

    texts = [OWN, *OTHERS]
    ctx = EvalContext(attacked=True, elong=["rand"], seed=3)
    loop = variant_loop(Model(), ctx, measured=texts)
    assert loop.names == ["clean", "elong-rand"]
    (clean, rand) = list(loop)
    assert clean.texts(texts, salt="x") is texts and clean.info() == {"truncated_frac": 0.0}
    for salt in ("stsb|elong-rand|1", "scifact|elong-rand|docs", "agnews|elong-rand", "diag|elong-rand|2"):
        want = attack_texts(texts, "rand", tok, 32, seed=ctx.rng(salt).getrandbits(32))
        assert rand.texts(texts, salt=salt) == want
    # diag always runs elong (its --elong), then the families of its suffix
    diag_ctx = EvalContext(attacked=True, families=("pad",), elong=["2"], attack_params={"pad": ["end-2"]})
    assert DiagSuite().variants(diag_ctx) == ["clean", "elong-2", "pad-end-2"]
    assert DiagSuite().variants(EvalContext(elong=["8"])) == ["clean", "elong-8"]


def test_leaderboard_groups_a_hyphenated_plugin_family_by_the_registry(monkeypatch):
    """A family whose name holds a '-' ("word-swap": variants word-swap-2, word-swap-4) is one family on the
    leaderboard, named as registered, beside a family "word" with variants of its own; unknown names keep their prefix."""
    from bench.evaluate.attacks import registry
    from bench.evaluate.attacks.base import AttackFamily
    from bench.evaluate.attacks.elong import FAMILY as ELONG
    from dataclasses import replace as dc_replace
    from leaderboard import attack_curves
    from leaderboard.views.robustness import family_variants
    from tests.test_leaderboard_tables import scores_frame

    def family(name: str) -> AttackFamily:
        return AttackFamily(name, "test", "m", ("2",), lambda p: dc_replace(ELONG.make(p), name=f"{name}-{p}"))

    monkeypatch.setattr(registry, "FAMILIES", registry.FAMILIES.fresh())
    registry.register(family("word-swap"))
    registry.register(family("word"))
    names = ("elong-2", "word-swap-2", "word-swap-4", "word-4", "gone-family-3")
    assert [attack_curves.variant_family(v) for v in names] == ["elong", "word-swap", "word-swap", "word", "gone"]
    assert attack_curves.variant_m("word-swap-4") == "4"
    scores = scores_frame([(1, "scifact", 60, "clean"), (1, "scifact", 50, "word-swap-2"), (1, "scifact", 55, "word-4")])
    assert set(family_variants(scores, "word-swap")["variant"]) == {"clean", "word-swap-2"}
    assert set(family_variants(scores, "word")["variant"]) == {"clean", "word-4"}
