"""Streaming encode, the token-id cache key, memmap/fp16 matrices, the ONNX backend, lazy start-up, batch attacks
and one-pass SimCSE (issue 10). Speed and memory are measured in benchmarks/, not here."""

import json
import random
import subprocess
import sys

import numpy as np
import pytest

from bench.encode.inputs import model_inputs
from bench.evaluate.attacks import attack_batch, attack_texts, elongate_random, elongate_within
from bench.encode.encoder import Encoder
from bench.evaluate.suites.base import EvalContext
from bench.evaluate.suites.retrieval import exact_search, score_retrieval

pytestmark = pytest.mark.usefixtures("one_thread")

WORDS = "cat dog sun tree car boat bird fish rain snow road hill lamp door book cup".split()


def sentences(n, seed=0, lo=2, hi=12):
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi))) for _ in range(n)]


def load(tiny_model_dir, tmp_path, **kw):
    kw = {"max_len": 16, "batch_size": 4, "show_progress": False, "backend": "torch", "cache_dir": tmp_path / "cache", **kw}
    return Encoder.load(str(tiny_model_dir), **kw)


# ----------------------------------------------------------------------------------- streaming + resume
def test_killed_chunked_encode_resumes_without_encoding_any_text_twice(tiny_model_dir, tmp_path, monkeypatch):
    texts = sentences(60, seed=1)
    texts += texts[:10]  # repeated texts are one model input
    distinct = len({tuple(ids) for ids in load(tiny_model_dir, tmp_path).tokenize(texts).ids})
    reference = load(tiny_model_dir, tmp_path, use_cache=False).encode(texts)

    first = load(tiny_model_dir, tmp_path)
    first.chunk_size = 16
    calls = {"n": 0}
    original = Encoder._forward

    def dies_on_the_7th_batch(self, batch):
        calls["n"] += 1
        if calls["n"] == 7:  # mid-way through the second chunk
            raise KeyboardInterrupt
        return original(self, batch)

    monkeypatch.setattr(Encoder, "_forward", dies_on_the_7th_batch)
    with pytest.raises(KeyboardInterrupt):
        first.encode(texts)
    assert 16 < first.texts_encoded < distinct  # the first chunk and part of the second were committed
    monkeypatch.setattr(Encoder, "_forward", original)

    again = load(tiny_model_dir, tmp_path)  # a new process: only the cache survives
    again.chunk_size = 16
    out = again.encode(texts)
    assert first.texts_encoded + again.texts_encoded == distinct  # nothing encoded twice
    np.testing.assert_allclose(out, reference, atol=1e-6)
    np.testing.assert_array_equal(out[60:], out[:10])
    assert load(tiny_model_dir, tmp_path).encode_into_cache(texts) == 0


def test_an_attacked_text_cut_to_its_clean_input_is_a_cache_hit(tiny_model_dir, tmp_path):
    enc = load(tiny_model_dir, tmp_path)
    long_text = " ".join(WORDS * 3)  # 48 words: longer than max_len 16
    short_text = "cat dog"
    clean = enc.encode([long_text, short_text])
    assert enc.texts_encoded == 2
    attacked = attack_texts([long_text, short_text], "2", enc.tokenizer, enc.max_len)
    assert attacked[0] != long_text and attacked[1] == "cat dog cat dog"
    again = enc.encode(attacked)
    assert enc.texts_encoded == 3  # only the short text's input changed
    np.testing.assert_array_equal(again[0], clean[0])
    assert not np.allclose(again[1], clean[1])
    fresh = load(tiny_model_dir, tmp_path)  # the alias table: a seen text needs no tokenizer, a seen input no model
    fresh.encode(attacked + [long_text])
    assert fresh.texts_encoded == 0 and not fresh.model_loaded and fresh._tokenizer is None


