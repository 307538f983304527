"""The prepared attention mask (bench.encode.masks): the model's outputs are the same to the bit as with the plain
2D mask, padded batches and unpadded ones, SDPA and eager attention; and transformers no longer asks the device
whether a batch is padded (the check that syncs a GPU in every forward)."""

from __future__ import annotations

import numpy as np
import pytest

from bench.encode import masks
from bench.encode.encoder import Encoder

pytestmark = pytest.mark.usefixtures("one_thread")

TEXTS = ["cat dog sun", "tree car boat bird fish rain snow road hill lamp door", "fish", "sun sun",
         "rain snow road hill lamp", "door book cup tree car"]  # fmt: skip


def encoder(tiny_model_dir, tmp_path, **kw):
    return Encoder.load(str(tiny_model_dir), backend="torch", device="cpu", max_len=16, batch_size=3,
                        show_progress=False, use_cache=False, cache_dir=tmp_path / "cache", **kw)  # fmt: skip


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_prepared_masks_give_the_same_vectors_to_the_bit(tiny_model_dir, tmp_path, monkeypatch, attention):
    prepared = encoder(tiny_model_dir, tmp_path)
    prepared.model.set_attn_implementation(attention)
    assert masks.mask_builder(prepared.model) is not None  # a BERT of transformers 5: prepared
    checks = []
    import transformers.masking_utils as mu

    real_check = mu._ignore_bidirectional_mask_sdpa
    monkeypatch.setattr(mu, "_ignore_bidirectional_mask_sdpa", lambda *a, **k: checks.append(a[0]) or real_check(*a, **k))
    got = prepared.encode(TEXTS)
    got_tokens = prepared.token_embeddings(TEXTS)
    assert not [m for m in checks if m is not None]  # no forward looked at a mask on the device
    monkeypatch.setattr(masks, "mask_builder", lambda model: None)  # the 2D mask as before
    plain = encoder(tiny_model_dir, tmp_path)
    plain.model.set_attn_implementation(attention)
    want = plain.encode(TEXTS)
    np.testing.assert_array_equal(got, want)
    for a, b in zip(got_tokens, plain.token_embeddings(TEXTS)):
        np.testing.assert_array_equal(a, b)
    if attention == "sdpa":
        assert [m for m in checks if m is not None]  # ... and the plain 2D mask was checked there (what the GPU waited on)


def test_padded_and_unpadded_batches_both_run(tiny_model_dir, tmp_path):
    import torch

    enc = encoder(tiny_model_dir, tmp_path)
    model = enc.model
    full = np.ones((2, 5), dtype=np.int64)
    assert masks.model_mask(model, torch.from_numpy(full), full) is None  # no padding: no mask at all
    padded = full.copy()
    padded[1, 3:] = 0
    made = masks.model_mask(model, torch.from_numpy(padded), padded)
    assert made.shape == (2, 1, 5, 5) and not bool(made[1, 0, 0, 3]) and bool(made[0, 0, 0, 4])


def test_models_that_do_not_build_their_masks_this_way_keep_the_2d_mask():
    import torch

    class Plain(torch.nn.Module):  # no config: not a transformers model
        pass

    mask = torch.ones((1, 3), dtype=torch.int64)
    assert masks.model_mask(Plain(), mask, mask.numpy()) is mask


@pytest.mark.parametrize("method", ["laser3-self", "simcse"])
def test_a_training_step_is_the_same_with_the_prepared_mask(tiny_model_dir, monkeypatch, method):
    """methods.pairs.embed (laser3-self, crop, simcse...) hands the model the prepared mask: the loss and every
    gradient of a step on a padded batch are the same to the bit as with the 2D mask."""
    import random

    import torch
    from transformers import AutoModel, AutoTokenizer

    from bench.train.registry import get_method

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    adapter = get_method(method).build(tokenizer=tokenizer, max_len=32, seed=0)
    texts = ["The cat sat on the mat. It was warm there.", "A dog ran in the park. Then it slept.",
             "Rain fell all day. The roads were wet and long.", "Short one. Two."]  # fmt: skip
    batch = adapter.make_batch(texts, random.Random(0))
    assert batch is not None and any(not bool(v.all()) for k, v in batch.items() if k.endswith("attention_mask"))

    def step():  # noqa: ANN202
        torch.manual_seed(0)
        model = AutoModel.from_pretrained(str(tiny_model_dir)).train()
        loss, _ = adapter.loss(model, batch)
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]

    prepared_loss, prepared_grads = step()
    monkeypatch.setattr(masks, "mask_builder", lambda model: None)
    plain_loss, plain_grads = step()
    assert torch.equal(prepared_loss, plain_loss)
    assert len(prepared_grads) == len(plain_grads) and all(torch.equal(a, b) for a, b in zip(prepared_grads, plain_grads))
