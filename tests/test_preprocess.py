"""Per-corpus preprocessing and the batch loader: sentence splits and token ids made once (in a process pool) and
read back from disk, keyed by the corpus and the splitter / tokenizer; batches identical whatever the number of
loader workers, and a loader restarted from a saved position continues the same stream."""

from __future__ import annotations

import random

import pytest
import torch

from bench.data import sentence_cache, sentences, token_cache
from bench.data.sentences import split_sentences
from bench.train.loader import BatchLoader, Position, draw_rng
from methods import get_method

DOCS = [
    "Dr. Smith went to Washington. He arrived at 5 p.m. on Monday! Was it late? Yes.",
    "The river flows through the old town. Its bridges were built in the twelfth century by local masons.",
    "One sentence only",
    "",
] + [f"Document {i} talks about topic {i % 7}. It has a second sentence with {i} words. And a third one." for i in range(80)]


@pytest.fixture(scope="module")
def tok(reference_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(reference_dir)


@pytest.fixture(autouse=True)
def _no_installed_splits():
    sentences.forget()
    yield
    sentences.forget()


def test_sentence_splits_made_in_a_pool_equal_the_splitter_and_come_back_from_disk(monkeypatch):
    expected = [tuple(sentences.split_normalised(" ".join(d.split()))) for d in DOCS]
    first = sentence_cache.prepare(DOCS, workers=2)
    assert not first.cached and first.path is not None and first.path.is_file() and first.texts == len(DOCS)
    assert [tuple(split_sentences(d)) for d in DOCS] == expected
    assert expected[0] == ("Dr. Smith went to Washington.", "He arrived at 5 p.m. on Monday!", "Was it late?", "Yes.")

    sentences.forget()
    # The second time nothing is split: the splitter is not called at all.
    monkeypatch.setattr(sentences, "split_normalised", lambda text: pytest.fail("split again"))
    monkeypatch.setattr(sentences, "_split_cached", lambda text: pytest.fail("split again"))
    again = sentence_cache.prepare(DOCS)
    assert again.cached and again.path == first.path
    assert [tuple(split_sentences(d)) for d in DOCS] == expected


def _prepared_while_another_holds_the_folder(folder, holder_writes, prepare):
    """Run `prepare` in a thread while this thread holds the cache folder's lock (as a second process would), write
    the file as that process would, release, and return what `prepare` returned."""
    import threading

    from bench.runtime.writes import one_at_a_time

    out: dict = {}
    with one_at_a_time(folder, "the test's file"):
        worker = threading.Thread(target=lambda: out.setdefault("result", prepare()))
        worker.start()
        worker.join(0.5)
        assert worker.is_alive(), "prepare did not wait for the process preparing the same file"
        holder_writes()
    worker.join(30)
    assert not worker.is_alive()
    return out["result"]


def test_runs_started_side_by_side_split_a_corpus_once(monkeypatch):
    """Three seeds of one method start together: the first splits the corpus, the others wait and read its file
    (they used to split it too, side by side: 3 x 38 s at the start of the paper-scale claim on a GPU)."""
    path = sentence_cache.cache_path(sentence_cache.corpus_key([" ".join(d.split()) for d in DOCS]))
    expected = [tuple(sentences.split_normalised(" ".join(d.split()))) for d in DOCS]
    monkeypatch.setattr(sentence_cache, "split_all", lambda *a, **k: pytest.fail("split again"))
    done = _prepared_while_another_holds_the_folder(path.parent, lambda: sentence_cache._write(path, expected),
                                                    lambda: sentence_cache.prepare(DOCS, workers=1))
    assert done.cached and done.path == path
    assert [tuple(split_sentences(d)) for d in DOCS] == expected


def test_runs_started_side_by_side_tokenise_a_corpus_once(tok, monkeypatch):
    strings = [d for d in DOCS if d]
    ident = token_cache.tokenizer_id(tok)
    path = token_cache.cache_dir() / token_cache.FOLDER / f"{token_cache.strings_key(ident, 12, strings)}.npz"
    expected = [tok(s, add_special_tokens=False)["input_ids"][:12] for s in strings]
    monkeypatch.setattr(token_cache.pools, "parallel_map", lambda *a, **k: pytest.fail("tokenised again"))
    table, cached = _prepared_while_another_holds_the_folder(
        path.parent, lambda: token_cache._write(path, token_cache.TokenTable.from_lists(strings, expected)),
        lambda: token_cache.bodies(strings, tok, 12, workers=1))
    assert cached and [table[s] for s in strings] == expected


def test_sentence_cache_key_follows_the_corpus_and_the_splitter(monkeypatch):
    base = sentence_cache.corpus_key(DOCS)
    assert sentence_cache.corpus_key(DOCS[:-1]) != base  # another corpus
    assert sentence_cache.corpus_key(list(reversed(DOCS))) != base  # the same texts in another order
    monkeypatch.setattr(sentences, "splitter_id", lambda: "pysbd-99.0-en")
    assert sentence_cache.corpus_key(DOCS) != base  # another splitter version never reuses these splits


def test_a_damaged_sentence_file_is_made_again():
    first = sentence_cache.prepare(DOCS, workers=1)
    first.path.write_text("only one line\n")
    sentences.forget()
    again = sentence_cache.prepare(DOCS, workers=1)
    assert not again.cached and len(again.path.read_text().split("\n")) == len(DOCS) + 1


def test_token_ids_cached_per_tokenizer_and_length_equal_the_tokenizer(tok):
    strings = [d for d in DOCS if d] * 2
    table, cached = token_cache.bodies(strings, tok, 12, workers=2)
    assert not cached and len(table) == len(strings) // 2  # each distinct string once
    expected = [tok(s, add_special_tokens=False)["input_ids"][:12] for s in strings]
    assert [table.get(s) for s in strings] == expected and table.get("not in the corpus") is None
    tok("anything", truncation=True, max_length=7, padding="max_length")  # per-call state the tokenizer keeps
    again, cached = token_cache.bodies(strings, tok, 12)
    assert cached and [again[s] for s in strings] == expected
    longer, cached = token_cache.bodies(strings, tok, 30)
    assert not cached and longer.get(strings[0]) == tok(strings[0], add_special_tokens=False)["input_ids"][:30]


@pytest.mark.parametrize("method", ["simcse", "laser3-self", "laser3-intra", "crop"])
def test_prepared_adapter_builds_the_same_batch_as_an_unprepared_one(tok, method):
    texts = DOCS + ["A sentence of well over one hundred characters that crop keeps, since it is neither too short nor "
                    f"too long for a chunk number {i}. " * 3 for i in range(10)]  # fmt: skip
    plain = get_method(method).build(tokenizer=tok, max_len=32, seed=0)
    prepared = get_method(method).build(tokenizer=tok, max_len=32, seed=0)
    report = prepared.prepare(texts, workers=1)
    assert report["tokens"]["strings"] > 0 and prepared.tokens.memo
    for seed in range(3):
        sample = texts[:8] + texts[-10:]
        a, b = plain.make_batch(sample, random.Random(seed)), prepared.make_batch(sample, random.Random(seed))
        assert a is not None and a.keys() == b.keys()
        assert all(torch.equal(a[k], b[k]) if torch.is_tensor(a[k]) else a[k] == b[k] for k in a)


def test_prepared_esimcse_builds_the_same_batch(tok):
    plain = get_method("esimcse").build(tokenizer=tok, max_len=16, seed=0)
    prepared = get_method("esimcse").build(tokenizer=tok, max_len=16, seed=0)
    assert prepared.prepare(DOCS, workers=1)["tokens"]["strings"] == len(DOCS) - 1  # the empty text is no string
    a, b = plain.make_batch(DOCS[:10], random.Random(3)), prepared.make_batch(DOCS[:10], random.Random(3))
    assert all(torch.equal(a[k], b[k]) if torch.is_tensor(a[k]) else a[k] == b[k] for k in a)
    assert a["anchor_input_ids"][0, 0] == tok.cls_token_id  # with the special tokens, as the tokenizer adds them


def _items(loader: BatchLoader, n: int) -> list:
    it = loader.batches()
    out = [next(it) for _ in range(n)]
    loader.close()
    return out


def _same(a: list, b: list) -> bool:
    for (da, ba), (db, bb) in zip(a, b, strict=True):
        if da != db or (ba is None) != (bb is None):
            return False
        if ba is not None and not all(torch.equal(ba[k], bb[k]) if torch.is_tensor(ba[k]) else ba[k] == bb[k] for k in ba):
            return False
    return True


def test_loader_batches_do_not_depend_on_the_number_of_workers(tok):
    adapter = get_method("laser3-intra").build(tokenizer=tok, max_len=32, seed=0)  # accepts() skips one-sentence texts
    inline = _items(BatchLoader(adapter, DOCS, batch_size=8, seed=5, workers=0), 12)
    assert all(len(set(d.text_ids)) == 8 and all(len(split_sentences(DOCS[i])) >= 2 for i in d.text_ids) for d, _ in inline)
    assert [d.number for d, _ in inline] == list(range(12)) and inline[-1][0].after.draw == 12
    for workers in (1, 2):
        assert _same(inline, _items(BatchLoader(adapter, DOCS, batch_size=8, seed=5, workers=workers), 12))
    other_seed = _items(BatchLoader(adapter, DOCS, batch_size=8, seed=6, workers=0), 12)
    assert not _same(inline, other_seed)


def test_loader_restarted_from_a_position_continues_the_same_stream(tok):
    adapter = get_method("crop").build(tokenizer=tok, max_len=32, seed=0)
    texts = [" ".join(f"Sentence {j} of document {i}, long enough (over one hundred characters) to be kept by the crop "
                      "method's sentence length filter." for j in range(3)) for i in range(40)]  # fmt: skip
    whole = _items(BatchLoader(adapter, texts, batch_size=4, seed=1, workers=0), 25)  # two passes over the corpus
    start: Position = whole[9][0].after
    assert start.draw == 10
    rest = _items(BatchLoader(adapter, texts, batch_size=4, seed=1, start=Position.from_state(start.state()), workers=2), 15)
    assert _same(whole[10:], rest)


class TorchDrawing:  # module level: loader workers get a pickled copy of the adapter (never a fork)
    name = "torch-drawing"

    def make_batch(self, texts, rng):
        return {"noise": torch.rand(3), "draw": rng.random()}


def test_make_batch_drawing_from_torch_gets_the_same_tensors_anywhere_and_leaves_training_rng_alone():
    torch.manual_seed(0)
    before = torch.get_rng_state()
    inline = _items(BatchLoader(TorchDrawing(), ["a", "b", "c"], batch_size=2, seed=0, workers=0), 4)
    assert torch.equal(torch.get_rng_state(), before)  # dropout's stream is untouched by batch building
    assert _same(inline, _items(BatchLoader(TorchDrawing(), ["a", "b", "c"], batch_size=2, seed=0, workers=2), 4))
    own = draw_rng(0, 1)
    own.getrandbits(63)  # the loader seeds torch from the draw's rng first
    assert inline[1][1]["draw"] == own.random()  # draw 1's rng is its own, whatever came before