def test_memmap_and_in_ram_matrices_give_identical_scores(tiny_model_dir, tmp_path):
    root = tmp_path / "data" / "beir" / "toy"
    docs = sentences(40, seed=3, lo=3, hi=20)
    write_toy_beir(root, docs, sentences(6, seed=4))
    ctx = EvalContext(data_dir=str(tmp_path / "data"), attacked=True, elong=["2"])
    from bench.data.beir import read_beir

    data = read_beir(root, name="toy")
    in_ram = load(tiny_model_dir, tmp_path, use_cache=False)
    on_disk = load(tiny_model_dir, tmp_path, use_cache=False)
    on_disk.memmap_bytes = 0
    assert isinstance(on_disk.encode(docs), np.memmap) and not isinstance(in_ram.encode(docs), np.memmap)
    ram = score_retrieval(in_ram, data, "toy", ctx, "beir")
    disk = score_retrieval(on_disk, data, "toy", ctx, "beir")
    assert [(r.variant, r.metric, r.value, r.items.values) for r in ram] == [(r.variant, r.metric, r.value, r.items.values) for r in disk]
    half = load(tiny_model_dir, tmp_path, use_cache=False, emb_dtype="fp16")
    assert half.encode(docs).dtype == np.float16
    for a, b in zip(ram, score_retrieval(half, data, "toy", ctx, "beir")):
        assert a.value == pytest.approx(b.value, abs=5.0)  # fp16 rounding may swap near-ties, nothing more


def test_blocked_search_of_a_float16_memmap_equals_a_full_sort(tmp_path, monkeypatch):
    import bench.evaluate.search as search

    rng = np.random.default_rng(0)
    docs = rng.standard_normal((57, 8)).astype(np.float16)
    mm = np.memmap(tmp_path / "m.bin", dtype=np.float16, mode="w+", shape=docs.shape)
    mm[:] = docs
    queries = rng.standard_normal((5, 8)).astype(np.float32)
    monkeypatch.setattr(search, "DOC_BLOCK", 10)
    monkeypatch.setattr(search, "QUERY_BLOCK", 2)
    scores, idx = exact_search(queries, mm, 12)
    full = queries @ docs.astype(np.float32).T
    np.testing.assert_array_equal(idx, np.argsort(-full, axis=1, kind="stable")[:, :12])
    np.testing.assert_allclose(scores, np.take_along_axis(full, idx, axis=1), rtol=1e-6)


# ----------------------------------------------------------------------------------------- backends
def test_onnx_backend_matches_torch(tiny_model_dir, tmp_path):
    pytest.importorskip("onnxruntime")
    texts = sentences(30, seed=5, lo=1, hi=30)  # lengths 1..30 tokens, cut at 16: padded and full batches
    for pooling in ("mean", "cls"):
        torch_enc = load(tiny_model_dir, tmp_path, use_cache=False, pooling=pooling)
        onnx_enc = load(tiny_model_dir, tmp_path, use_cache=False, pooling=pooling, backend="onnx", batch_size=7)
        a, b = torch_enc.encode(texts), onnx_enc.encode(texts)
        assert onnx_enc.backend == "onnx" and onnx_enc._model is not None  # exported from the torch weights once
        assert np.einsum("ij,ij->i", a, b).min() >= 0.9999
        raw_t, raw_o = torch_enc.encode(texts, normalize=False), onnx_enc.encode(texts, normalize=False)
        np.testing.assert_allclose(raw_o, raw_t, rtol=1e-3, atol=1e-4)
    reload = load(tiny_model_dir, tmp_path, use_cache=False, backend="onnx")
    reload.encode(texts[:3])
    assert reload._model is None  # the exported graph is reused: torch's model was never loaded


