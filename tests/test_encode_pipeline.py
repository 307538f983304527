"""The encoding pipeline (issue 26): one padding function, the tokenizer backend's batch call, the next chunk
tokenised on a second thread while this one runs. Speed is measured in benchmarks/pipeline.py, not here."""

import random
import threading

import numpy as np
import pytest

from bench.encode.batching import pad_batch
from bench.encode.encoder import Encoder
from bench.encode.inputs import model_inputs

pytestmark = pytest.mark.usefixtures("one_thread")

WORDS = "cat dog sun tree car boat bird fish rain snow road hill lamp door book cup".split()


def sentences(n, seed=0, lo=1, hi=30):
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi))) for _ in range(n)]


def hand_padded(rows, pad_id, width=None):
    width = width or max(len(r) for r in rows)
    ids = [[*r, *[pad_id] * (width - len(r))] for r in rows]
    mask = [[1] * len(r) + [0] * (width - len(r)) for r in rows]
    return np.array(ids), np.array(mask)


def test_pad_batch_equals_a_row_by_row_fill():
    rows = [[101, 5, 6, 102], [101, 102], [101, 7, 8, 9, 10, 102], [3]]
    ids, mask = pad_batch(rows, pad_id=0)
    want_ids, want_mask = hand_padded(rows, 0)
    np.testing.assert_array_equal(ids, want_ids)
    np.testing.assert_array_equal(mask, want_mask)
    assert ids.dtype == mask.dtype == np.int64
    ids, mask = pad_batch([np.array([1, 2]), [3]], pad_id=-100, width=4)  # labels are padded with -100
    np.testing.assert_array_equal(ids, [[1, 2, -100, -100], [3, -100, -100, -100]])
    np.testing.assert_array_equal(mask, [[1, 1, 0, 0], [1, 0, 0, 0]])
    with pytest.raises(ValueError, match="width 1"):
        pad_batch(rows, 0, width=1)


def test_training_pad_rows_is_the_shared_padding():
    from methods.pairs import pad_rows

    rows = [[101, 1, 2, 102], [101, 102]]
    ids, mask = pad_rows(rows, 0)
    np.testing.assert_array_equal(ids.numpy(), pad_batch(rows, 0)[0])
    np.testing.assert_array_equal(mask.numpy(), pad_batch(rows, 0)[1])


