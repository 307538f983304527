"""The four length diagnostics of SPEC §3 (`diag` suite), each checked on inputs whose value is known by hand.

1. pair cosines before/after elongation  -> a bag-of-words encoder is blind to whole-copy elongation: shift 0
2. intra-document similarity - anisotropy -> tokens that are all equal give 1; hand-built token sets otherwise
3. sentence anisotropy                    -> identical rows 1, orthonormal rows 0, antipodes -1, a 1/3 mixture
4. positional JSD                         -> identical histograms 0, disjoint 1, a two-bin case by hand; a
                                             word-order-blind encoder gets exactly 0
"""

import hashlib
import math

import numpy as np
import pytest
from transformers import AutoTokenizer

from bench.evaluate.attacks import attack_texts
from bench.cli import main
from bench.evaluate.suites import EvalContext, parse_suites
from bench.evaluate.suites.diag import (
    DiagSuite,
    cosine_histogram,
    positional_jsd,
    random_pair_cosine,
    token_statistics,
)
from results_db import ResultsDB
from tests.conftest import TOY_PAIRS, write_sts

PAIRS = TOY_PAIRS


@pytest.fixture(scope="module")
def tok(reference_dir):
    return AutoTokenizer.from_pretrained(reference_dir)


@pytest.fixture()
def data_dir(tmp_path):
    write_sts(tmp_path / "data" / "sts" / "stsb-test.tsv", PAIRS)
    return tmp_path / "data"


def word_vector(word: str, dim: int = 16) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:8], "little")
    return np.random.default_rng(seed).normal(size=dim)


class BagOfWords:
    """An encoder whose token embeddings are fixed per word: mean pooling ignores order and whole copies."""

    def __init__(self, tokenizer, max_len=64):
        self.tokenizer = tokenizer
        self.max_len = max_len
        self.encoded: list[str] = []
        self.token_calls: list[list[str]] = []

    def _tokens(self, texts):
        return [np.stack([word_vector(w) for w in t.split()]).astype(np.float32) for t in texts]

    def token_embeddings(self, texts):
        self.token_calls.append(list(texts))
        return self._tokens(texts)

    def encode(self, texts, desc="", **kw):
        self.encoded += list(texts)
        means = np.stack([t.mean(axis=0) for t in self._tokens(texts)])
        return (means / np.linalg.norm(means, axis=1, keepdims=True)).astype(np.float32)


def expected_geometry(model, texts):
    """Exact values of the sampled diagnostics: mean over ALL distinct sentence pairs / cross-text token pairs."""
    vecs = model._tokens(texts)
    emb = _unit(np.stack([v.mean(0) for v in vecs]).astype(np.float64))
    sims = emb @ emb.T
    anisotropy = (sims.sum() - np.trace(sims)) / (len(texts) * (len(texts) - 1))
    intra = np.mean([float((_unit(v.astype(np.float64)) @ _unit(v.mean(0).astype(np.float64))).mean()) for v in vecs])
    toks = [_unit(v.astype(np.float64)) for v in vecs]
    total = sum(float((a @ b.T).sum()) for i, a in enumerate(toks) for j, b in enumerate(toks) if i != j)
    pairs = sum(len(a) * len(b) for i, a in enumerate(toks) for j, b in enumerate(toks) if i != j)
    return anisotropy, intra, total / pairs


def _unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


# ------------------------------------------------------------ 4. positional JSD
def test_positional_jsd_hand_values():
    rng = np.random.default_rng(0)
    cos = rng.uniform(-1, 1, 500)
    assert positional_jsd(cos, cos) == 0.0
    assert positional_jsd(cos, rng.permutation(cos)) == 0.0  # histograms, not pairs
    assert positional_jsd(np.full(10, 0.95), np.full(10, -0.95)) == pytest.approx(1.0)  # disjoint, base 2
    # p = half in bin A, half in bin B; q = all in bin A.  M = (3/4, 1/4).
    p_cos = np.array([0.895, 0.9, 0.495, 0.5])  # bins are 0.04 wide: [0.88, 0.92) and [0.48, 0.52)
    q_cos = np.array([0.895, 0.9, 0.905, 0.91])
    kl_pm = 0.5 * math.log2(0.5 / 0.75) + 0.5 * math.log2(0.5 / 0.25)
    kl_qm = 1.0 * math.log2(1.0 / 0.75)
    assert positional_jsd(p_cos, q_cos) == pytest.approx(math.sqrt(0.5 * kl_pm + 0.5 * kl_qm), abs=1e-9)  # 0.5579
    # out-of-range cosines (float error) are clipped into the end bins, never dropped
    assert cosine_histogram(np.array([1.0000001, -1.0000001])).sum() == pytest.approx(1.0)