def test_a_new_export_past_the_bound_removes_the_least_recently_used(tiny_model_dir, tmp_path, monkeypatch):
    """Two exports made long ago, the older one loaded again (so used last); a third export past a bound that holds
    two and a half removes the one used longest ago, not the one made first."""
    import os
    import time

    pytest.importorskip("onnxruntime")
    texts = sentences(5, seed=2)
    monkeypatch.setenv("LENBENCH_ONNX_FUSE", "1")
    load(tiny_model_dir, tmp_path, use_cache=False, backend="onnx").encode(texts)
    load(tiny_model_dir, tmp_path, use_cache=False, backend="onnx", pooling="cls").encode(texts)
    folder = tmp_path / "cache" / "onnx"
    first, second = (next(folder.glob(f"*-{p}-v*.onnx")) for p in ("mean", "cls"))
    for path, hours in ((first, 2), (second, 1)):
        os.utime(path, (time.time() - hours * 3600,) * 2)
    load(tiny_model_dir, tmp_path, use_cache=False, backend="onnx").encode(texts)  # loaded, not made: marked used
    sizes = [first.stat().st_size, second.stat().st_size]
    monkeypatch.setenv("LENBENCH_ONNX_CACHE_GIB", str((sum(sizes) + max(sizes) / 2) / 2**30))
    monkeypatch.setenv("LENBENCH_ONNX_FUSE", "0")  # another graph of the same weights: a third export
    load(tiny_model_dir, tmp_path, use_cache=False, backend="onnx").encode(texts)
    left = sorted(p.name for p in folder.glob("*.onnx"))
    assert first.name in left and second.name not in left and len(left) == 2, left


def test_onnx_token_vectors_match_torch_and_pool_to_the_encoded_embedding(tiny_model_dir, tmp_path):
    """diag's token pass on the ONNX backend: the token-level export gives torch's token vectors, padding removed,
    and their mean is the pooled embedding `encode` returns."""
    pytest.importorskip("onnxruntime")
    texts = sentences(20, seed=7, lo=1, hi=30)
    want = load(tiny_model_dir, tmp_path, use_cache=False).token_embeddings(texts)
    onnx_enc = load(tiny_model_dir, tmp_path, use_cache=False, backend="onnx", batch_size=6)
    got = onnx_enc.token_embeddings(texts)
    assert [g.shape for g in got] == [w.shape for w in want]  # one row per real token, specials kept
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-4)
    pooled = np.stack([g.mean(0) for g in got])
    pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
    assert np.einsum("ij,ij->i", pooled, onnx_enc.encode(texts)).min() >= 0.9999
    assert len(list((tmp_path / "cache" / "onnx").glob("*-tokens-v*.onnx"))) == 1


