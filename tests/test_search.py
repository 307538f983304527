"""Exact top-k search (bench.evaluate.search): blocks of any size give the full sort's ranking, ties (at the k-th place
too) go to the lowest document index, the torch path (the accelerator's, run here on CPU tensors, float16 matrices)
ranks as the numpy path does, and faiss's flat inner-product index agrees where faiss is installed."""

from __future__ import annotations

import numpy as np
import pytest

from bench.evaluate import search
from bench.evaluate.search import exact_search, search_torch


def full_ranking(q: np.ndarray, d: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ranking rule written plainly: every score, a stable sort by score descending (ties by index)."""
    full = q.astype(np.float32) @ d.astype(np.float32).T
    idx = np.argsort(-full, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(full, idx, axis=1), idx


def tied_embeddings(n_q: int, n_d: int, dim: int = 6, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Small whole numbers over 4: exact in float16, every dot product exact in float32 (so every path computes the
    same scores to the bit), with many exact ties and duplicate documents."""
    rng = np.random.default_rng(seed)
    q = rng.integers(-2, 3, size=(n_q, dim)).astype(np.float32) / 4
    d = rng.integers(-2, 3, size=(n_d, dim)).astype(np.float32) / 4
    d[n_d // 2 :: 7] = d[1]  # duplicates of one document, spread over blocks
    return q, d


@pytest.mark.parametrize("blocks", [(3, 10), (2, 7), (1024, 50_000)])
def test_ties_go_to_the_lowest_index_in_any_blocks(monkeypatch, blocks):
    q, d = tied_embeddings(9, 131)
    monkeypatch.setattr(search, "QUERY_BLOCK", blocks[0])
    monkeypatch.setattr(search, "DOC_BLOCK", blocks[1])
    for k in (1, 5, 40, 200):
        want_s, want_i = full_ranking(q, d, k)
        scores, idx = exact_search(q, d, k)
        np.testing.assert_array_equal(idx, want_i)
        np.testing.assert_array_equal(scores, want_s)
    # the k-th place falls inside a run of ties here: a plain top-k may keep any of them
    s, _ = full_ranking(q, d, 131)
    assert any(s[r, 4] == s[r, 5] for r in range(len(q)))


@pytest.mark.parametrize("blocks", [(4, 16), (2048, 131_072)])
def test_the_torch_path_ranks_as_the_numpy_path(blocks):
    pytest.importorskip("torch")
    q, d = tied_embeddings(11, 157, seed=1)
    for k in (1, 10, 60, 157):
        want = exact_search(q, d, k)
        got = search_torch(q, d, k, "cpu", query_block=blocks[0], doc_block=blocks[1])
        np.testing.assert_array_equal(got[1], want[1])
        np.testing.assert_array_equal(got[0], want[0])
    # float16 documents (a fp16 embedding matrix, on disk too) and float32 throughout rank the same
    got = search_torch(q, d.astype(np.float16), 20, "cpu", half=False, query_block=3, doc_block=20)
    np.testing.assert_array_equal(got[1], exact_search(q, d, 20)[1])


def test_float16_rounding_moves_only_near_ties():
    """Random unit vectors (float32): the float16 torch path keeps every pair of documents whose float32 scores
    differ by more than the rounding bound in the same order, and its scores stay within that bound."""
    pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    q = rng.standard_normal((6, 32)).astype(np.float32)
    d = rng.standard_normal((300, 32)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    want_s, want_i = exact_search(q, d, 50)
    got_s, got_i = search_torch(q, d, 50, "cpu", query_block=4, doc_block=64)
    full = q @ d.T
    np.testing.assert_allclose(got_s, np.take_along_axis(full, got_i, axis=1), atol=2e-3)
    for row in range(len(q)):
        for a, b in zip(got_i[row], got_i[row][1:]):  # consecutive in the float16 ranking
            assert full[row, a] >= full[row, b] - 2e-3
    assert np.mean(got_i == want_i) > 0.9  # and most places are simply the same


def test_values_beyond_float16_are_scored_in_float32():
    pytest.importorskip("torch")
    q, d = tied_embeddings(3, 40, seed=3)
    d[7] *= 1e5  # an unnormalised document past float16's range: its block runs in float32
    np.testing.assert_array_equal(search_torch(q, d, 10, "cpu", doc_block=8)[1], exact_search(q, d, 10)[1])


def test_a_memmap_corpus_is_read_block_by_block(tmp_path, monkeypatch):
    q, d = tied_embeddings(4, 90, seed=4)
    mm = np.memmap(tmp_path / "d.bin", dtype=np.float16, mode="w+", shape=d.shape)
    mm[:] = d
    mm.flush()
    ro = np.memmap(tmp_path / "d.bin", dtype=np.float16, mode="r", shape=d.shape)
    read = []
    real = search.np.ascontiguousarray

    def spy(a, *args, **kwargs):  # noqa: ANN001, ANN202
        read.append(len(a))
        return real(a, *args, **kwargs)

    monkeypatch.setattr(search, "DOC_BLOCK", 25)
    monkeypatch.setattr(search.np, "ascontiguousarray", spy)
    _, idx = exact_search(q, ro, 15)
    monkeypatch.undo()
    np.testing.assert_array_equal(idx, full_ranking(q, d, 15)[1])
    assert max(read) == 25 and sum(n for n in read if n != len(q)) == len(d)  # each document block read once
    np.testing.assert_array_equal(search_torch(q, ro, 15, "cpu", doc_block=25)[1], idx)


def test_rankings_agree_with_faiss_flat_index():
    faiss = pytest.importorskip("faiss")
    rng = np.random.default_rng(5)
    # whole numbers: every score exact in float32, in faiss's BLAS and in ours, so only tie order could differ
    q = rng.integers(-6, 7, size=(25, 16)).astype(np.float32)
    d = rng.integers(-6, 7, size=(700, 16)).astype(np.float32)
    index = faiss.IndexFlatIP(d.shape[1])
    index.add(d)
    k = 30
    f_scores, f_idx = index.search(q, k)
    scores, idx = exact_search(q, d, k)
    np.testing.assert_array_equal(scores, f_scores)
    full = q @ d.T
    for row in range(len(q)):
        edge = scores[row, -1]
        above = set(idx[row][scores[row] > edge])
        assert above == set(f_idx[row][f_scores[row] > edge])  # the same documents above the k-th score
        tied = set(np.flatnonzero(full[row] == edge))
        assert set(f_idx[row][f_scores[row] == edge]) <= tied  # faiss keeps some of the ties at the edge,
        assert list(idx[row][scores[row] == edge]) == sorted(tied)[: k - len(above)]  # ours the lowest indices
    torch_scores, torch_idx = search_torch(q / 8, d / 8, k, "cpu", query_block=7, doc_block=100)  # exact in float16
    np.testing.assert_array_equal(torch_idx, idx)
    np.testing.assert_array_equal(torch_scores * 64, scores)


@pytest.mark.parametrize("world", [1, 3, 4])
def test_a_corpus_sharded_over_ranks_ranks_as_one_process(monkeypatch, world):
    """bench.evaluate.sharded_search with `world` ranks simulated in turn: each rank encodes only its contiguous share
    (read through a Window, never the whole corpus), and the merged top k equal one process's, ties included."""
    from bench.evaluate import sharded_search as sharded
    from bench.runtime import distributed

    q, d = tied_embeddings(7, 50, seed=6)
    docs = [f"d{i}" for i in range(len(d))]

    class Inner:
        device_name = "cpu"

        def __init__(self):
            self.asked = []

        def encode(self, texts, desc=""):  # noqa: ANN001, ANN202
            self.asked.append(len(texts))
            rows = [int(t[1:]) for t in texts[0 : len(texts)]]
            return d[rows]

    class Model:
        inner = Inner()

    parts = []
    for r in range(world):
        monkeypatch.setattr(distributed, "shard_bounds", lambda n, r=r: (n * r // world, n * (r + 1) // world))
        monkeypatch.setattr(distributed, "all_gather_object", lambda obj: parts.append(obj) or [obj])
        sharded.sharded_search(Model(), q, docs, 12, "test")
    assert Model.inner.asked == [len(docs) * (r + 1) // world - len(docs) * r // world for r in range(world)]
    monkeypatch.setattr(distributed, "all_gather_object", lambda obj: list(parts))
    scores, idx = sharded.sharded_search(Model(), q, docs, 12, "test")
    want_s, want_i = full_ranking(q, d, 12)
    np.testing.assert_array_equal(idx, want_i)
    np.testing.assert_array_equal(scores, want_s)