# ----------------------------------------------------- 3. sentence anisotropy
def test_anisotropy_hand_values():
    rng = np.random.default_rng(0)
    same = np.tile(rng.normal(size=8), (5, 1))
    assert random_pair_cosine(same, 1000, rng) == pytest.approx(1.0)
    assert random_pair_cosine(np.eye(6) * 3.0, 1000, rng) == pytest.approx(0.0, abs=1e-12)  # never a row with itself
    assert random_pair_cosine(np.array([[1.0, 2.0], [-1.0, -2.0]]), 100, rng) == pytest.approx(-1.0)
    # rows e1, e1, e2: of the 6 ordered distinct pairs, 2 have cosine 1 and 4 have cosine 0 -> 1/3
    mix = np.array([[1.0, 0.0], [2.0, 0.0], [0.0, 1.0]])
    assert random_pair_cosine(mix, 20_000, np.random.default_rng(1)) == pytest.approx(1 / 3, abs=0.02)
    with pytest.raises(ValueError, match="at least 2"):
        random_pair_cosine(np.ones((1, 4)), 10, rng)


# ---------------------------------------- 2. intra-document similarity, token anisotropy
class FixedTokens:
    def __init__(self, tokens):
        self.tokens = tokens

    def token_embeddings(self, texts):
        return [self.tokens[t] for t in texts]


def test_intra_similarity_and_token_anisotropy_hand_values():
    e1, e2 = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    model = FixedTokens({"A": np.stack([e1, 3 * e1]), "B": np.stack([e1, e2])})
    intra, aniso = token_statistics(model, ["A", "B"], 20_000, np.random.default_rng(0))
    # A: every token is parallel to the mean -> 1.  B: mean is (e1+e2)/2, each token at 45 degrees -> 1/sqrt 2.
    assert intra == pytest.approx((1 + 1 / math.sqrt(2)) / 2, abs=1e-12)
    # token pairs from different texts: (e1|e1) with e1 -> 1, with e2 -> 0; half and half
    assert aniso == pytest.approx(0.5, abs=0.02)
    # all tokens equal: intra 1, anisotropy 1, the adjusted value 0
    same = FixedTokens({"x": np.ones((4, 3)), "y": 2 * np.ones((2, 3))})
    intra, aniso = token_statistics(same, ["x", "y"], 1000, np.random.default_rng(0))
    assert intra == pytest.approx(1.0) and aniso == pytest.approx(1.0)


# ------------------------------------------------------------- the suite, end to end
def test_diag_suite_on_a_bag_of_words_encoder(tok, data_dir):
    """Every measure against an independent computation; elongation by whole copies and word shuffles change nothing."""
    model = BagOfWords(tok, max_len=64)
    ctx = EvalContext(data_dir=str(data_dir), elong=["2", "rand"], seed=3)
    ((suite, attacked),) = parse_suites("diag")
    assert isinstance(suite, DiagSuite) and not attacked
    recs = suite.evaluate(model, "stsb", ctx)
    by = {(r.variant, r.metric): r for r in recs}
    metrics = {"pair_cos_mean", "pair_cos_median", "pair_cos_std", "pair_cos_p10", "pair_cos_p90", "pair_cos_shift",
               "positional_jsd", "anisotropy", "intra_sim", "token_anisotropy", "intra_sim_adj"}  # fmt: skip
    assert set(by) == {(v, m) for v in ("clean", "elong-2", "elong-rand") for m in metrics}

    s1, s2 = [p[0] for p in PAIRS], [p[1] for p in PAIRS]
    cos = np.array([float(_unit(model._tokens([a])[0].mean(0)) @ _unit(model._tokens([b])[0].mean(0)))
                    for a, b in zip(s1, s2)])  # fmt: skip
    texts = list(dict.fromkeys(s1 + s2))
    # one token_embeddings call per variant, on the unique sentences of both sides (attacked for elong-*)
    assert len(model.token_calls) == 3 and model.token_calls[0] == texts

    for variant, variant_texts in zip(("clean", "elong-2", "elong-rand"), model.token_calls):
        v = {m: by[(variant, m)].value for m in metrics}
        # 1. pair cosines: whole copies leave a mean-pooled bag of words unchanged, so nothing shifts
        assert v["pair_cos_mean"] == pytest.approx(cos.mean(), abs=1e-5)
        assert v["pair_cos_median"] == pytest.approx(np.median(cos), abs=1e-5)
        assert v["pair_cos_p10"] <= v["pair_cos_median"] <= v["pair_cos_p90"]
        assert v["pair_cos_shift"] == pytest.approx(0.0, abs=1e-5)
        np.testing.assert_allclose(by[(variant, "pair_cos_mean")].items.values, cos, atol=1e-5)
        # 4. the encoder ignores word order: shuffling sentence 1 leaves every cosine as it was
        assert v["positional_jsd"] == pytest.approx(0.0, abs=1e-12)
        # 3. and 2.: the sampled estimates against the exact means (20,000 draws: standard error ~0.003)
        anisotropy, intra, token_aniso = expected_geometry(model, variant_texts)
        assert v["anisotropy"] == pytest.approx(anisotropy, abs=0.01)
        assert v["intra_sim"] == pytest.approx(intra, abs=1e-9)
        assert v["token_anisotropy"] == pytest.approx(token_aniso, abs=0.01)
        assert v["intra_sim_adj"] == pytest.approx(v["intra_sim"] - v["token_anisotropy"], abs=1e-12)
        if variant != "clean":  # copies: each token is as close to its text's mean as before
            assert v["intra_sim"] == pytest.approx(by[("clean", "intra_sim")].value, abs=1e-9)
    assert by[("clean", "anisotropy")].n == len(texts)
    # Score.info: short pairs at max_len 64: m=2 changes every text, none is cut
    assert by[("clean", "pair_cos_mean")].info == {"truncated_frac": 0.0}
    assert by[("elong-2", "positional_jsd")].info == {"changed_frac": 1.0, "truncated_frac": 0.0}
    # what the model was shown for elong-2: each sentence twice, within max_len
    assert "a man plays the guitar . a man plays the guitar ." in model.token_calls[1]
    shown = model.encoded + [t for call in model.token_calls for t in call]
    assert all(len(tok(t)["input_ids"]) <= model.max_len for t in shown)
    # one pass per distinct sentence: only the shuffled sentences 1 are encoded apart (never a sentence twice)
    assert len(model.encoded) == 3 * len(PAIRS)