def test_onnx_export_is_fused_verified_and_checked_on_load(tiny_model_dir, tmp_path, monkeypatch):
    pytest.importorskip("onnxruntime")
    import bench.encode.backends.onnx_export as ob
    from bench.runtime.errors import ModelLoadError

    monkeypatch.setenv(ob.FUSE_ENV, "0")  # the plain graph, though this model is narrow enough to fuse (next test)
    texts = sentences(20, seed=11, lo=1, hi=30)
    reference = load(tiny_model_dir, tmp_path, use_cache=False).encode(texts, normalize=False)
    enc = load(tiny_model_dir, tmp_path, use_cache=False, backend="onnx")
    got = enc.encode(texts, normalize=False)
    session = enc.engine.session()
    assert session.path.name.endswith(f"-v{ob.FORMAT}-plain.onnx")  # a new format is a new name: old exports are not reused
    assert session.meta["graph"] == "plain"
    cos, norm_error = ob.agreement(got, reference)
    assert cos >= 0.9999 and norm_error <= 1e-3
    assert enc._model.config._attn_implementation == "sdpa"  # exported with eager attention, then restored
    # Fused: the tiny BERT's heads and width come from its config; ONNX Runtime fuses attention and the layer norms.
    meta = ob.export_pooled(enc.model, "mean", tmp_path / "fused.onnx", fuse=True)
    assert meta["graph"] == "fused" and meta["fused"]["Attention"] == 2, meta
    cos, norm_error = ob.agreement(ob.OnnxPooledModel(tmp_path / "fused.onnx").run(ob.probe_batch(enc.model.config)),
                                   ob.torch_pooled(enc.model, "mean", ob.probe_batch(enc.model.config)))  # fmt: skip
    assert cos >= 0.9999 and norm_error <= 1e-3

    session.path.write_bytes(b"not an onnx file")  # corrupt: exported again, with a warning
    again = load(tiny_model_dir, tmp_path, use_cache=False, backend="onnx")
    with pytest.warns(UserWarning, match="not usable"):
        np.testing.assert_allclose(again.encode(texts, normalize=False), got, rtol=1e-5, atol=1e-6)

    cls_enc = load(tiny_model_dir, tmp_path, use_cache=False, backend="onnx", pooling="cls")
    cls_enc.encode(texts[:2])
    cls_enc.engine.session().path.replace(session.path)  # a valid export, but of another pooling, under this name
    mismatched = load(tiny_model_dir, tmp_path, use_cache=False, backend="onnx")
    with pytest.warns(UserWarning, match="other weights or pooling"):
        np.testing.assert_allclose(mismatched.encode(texts, normalize=False), got, rtol=1e-5, atol=1e-6)

    def wrong_fusion(graph, config):  # a fused graph that computes something else: the plain graph is kept
        return ob.trace_graph(mismatched.model, "cls"), {"Attention": 2}

    monkeypatch.setattr(ob, "fuse_graph", wrong_fusion)
    meta = ob.export_pooled(mismatched.model, "mean", tmp_path / "fallback.onnx", fuse=True)
    assert meta["graph"] == "plain" and "fused graph disagrees with torch" in meta["notes"][0]
    monkeypatch.setattr(ob, "torch_pooled", lambda model, pooling, batch: np.ones((len(batch["input_ids"]), 32), np.float32))
    with pytest.raises(ModelLoadError, match="fused graph disagrees.*plain graph disagrees.*--backend torch"):
        ob.export_pooled(mismatched.model, "mean", tmp_path / "neither.onnx", fuse=True)
    assert not (tmp_path / "neither.onnx").exists()


def test_by_default_a_narrow_model_runs_fused_and_a_wide_one_plain(tiny_model_dir, tmp_path, monkeypatch):
    """$LENBENCH_ONNX_FUSE unset: the tiny BERT (32 wide) is exported fused, a model wider than FUSE_MAX_WIDTH plain,
    by the width alone (the same graph, so the same scores, on every machine); the variable overrides either way."""
    pytest.importorskip("onnxruntime")
    import bench.encode.backends.onnx_export as ob

    monkeypatch.delenv(ob.FUSE_ENV, raising=False)
    enc = load(tiny_model_dir, tmp_path, use_cache=False, backend="onnx")
    enc.encode(["a text", "another, longer text"])
    session = enc.engine.session()
    assert session.meta["graph"] == "fused" and session.meta["fused"]["Attention"] == 2
    assert session.path.name.endswith(f"-mean-v{ob.FORMAT}-fused.onnx")
    assert [ob.fusion_asked(w, "mean") for w in (32, ob.FUSE_MAX_WIDTH, ob.FUSE_MAX_WIDTH + 1, 384, None)] == [
        True, True, False, False, False]  # fmt: skip
    assert not ob.fusion_asked(32, ob.TOKENS)  # the token-level graph is never fused
    monkeypatch.setenv(ob.FUSE_ENV, "0")
    assert not ob.fusion_asked(32, "mean")
    monkeypatch.setenv(ob.FUSE_ENV, "1")
    assert ob.fusion_asked(384, "mean")


