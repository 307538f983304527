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


def cache_rows(enc):
    """Every row of an encoder's embedding cache file: (emb rows, alias rows), sorted."""
    import sqlite3

    with sqlite3.connect(enc.cache.path) as conn:
        emb = sorted((bytes(k), bytes(v)) for k, v in conn.execute("SELECT key, vec FROM emb"))
        alias = sorted((bytes(t), bytes(k)) for t, k in conn.execute("SELECT text, key FROM alias"))
    return emb, alias


def slow_commits(monkeypatch, events):
    """Commits that take a while (so the next chunk looks its inputs up while one is in flight), recorded as
    (first row, thread name)."""
    import time

    from bench.encode import commits

    commit = commits.commit_chunk

    def slow(enc, run, *a):
        time.sleep(0.05)
        commit(enc, run, *a)
        events.append((int(run.chunk.rows[0]), threading.current_thread().name))

    monkeypatch.setattr(commits, "commit_chunk", slow)


def chunked(enc, background):
    enc.first_chunk_size, enc.chunk_size, enc.background_commits = 10, 25, background  # chunks at rows 0, 10, 35, 60
    return enc


@pytest.mark.parametrize("dtype", [None, "fp16"])
def test_background_commits_give_the_vectors_and_cache_rows_of_committing_at_once(tiny_model_dir, tmp_path, monkeypatch,
                                                                                  dtype):  # fmt: skip
    """Each chunk committed on the commit thread, in order, while the next one runs: the same vectors, the same
    texts encoded and the same cache rows as committing each chunk on the main thread as soon as it ran, with
    texts repeated inside a chunk, in the next chunk (its commit still in flight) and far after."""
    texts = sentences(70, seed=7)
    texts[12], texts[40], texts[41] = texts[3], texts[20], texts[30]  # in the next chunk; rows 0-9 -> 10-34 -> 35-59
    texts += texts[:6] + texts[60:63]  # far after, and inside the last chunk
    at_once = chunked(load(tiny_model_dir, tmp_path / "a"), background=False)
    reference = at_once.encode(texts, dtype=dtype)
    events = []
    slow_commits(monkeypatch, events)
    behind = chunked(load(tiny_model_dir, tmp_path / "b"), background=True)
    out = behind.encode(texts, dtype=dtype)
    np.testing.assert_array_equal(out, reference)
    assert behind.texts_encoded == at_once.texts_encoded == len(set(texts))
    assert cache_rows(behind) == cache_rows(at_once)
    assert events == [(row, name) for row, name in events if name.startswith("lenbench-commit")]
    assert [row for row, _ in events] == [0, 10, 35, 60]
    monkeypatch.undo()
    again = load(tiny_model_dir, tmp_path / "b")  # everything committed: all cache hits
    np.testing.assert_array_equal(again.encode(texts, dtype=dtype), out)
    assert again.texts_encoded == 0


def test_background_commits_into_the_cache_only_and_without_a_cache_match_the_main_thread(tiny_model_dir, tmp_path,
                                                                                          monkeypatch):  # fmt: skip
    texts = sentences(70, seed=8)
    texts[15], texts[50] = texts[2], texts[30]
    texts += texts[:5]
    slow_commits(monkeypatch, [])
    at_once = chunked(load(tiny_model_dir, tmp_path / "a"), background=False)
    behind = chunked(load(tiny_model_dir, tmp_path / "b"), background=True)
    assert behind.encode_into_cache(texts) == at_once.encode_into_cache(texts) == len(set(texts))
    assert cache_rows(behind) == cache_rows(at_once)
    no_cache = [chunked(load(tiny_model_dir, tmp_path / "c", use_cache=False), background=b) for b in (False, True)]
    plain, threaded = (enc.encode(texts) for enc in no_cache)
    np.testing.assert_array_equal(threaded, plain)
    assert no_cache[0].texts_encoded == no_cache[1].texts_encoded > len(set(texts))  # no cache: chunks encode repeats