def test_model_inputs_equal_the_transformers_call(reference_dir):
    """The backend's batch call gives the ids (and cut flags) of `tokenizer(texts, truncation=True, max_length=...)`."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(reference_dir)
    texts = sentences(40, seed=3, hi=40) + ["", "   ", "Ünïcödé text, with punctuation!", "a " * 300]
    for max_len in (8, 16, 256):
        got = model_inputs(texts, tok, max_len)
        want = tok(texts, truncation=True, max_length=max_len)["input_ids"]
        longer = tok(texts, truncation=True, max_length=max_len + 1)["input_ids"]
        assert got.ids == [list(x) for x in want]
        assert list(got.truncated) == [len(x) > max_len for x in longer]
    assert tok(["x"], truncation=True, max_length=4)["input_ids"] == [[101, 1060, 102]]  # the wrapper is unchanged


def load(tiny_model_dir, tmp_path, **kw):
    kw = {"max_len": 16, "batch_size": 4, "show_progress": False, "backend": "torch", "cache_dir": tmp_path / "cache", **kw}
    return Encoder.load(str(tiny_model_dir), **kw)


def test_prefetched_chunks_give_the_one_chunk_embeddings_and_tokenise_ahead(tiny_model_dir, tmp_path, monkeypatch):
    texts = sentences(70, seed=5)
    texts += texts[:6]  # repeats inside and across chunks
    whole = load(tiny_model_dir, tmp_path, use_cache=False)
    whole.chunk_size = whole.first_chunk_size = 1000
    reference = whole.encode(texts)

    events = []
    second_chunk_started = threading.Event()
    tokenize, forward = Encoder.tokenize, Encoder._forward

    def tokenizing(self, t):
        events.append(("tokenize", threading.current_thread().name))
        if len(events) == 2:
            second_chunk_started.set()
        return tokenize(self, t)

    def forwarding(self, batch):
        # the first chunk's batches run only once the second chunk's tokenisation has begun: they overlap
        events.append(("forward", second_chunk_started.wait(timeout=30)))
        return forward(self, batch)

    monkeypatch.setattr(Encoder, "tokenize", tokenizing)
    monkeypatch.setattr(Encoder, "_forward", forwarding)
    enc = load(tiny_model_dir, tmp_path)
    enc.first_chunk_size, enc.chunk_size = 10, 25  # chunks of 10, 25, 25, 16
    out = enc.encode(texts)
    np.testing.assert_allclose(out, reference, atol=1e-6)
    tokenised = [name for kind, name in events if kind == "tokenize"]
    assert len(tokenised) == 4
    assert all(name.startswith("lenbench-tokenize") for name in tokenised)  # on the prefetch thread
    assert all(seen for kind, seen in events if kind == "forward")
    assert enc.texts_encoded == len(set(texts))

    again = load(tiny_model_dir, tmp_path)  # all cache hits: nothing tokenised ahead, nothing run
    again.first_chunk_size, again.chunk_size = 10, 25
    events.clear()
    np.testing.assert_array_equal(again.encode(texts), out)
    assert events == []


def test_prefetch_off_is_the_same_on_one_thread(tiny_model_dir, tmp_path):
    texts = sentences(30, seed=6)
    on = load(tiny_model_dir, tmp_path, use_cache=False)
    off = load(tiny_model_dir, tmp_path, use_cache=False)
    on.chunk_size = off.chunk_size = 8
    off.prefetch = False
    np.testing.assert_allclose(on.encode(texts), off.encode(texts), atol=1e-6)


def test_token_embeddings_drop_padding_on_both_backends(tiny_model_dir, tmp_path):
    texts = ["cat", "cat dog sun tree car boat", "bird fish"]
    torch_enc = load(tiny_model_dir, tmp_path, use_cache=False)
    vectors = torch_enc.token_embeddings(texts)
    ids = torch_enc.tokenize(texts).ids
    assert [v.shape[0] for v in vectors] == [len(x) for x in ids]
    alone = [torch_enc.token_embeddings([t])[0] for t in texts]  # no padding at all
    for got, want in zip(vectors, alone):
        np.testing.assert_allclose(got, want, atol=1e-5)


def test_overlapped_commits_give_the_same_vectors_and_cache(tiny_model_dir, tmp_path, monkeypatch):
    """An accelerator's pipeline (`overlap_commits`) run on the CPU: chunk k is committed only after chunk k+1's
    batches ran; the vectors, the cache and the counts are those of committing each chunk at once."""
    from bench.encode import pipeline

    texts = sentences(70, seed=7)
    texts += texts[:6]  # repeats inside and across chunks
    at_once = load(tiny_model_dir, tmp_path / "a")
    at_once.first_chunk_size, at_once.chunk_size = 10, 25
    reference = at_once.encode(texts)

    events = []
    commit, forward = pipeline.commit_chunk, Encoder._forward
    monkeypatch.setattr(pipeline, "commit_chunk", lambda enc, run, *a: events.append(("commit", int(run.chunk.rows[0]))) or commit(enc, run, *a))
    monkeypatch.setattr(Encoder, "_forward", lambda self, batch: events.append(("forward", None)) or forward(self, batch))
    overlapped = load(tiny_model_dir, tmp_path / "b")
    overlapped.first_chunk_size, overlapped.chunk_size = 10, 25  # chunks at rows 0, 10, 35, 60
    overlapped.overlap_commits = True
    out = overlapped.encode(texts)
    np.testing.assert_allclose(out, reference, atol=1e-6)
    assert overlapped.texts_encoded == at_once.texts_encoded
    commits = [i for i, (kind, _) in enumerate(events) if kind == "commit"]
    assert [events[i][1] for i in commits] == [0, 10, 35, 60]
    # chunk 0 (10 texts, at most 4 a batch: 3 batches) is committed only after chunk 1's batches ran
    assert sum(kind == "forward" for kind, _ in events[: commits[0]]) > 3
    monkeypatch.undo()
    again = load(tiny_model_dir, tmp_path / "b")  # everything committed: all cache hits
    np.testing.assert_array_equal(again.encode(texts), out)
    assert again.texts_encoded == 0


def test_an_interrupted_overlapped_encode_commits_what_ran(tiny_model_dir, tmp_path, monkeypatch):
    texts = sentences(60, seed=1)
    distinct = len({tuple(ids) for ids in load(tiny_model_dir, tmp_path).tokenize(texts).ids})
    first = load(tiny_model_dir, tmp_path)
    first.chunk_size, first.overlap_commits = 16, True
    calls = {"n": 0}
    original = Encoder._forward

    def dies_on_the_7th_batch(self, batch):
        calls["n"] += 1
        if calls["n"] == 7:  # in the second chunk: the first has run and waits to be committed
            raise KeyboardInterrupt
        return original(self, batch)

    monkeypatch.setattr(Encoder, "_forward", dies_on_the_7th_batch)
    with pytest.raises(KeyboardInterrupt):
        first.encode(texts)
    monkeypatch.setattr(Encoder, "_forward", original)
    again = load(tiny_model_dir, tmp_path)
    again.chunk_size = 16
    again.encode(texts)
    assert first.texts_encoded > 16 and first.texts_encoded + again.texts_encoded == distinct  # nothing twice