def test_onnx_export_of_mpnet_agrees_with_torch(tmp_path):
    """MPNet's relative attention matches no fusion pattern: what fuses (GELU, layer norms) must still agree."""
    pytest.importorskip("onnxruntime")
    import torch
    from transformers import MPNetConfig, MPNetModel

    import bench.encode.backends.onnx_export as ob

    torch.manual_seed(0)
    model = MPNetModel(MPNetConfig(vocab_size=30527, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                   intermediate_size=64)).eval()  # fmt: skip
    meta = ob.export_pooled(model, "mean", tmp_path / "mpnet.onnx", "fp", fuse=True)
    assert "Attention" not in meta["fused"]
    rng = np.random.default_rng(1)
    ids = rng.integers(1000, 30000, (5, 40))
    mask = np.ones_like(ids)
    mask[2:, 20:] = 0
    batch = {"input_ids": ids, "attention_mask": mask}
    cos, norm_error = ob.agreement(ob.OnnxPooledModel(tmp_path / "mpnet.onnx").run(batch), ob.torch_pooled(model, "mean", batch))
    assert cos >= 0.9999 and norm_error <= 1e-3


# --------------------------------------------------------------------------------------- batch plans
def test_batch_plan_is_the_cheapest_partition_within_its_limits():
    from itertools import combinations

    from bench.encode.batching import padded_slots, plan_batches, sorted_runs

    rng = np.random.default_rng(0)
    for trial in range(40):
        lengths = rng.integers(1, 12, size=int(rng.integers(1, 9)))
        max_batch, max_tokens, cost = int(rng.integers(1, 5)), int(rng.integers(4, 30)), int(rng.integers(0, 10))
        plan = plan_batches(lengths, max_batch, max_tokens, batch_cost=cost)
        assert sorted(np.concatenate(plan).tolist()) == list(range(len(lengths)))
        for b in plan:
            assert len(b) <= max_batch and (len(b) == 1 or len(b) * lengths[b].max() <= max_tokens)
        # brute force over every way to cut the length-sorted order into contiguous batches
        width = np.sort(lengths)[::-1]
        n, best = len(width), None
        for k in range(n):
            for cuts in combinations(range(1, n), k):
                bounds = [0, *cuts, n]
                groups = [(a, b) for a, b in zip(bounds, bounds[1:])]
                if all(b - a <= max_batch and (b - a == 1 or (b - a) * width[a] <= max_tokens) for a, b in groups):
                    total = sum((b - a) * width[a] + cost for a, b in groups)
                    best = total if best is None else min(best, total)
        assert padded_slots(lengths, plan) + cost * len(plan) == best, (trial, lengths.tolist())
    lengths = [5] * 70 + [4] * 3 + [3] * 64
    assert padded_slots(lengths, plan_batches(lengths, 64, batch_cost=0)) == sum(lengths)  # equal lengths together
    assert padded_slots(lengths, plan_batches(lengths, 64)) == sum(lengths) + 3  # the three 4s pad less than a batch costs
    assert padded_slots(lengths, sorted_runs(lengths, 64)) > sum(lengths)


def _plan_over_every_start(lengths, max_batch, max_tokens, cost):
    """The dynamic programme over every start of the last batch: what `plan_batches` must equal, batch for batch."""
    lengths = np.asarray(lengths, dtype=np.int64)
    order = np.argsort(-lengths, kind="stable")
    width, n = lengths[order], len(lengths)
    best, cut = np.zeros(n + 1, dtype=np.int64), np.zeros(n + 1, dtype=np.int64)
    for i in range(1, n + 1):
        starts = np.arange(max(0, i - max_batch), i)
        slots = (i - starts) * width[starts]
        costs = best[starts] + slots + cost
        if max_tokens is not None:
            costs[:-1][slots[:-1] > max_tokens] = np.iinfo(np.int64).max
        k = int(np.argmin(costs))  # the first of equally cheap starts
        best[i], cut[i] = costs[k], starts[k]
    bounds, i = [], n
    while i > 0:
        bounds.append((int(cut[i]), i))
        i = int(cut[i])
    return [order[a:b] for a, b in reversed(bounds)]