def test_diag_shift_is_the_mean_change_of_pair_cosines(tok, data_dir):
    """With copies cut at max_len the bag of words changes; the shift is the attacked minus the clean cosine."""
    model = BagOfWords(tok, max_len=12)  # 10 tokens of budget: copies of 6-8 token sentences are cut
    ctx = EvalContext(data_dir=str(data_dir), elong=["8"], seed=0)
    recs = DiagSuite().evaluate(model, "stsb", ctx)
    by = {(r.variant, r.metric): r for r in recs}
    s1, s2 = [p[0] for p in PAIRS], [p[1] for p in PAIRS]
    a1, a2 = attack_texts(s1, "8", tok, 12), attack_texts(s2, "8", tok, 12)
    clean = np.einsum("ij,ij->i", model.encode(s1), model.encode(s2))
    attacked = np.einsum("ij,ij->i", model.encode(a1), model.encode(a2))
    assert by[("elong-8", "pair_cos_mean")].value == pytest.approx(attacked.mean(), abs=1e-5)
    assert by[("elong-8", "pair_cos_shift")].value == pytest.approx((attacked - clean).mean(), abs=1e-5)
    assert abs(by[("elong-8", "pair_cos_shift")].value) > 1e-3
    np.testing.assert_allclose(by[("elong-8", "pair_cos_shift")].items.values, attacked - clean, atol=1e-5)


def test_positional_jsd_detects_an_order_sensitive_encoder(tok, data_dir):
    """An encoder that reads only the first word: shuffling sentence 1 changes its pair cosines."""

    class FirstWord(BagOfWords):
        def _tokens(self, texts):
            return [np.stack([word_vector(t.split()[0])] * len(t.split())).astype(np.float32) for t in texts]

    recs = DiagSuite().evaluate(FirstWord(tok), "stsb", EvalContext(data_dir=str(data_dir), elong=["2"], seed=0))
    jsd = {r.variant: r.value for r in recs if r.metric == "positional_jsd"}
    assert 0.0 < jsd["clean"] <= 1.0
    intra = [r.value for r in recs if r.metric == "intra_sim"]
    assert intra == pytest.approx([1.0, 1.0])  # every token equals the mean


def test_diag_with_a_transformer_through_the_cli(tiny_model_dir, data_dir, tmp_path, capsys):
    db = tmp_path / "r.sqlite"
    args = ["eval", "--model", str(tiny_model_dir), "--suite", "diag", "--elong", "2,rand", "--max-len", "16",
            "--data-dir", str(data_dir), "--db", str(db)]  # fmt: skip
    assert main(args) == 0
    assert "positional_jsd" in capsys.readouterr().out
    scores = ResultsDB(db).scores()
    assert set(scores["variant"]) == {"clean", "elong-2", "elong-rand"}
    v = scores.set_index(["variant", "metric"])["value"]
    for variant in ("clean", "elong-2", "elong-rand"):
        assert 0.0 <= v[(variant, "positional_jsd")] <= 1.0
        for m in ("pair_cos_mean", "anisotropy", "intra_sim", "token_anisotropy"):
            assert -1.0 - 1e-6 <= v[(variant, m)] <= 1.0 + 1e-6
        assert v[(variant, "intra_sim_adj")] == pytest.approx(v[(variant, "intra_sim")] - v[(variant, "token_anisotropy")])
    assert v[("clean", "pair_cos_shift")] == 0.0
    # bm25 has no token embeddings: refused before a run is recorded
    assert main(["eval", "--model", "bm25", "--suite", "diag", "--data-dir", str(data_dir), "--db", str(db)]) == 2
    assert "bench: error: " in capsys.readouterr().err
    assert len(ResultsDB(db).runs()) == 1


def test_diag_refuses_other_datasets():
    with pytest.raises(ValueError, match="STS-B test only"):
        parse_suites("diag:sts12")
