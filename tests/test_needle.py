"""The needle suite counts context lengths in the evaluated model's own tokens, and runs without the packaged
all-MiniLM-L6-v2 (issue 26)."""

import pytest

from bench.encode.encoder import Encoder
from bench.evaluate.suites import EvalContext, parse_suites
from bench.evaluate.suites import needle

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture()
def no_packaged_minilm(monkeypatch):
    import bench.encode.loading as encoder_module

    monkeypatch.setattr(encoder_module, "reference_model_dir", lambda: None)
    needle.default_counter.cache_clear()
    yield
    needle.default_counter.cache_clear()


def test_word_tokenizer_counts_words_and_punctuation_and_cuts_at_them():
    counter = needle.LengthCounter(needle.word_tokenizer(), needle.WORDS)
    assert counter.count(["Hello, world!", "The pass key is 12345.", ""]) == [4, 6, 0]
    assert counter.cut("One two, three four.", 3) == "One two,"


def test_an_encoder_without_the_packaged_model_counts_in_its_own_tokens(tiny_model_dir, tmp_path, no_packaged_minilm):
    enc = Encoder.load(str(tiny_model_dir), max_len=64, batch_size=8, show_progress=False, backend="torch",
                       cache_dir=tmp_path / "cache")  # fmt: skip
    counter = needle.length_counter(enc)
    assert counter.tokenizer is enc.tokenizer
    ((suite, _),) = parse_suites("needle:passkey")
    records = suite.evaluate(enc, "passkey", EvalContext(limit=5, options={"needle_lengths": "64,96"}))
    assert [r.variant for r in records] == ["len-64", "len-96", "len-mean"]
    for rec, length in zip(records, (64, 96)):
        assert rec.info["length_tokenizer"] == f"{enc.name} tokenizer"
        assert length - 16 < rec.info["tokens_mean"] <= length  # filled to the length, in the model's tokens
    data = needle.build("passkey", 96, seed=0, limit=5, lengths=counter)
    assert max(counter.count(data.docs)) <= 96 and data.tokens == counter.count(data.docs)


def test_bm25_without_the_packaged_model_counts_words(no_packaged_minilm):
    from bench.evaluate.lexical import BM25Model

    ((suite, _),) = parse_suites("needle:passkey")
    records = suite.evaluate(BM25Model(), "passkey", EvalContext(limit=5, options={"needle_lengths": "60"}))
    assert records[0].info["length_tokenizer"] == needle.WORDS
    words = needle.LengthCounter(needle.word_tokenizer(), needle.WORDS)
    data = needle.build("passkey", 60, seed=0, limit=5, lengths=words)
    assert 45 < min(words.count(data.docs)) and max(words.count(data.docs)) <= 60
    assert records[0].value > 50  # BM25 finds the name's document in most of them