def test_batch_plan_is_the_plan_of_the_dynamic_programme_over_every_start():
    """`plan_batches` looks at one start per run of equal lengths (and stops early): the same batches, in the same
    order, as trying every start, on inputs far too long for the brute force above (runs, limits, ties)."""
    from bench.encode.batching import plan_batches

    rng = np.random.default_rng(1)
    for trial in range(400):
        lengths = rng.integers(1, int(rng.choice([3, 10, 60, 300])) + 1, size=int(rng.integers(1, 250)))
        max_batch, cost = int(rng.integers(1, 80)), int(rng.integers(0, 100))
        max_tokens = None if trial % 3 == 0 else int(rng.integers(1, 3000))
        got, want = plan_batches(lengths, max_batch, max_tokens, batch_cost=cost), _plan_over_every_start(
            lengths, max_batch, max_tokens, cost)
        assert len(got) == len(want) and all(np.array_equal(a, b) for a, b in zip(got, want)), trial


def test_padding_free_batches_give_the_old_embeddings_with_fewer_padded_slots(tiny_model_dir, tmp_path, monkeypatch):
    import bench.encode.pipeline as pipeline_module
    from bench.encode.batching import sorted_runs

    texts = sentences(150, seed=12, lo=1, hi=14)
    new = load(tiny_model_dir, tmp_path, use_cache=False, batch_size=16)
    got = new.encode(texts, normalize=False)
    monkeypatch.setattr(pipeline_module, "plan_batches", lambda lengths, max_batch, max_tokens, cost=None: sorted_runs(lengths, max_batch))
    old = load(tiny_model_dir, tmp_path, use_cache=False, batch_size=16)
    want = old.encode(texts, normalize=False)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    distinct_inputs = {tuple(x) for x in new.tokenize(texts).ids}  # a repeated text is encoded once
    assert new.tokens_run == old.tokens_run == sum(len(x) for x in distinct_inputs)
    assert new.tokens_run <= new.token_slots < old.token_slots


def write_toy_beir(root, docs, queries):
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps({"_id": f"d{i}", "title": "", "text": t}) + "\n" for i, t in enumerate(docs)))
    (root / "queries.jsonl").write_text("".join(json.dumps({"_id": f"q{i}", "text": t}) + "\n" for i, t in enumerate(queries)))
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{3 * i + 1}\t1\n" for i in range(len(queries))))


@pytest.mark.parametrize("suite", ["beir:scifact", "sts:toysts"])
def test_warm_bench_eval_of_cached_texts_imports_neither_torch_nor_transformers(tiny_model_dir, tmp_path, monkeypatch,
                                                                                suite):  # fmt: skip
    from bench.cli import main
    from results_db import ResultsDB
    from tests.conftest import write_sts

    write_toy_beir(tmp_path / "data" / "beir" / "scifact", sentences(30, seed=6, lo=3, hi=20), sentences(5, seed=9))
    pairs = zip(sentences(12, seed=3), sentences(12, seed=4), [i % 5 for i in range(12)])
    write_sts(tmp_path / "data" / "sts" / "toysts.tsv", list(pairs))  # a clean STS run: no attack meter, no tokenizer
    argv = ["eval", "--model", str(tiny_model_dir), "--suite", suite, "--max-len", "16",
            "--data-dir", str(tmp_path / "data"), "--db", str(tmp_path / "r.sqlite")]  # fmt: skip
    monkeypatch.setenv("LENBENCH_CACHE", str(tmp_path / "cache"))
    assert main(argv) == 0  # cold: encodes every query and document
    warm_argv = argv[:-1] + [str(tmp_path / "r2.sqlite")]  # another database: scored again (r.sqlite reuses its row)
    code = f"import sys; from bench.cli import main; rc = main({warm_argv!r}); print(rc, 'torch' in sys.modules, 'transformers' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split()[-3:] == ["0", "False", "False"], proc.stdout
    cold, warm = (ResultsDB(tmp_path / db).scores().set_index("metric")["value"] for db in ("r.sqlite", "r2.sqlite"))
    assert cold.to_dict() == warm.to_dict() and len(cold) == (3 if suite.startswith("beir") else 1)