def test_background_commits_rerun_non_finite_vectors_at_fp32_under_the_backend_lock(tiny_model_dir, tmp_path):
    """A reduced-precision vector that is not finite runs again at fp32 on the commit thread, never while the main
    thread runs a batch: the same vectors and counts as on the main thread."""
    texts = sentences(70, seed=9)
    results = []
    for background in (False, True):
        enc = chunked(load(tiny_model_dir, tmp_path / str(background), backend="torch", precision="bf16"), background)
        real, real_fp32 = enc.engine.pooled, enc.engine.pooled_fp32
        running, overlaps, calls = [], [], []

        def overflowing(batch, real=real, running=running, calls=calls):  # noqa: ANN001, ANN202
            running.append(1)
            try:
                out = real(batch).copy()
                calls.append(1)
                if len(calls) % 3 == 0:
                    out[0, 1] = np.inf  # every third batch's first row overflows
                return out
            finally:
                running.pop()

        def rerun(batch, real_fp32=real_fp32, running=running, overlaps=overlaps):  # noqa: ANN001, ANN202
            overlaps.append(bool(running))
            import time

            time.sleep(0.02)  # long enough for the main thread to start a batch, were it not held
            return real_fp32(batch)

        enc.engine.pooled, enc.engine.pooled_fp32 = overflowing, rerun
        results.append((enc.encode(texts), enc.fp32_reruns, overlaps))
    (plain, plain_reruns, _), (threaded, reruns, overlaps) = results
    assert np.isfinite(threaded).all() and reruns == plain_reruns >= 3
    np.testing.assert_array_equal(threaded, plain)
    assert overlaps and not any(overlaps)


def test_an_interrupted_background_encode_commits_what_ran(tiny_model_dir, tmp_path, monkeypatch):
    texts = sentences(60, seed=1)
    distinct = len({tuple(ids) for ids in load(tiny_model_dir, tmp_path).tokenize(texts).ids})
    first = load(tiny_model_dir, tmp_path)
    first.chunk_size, first.background_commits = 16, True
    events = []
    slow_commits(monkeypatch, events)
    calls = {"n": 0}
    original = Encoder._forward

    def dies_on_the_7th_batch(self, batch):
        calls["n"] += 1
        if calls["n"] == 7:  # in the second chunk: the first has run and is being committed
            raise KeyboardInterrupt
        return original(self, batch)

    monkeypatch.setattr(Encoder, "_forward", dies_on_the_7th_batch)
    with pytest.raises(KeyboardInterrupt):
        first.encode(texts)
    assert [row for row, _ in events] == [0, 16]  # the first chunk, and what ran of the second
    monkeypatch.setattr(Encoder, "_forward", original)
    again = load(tiny_model_dir, tmp_path)
    again.chunk_size = 16
    again.encode(texts)
    assert first.texts_encoded > 16 and first.texts_encoded + again.texts_encoded == distinct  # nothing twice


@pytest.mark.parametrize("failing_chunk", [1, 3])
def test_an_exception_in_the_commit_thread_surfaces_and_later_chunks_that_ran_are_committed(tiny_model_dir, tmp_path,
                                                                                            monkeypatch, failing_chunk):  # fmt: skip
    """A commit that fails raises in the main thread when the next chunk is handed over (or when the call ends,
    for the last chunk); the chunk that had run meanwhile is still committed."""
    from bench.encode import commits

    texts = sentences(70, seed=10)
    enc = chunked(load(tiny_model_dir, tmp_path), background=True)
    commit, seen = commits.commit_chunk, []

    def breaks(enc_, run, *a):
        seen.append(int(run.chunk.rows[0]))
        if len(seen) == failing_chunk + 1:
            raise RuntimeError("the matrix is gone")
        commit(enc_, run, *a)

    monkeypatch.setattr(commits, "commit_chunk", breaks)
    with pytest.raises(RuntimeError, match="the matrix is gone"):
        enc.encode(texts)
    assert seen == [0, 10, 35, 60][: failing_chunk + 2]  # the one after the failure ran and was committed
    monkeypatch.undo()
    again = chunked(load(tiny_model_dir, tmp_path), background=True)
    again.encode(texts)
    bounds = [(0, 10), (10, 35), (35, 60), (60, 70)]
    lost = [bounds[failing_chunk], *bounds[failing_chunk + 2 :]]  # the failed chunk, and those that never ran
    assert again.texts_encoded == len({t for a, b in lost for t in texts[a:b]})
