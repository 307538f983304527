import random

import pytest
from transformers import AutoTokenizer

from bench.evaluate.attacks import (
    attack_texts,
    count_tokens,
    elongate,
    elongate_random,
    elongate_within,
    max_m,
    parse_elong_variants,
    sample_m,
    shuffle_words,
)


@pytest.fixture(scope="module")
def tok(reference_dir):
    return AutoTokenizer.from_pretrained(reference_dir)


def test_elongate_copies_and_joins():
    assert elongate("a b", 3) == "a b a b a b"
    assert elongate("x", 1) == "x"
    with pytest.raises(ValueError):
        elongate("x", 0)


def test_m_range_follows_spec():
    # SPEC §2: 10 tokens at max_len 256 -> 1..25; 50 tokens -> 1..5.
    assert max_m(10, 256) == 25
    assert max_m(50, 256) == 5
    assert max_m(300, 256) == 1
    rng = random.Random(0)
    draws_10 = {sample_m(10, 256, rng) for _ in range(3000)}
    draws_50 = {sample_m(50, 256, rng) for _ in range(1000)}
    assert draws_10 == set(range(1, 26))
    assert draws_50 == set(range(1, 6))


def test_elongated_inputs_never_exceed_max_len(tok):
    texts = [
        "a girl is styling her hair .",
        "the quick brown fox jumps over the lazy dog " * 3,
        "supercalifragilisticexpialidocious antidisestablishmentarianism",
        "word " * 300,
        "",
    ]
    for max_len in (16, 64, 256):
        for variant in ("2", "4", "8", "rand"):
            for attacked in attack_texts(texts, variant, tok, max_len, seed=1):
                assert len(tok(attacked)["input_ids"]) <= max_len
        rng = random.Random(3)
        for t in texts[:3]:
            out, m = elongate_random(t, tok, max_len, rng)
            n = count_tokens(t, tok)
            assert 1 <= m <= max_m(n, max_len)
            assert len(tok(out)["input_ids"]) <= max_len


def test_elongate_within_keeps_whole_copies_when_they_fit(tok):
    s = "a girl is styling her hair ."
    assert elongate_within(s, 4, tok, 256) == elongate(s, 4)
    cut = elongate_within(s, 100, tok, 32)
    assert cut.startswith(elongate(s, 3)) and len(tok(cut)["input_ids"]) == 32


def test_shuffle_words_is_a_permutation():
    text = "one two three four five six"
    out = shuffle_words(text, random.Random(0))
    assert sorted(out.split()) == sorted(text.split()) and out != text


def test_parse_elong_variants():
    assert parse_elong_variants("2,4,8,rand") == ["2", "4", "8", "rand"]
    with pytest.raises(ValueError, match="'1'"):
        parse_elong_variants("1")