# -------------------------------------------------------------------------------------------- attacks
def test_batch_attacks_equal_the_text_by_text_definition(tiny_model_dir, tmp_path):
    tok = load(tiny_model_dir, tmp_path).tokenizer
    texts = sentences(50, seed=7, lo=1, hi=25) + ["", "x"]
    for max_len in (8, 16, 32):
        for variant in ("2", "4", "rand"):
            got = attack_batch(texts, variant, tok, max_len, seed=3)
            if variant == "rand":
                rng = random.Random(3)
                want = [elongate_random(t, tok, max_len, rng)[0] for t in texts]
            else:
                want = [elongate_within(t, int(variant), tok, max_len) for t in texts]
            assert got.texts == want, (max_len, variant)
            lengths = [len(tok(t, add_special_tokens=False)["input_ids"]) for t in [" ".join([t] * int(m)) for t, m in zip(texts, got.m)]]
            assert list(got.truncated) == [n > max_len - 2 for n in lengths]
    inputs = model_inputs(["cat dog", " ".join(WORDS)], tok, 8)
    assert [len(i) for i in inputs.ids] == [4, 8] and list(inputs.truncated) == [False, True]
    assert list(model_inputs(["a b c d e f"], tok, 8).truncated) == [False]  # exactly max_len: nothing cut


# ---------------------------------------------------------------------------------------- one-pass SimCSE
def test_simcse_one_forward_gives_the_two_pass_loss(tiny_model_dir):
    import torch

    from bench.encode.loading import load_transformer
    from methods import get_method

    model, tok, _ = load_transformer(str(tiny_model_dir))
    adapter = get_method("simcse").build(tokenizer=tok, max_len=16, seed=0)
    adapter.setup(model)
    model.eval()  # dropout off: the two views are then the same vector in both layouts
    batch = adapter.make_batch(sentences(8, seed=8, lo=2, hi=30), random.Random(0))
    assert batch["anchor_input_ids"].shape[1] <= 16  # pair texts cut at max_len
    one, _ = adapter.loss(model, batch)
    adapter.one_forward = False
    two, _ = adapter.loss(model, batch)
    torch.testing.assert_close(one, two, rtol=1e-5, atol=1e-6)
    calls = []
    handle = model.register_forward_hook(lambda *a: calls.append(1))
    adapter.one_forward = True
    model.train()
    loss, _ = adapter.loss(model, batch)
    handle.remove()
    assert len(calls) == 1 and loss.item() > 0  # one forward; with dropout on the views differ


def test_a_truncated_safetensors_file_is_refused_at_load_not_mid_run(tiny_model_dir, tmp_path):
    import shutil

    from bench.runtime.errors import ModelLoadError

    folder = shutil.copytree(tiny_model_dir, tmp_path / "broken")
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])
    with pytest.raises(ModelLoadError, match="not a complete safetensors file"):
        Encoder.load(str(folder))


def test_attacked_texts_computed_chunk_by_chunk_equal_attack_texts_in_any_access_order(tiny_model_dir, tmp_path,
                                                                                       monkeypatch):  # fmt: skip
    import bench.evaluate.attacks as attacks

    monkeypatch.setattr(attacks.base, "ATTACK_CHUNK", 4)  # many chunks: the rng state crosses chunk boundaries
    tok = load(tiny_model_dir, tmp_path).tokenizer
    texts = sentences(23, seed=11, lo=1, hi=9)
    for variant in ("rand", "2"):
        whole = attack_texts(texts, variant, tok, 16, seed=5)
        lazy = attacks.AttackedTexts(texts, variant, tok, 16, seed=5)
        assert lazy[17:23] == whole[17:23]  # a later chunk first: the states before it are computed on the way
        assert lazy[3:10] == whole[3:10] and lazy[9] == whole[9] and lazy[-1] == whole[-1]
        assert list(lazy) == whole and len(lazy) == 23 and lazy[5:5] == []
