"""EDA synonym replacement over the local WordNet 3.0 database (Debian's wordnet-base)."""

from __future__ import annotations

import random

import pytest

from methods.eda import synonym_replacement, wordnet_available, wordnet_dir

pytestmark = pytest.mark.skipif(not wordnet_available(), reason="WordNet (Debian wordnet-base) not installed")


@pytest.fixture(scope="module")
def wn():
    from methods.eda import load_wordnet

    return load_wordnet(str(wordnet_dir()))


def test_synonyms_follow_wordnet_and_morphy(wn):
    assert {"automobile", "motorcar", "auto"} <= set(wn.synonyms("car"))
    dogs = wn.synonyms("dogs")  # morphy: dogs -> dog; the base form itself is no replacement
    assert "canis familiaris" in dogs and "dog" not in dogs and "dogs" not in dogs
    assert "automobile" in wn.synonyms("cars")
    assert wn.synonyms("the") == () and wn.synonyms("qwzxv") == ()
    assert list(wn.synonyms("car")) == sorted(wn.synonyms("car"))  # draws depend on the rng only


def test_replacement_count_protection_and_sources(wn):
    words = "The quick brown fox jumps over the lazy dog near the river bank".split()
    protected = {3, 8}  # fox, dog
    replaceable = [i not in protected for i in range(len(words))]
    for seed in range(30):
        out = synonym_replacement(words, random.Random(seed), wn, 0.2, replaceable)
        # Every source word appears, in order; protected and stop words are never replaced.
        assert [src for _, src, _ in out] == sorted(src for _, src, _ in out)
        assert {src for _, src, _ in out} == set(range(len(words)))
        replaced = {words[src].lower() for _, src, rep in out if rep}
        assert not replaced & {"fox", "dog", "the", "over"}
        assert len(replaced) == max(1, int(0.2 * len(words)))  # n = max(1, int(alpha * #words)) = 2
        for tok, src, rep in out:
            if not rep:
                assert tok == words[src]
    assert synonym_replacement(words, random.Random(0), wn, 0.2) != synonym_replacement(words, random.Random(1), wn, 0.2)
