"""The trainer's data pipeline and host policy: losses and weights bit-identical whatever the number of loader workers;
the loss read every few steps (a non-finite one still stops the run, and no checkpoint of the damaged weights is
written); checkpoints by time and at the stop, written in the background, a failed write leaving the previous one."""

from __future__ import annotations

import pytest
import torch

from bench.runtime.errors import TrainingError
from bench.train import Budget, TrainConfig, TrainJob, train
from bench.train import checkpoint as ckpt_mod
from bench.train.checkpoint import checkpoint_root, latest_checkpoint, load_checkpoint
from methods import get_method
from tests.test_trainer import NanAt

pytestmark = pytest.mark.usefixtures("one_thread")

TEXTS = [
    " ".join(f"Sentence {j} of document {i} says something about topic {(i * j) % 5}, in words a tokenizer knows well "
             f"enough to keep it over a hundred characters long." for j in range(3 + i % 3))
    for i in range(24)
]  # fmt: skip


@pytest.fixture(scope="module")
def bag(tmp_path_factory):
    from bench.train.backbone import load_backbone

    root = tmp_path_factory.mktemp("backbones")
    return lambda: load_backbone("embedding-bag-16", cache_dir=root)[:2]


def _cfg(**kw):
    base = dict(max_len=32, batch_size=6, lr=1e-2, progress=False, seed=4)
    base.update(kw)
    return TrainConfig(**base)


def _weights(result) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(result.encoder_dir / "model.safetensors"))


@pytest.mark.parametrize("method", ["laser3-self", "crop"])
def test_same_seed_same_losses_and_weights_whatever_the_loader_workers(bag, method, tmp_path):
    results = {}
    initial = {k: v.clone() for k, v in bag()[0].state_dict().items()}
    for workers in (0, 1, 2):
        model, tok = bag()
        adapter = get_method(method).build(tokenizer=tok, max_len=32, seed=4)
        job = TrainJob(TEXTS, Budget(steps=6), _cfg(loader_workers=workers), tmp_path / f"w{workers}")
        results[workers] = train(adapter, model, tok, job)
    base = results[0]
    assert len(base.losses) == 6 and len(set(base.losses)) == 6  # six steps on six different batches
    assert any(not torch.equal(initial[k], v) for k, v in _weights(base).items() if k in initial)  # it trained
    for workers in (1, 2):
        assert results[workers].losses == base.losses  # bit-identical, not approximately
        a, b = _weights(base), _weights(results[workers])
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
        assert results[workers].consumed.tokens == base.consumed.tokens
        # and the saved folder is the same file for file: its tokenizer.json once kept the truncation of the last
        # batch built in this process (workers=0 only), so the encoder's fingerprint depended on the workers
        files = sorted(p.relative_to(base.encoder_dir) for p in base.encoder_dir.rglob("*") if p.is_file())
        assert files == sorted(p.relative_to(results[workers].encoder_dir) for p in results[workers].encoder_dir.rglob("*") if p.is_file())
        for name in files:
            if name.name != "README.md":  # the model card records the run's own seconds and memory
                assert (base.encoder_dir / name).read_bytes() == (results[workers].encoder_dir / name).read_bytes(), name


def test_loss_read_every_few_steps_still_stops_on_nan_without_saving_damaged_weights(bag, tmp_path):
    model, tok = bag()
    adapter = NanAt(get_method("crop").build(tokenizer=tok, max_len=32, seed=4), step=7)
    cfg = _cfg(nan_check_every=4, checkpoint_every=4)
    with pytest.raises(TrainingError, match=r"non-finite loss \(nan\) at step 7 of crop; stopped, last checkpoint at .*step-00000004"):
        train(adapter, model, tok, TrainJob(TEXTS, Budget(steps=20), cfg, tmp_path / "out"))
    ckpt = latest_checkpoint(tmp_path / "out")
    assert ckpt.name == "step-00000004"  # step 8's check found the NaN: no checkpoint at 8
    weights, state = load_checkpoint(ckpt)
    assert state["consumed"]["steps"] == 4 and all(torch.isfinite(t).all() for t in weights.values())


def test_nan_before_any_checkpoint_says_none_was_written(bag, tmp_path):
    model, tok = bag()
    adapter = NanAt(get_method("crop").build(tokenizer=tok, max_len=32, seed=4), step=2)
    with pytest.raises(TrainingError, match=r"at step 2 of crop; stopped, no checkpoint was written"):
        train(adapter, model, tok, TrainJob(TEXTS, Budget(steps=20), _cfg(nan_check_every=5), tmp_path / "out"))
    assert latest_checkpoint(tmp_path / "out") is None


def test_a_short_run_writes_one_checkpoint_at_its_end(bag, tmp_path):
    model, tok = bag()
    adapter = get_method("crop").build(tokenizer=tok, max_len=32, seed=4)
    saved = []
    real = ckpt_mod.write_snapshot
    ckpt_mod.write_snapshot, restore = (lambda out, snap, keep=1: saved.append(snap.step) or real(out, snap, keep)), real
    try:
        train(adapter, model, tok,
              TrainJob(TEXTS, Budget(steps=30), _cfg(keep_checkpoints=5), tmp_path / "out", save_encoder_dir=None))
    finally:
        ckpt_mod.write_snapshot = restore
    assert saved == [30]  # not a tenth of the run: 10 minutes have not passed
    assert [p.name for p in checkpoint_root(tmp_path / "out").iterdir() if p.is_dir()] == ["step-00000030"]


def test_a_failed_checkpoint_write_leaves_the_previous_one_usable(bag, tmp_path, monkeypatch):
    model, tok = bag()
    adapter = get_method("crop").build(tokenizer=tok, max_len=32, seed=4)
    real = ckpt_mod.save_file
    calls = {"n": 0}

    def failing_second_checkpoint(tensors, path):
        calls["n"] += 1
        if calls["n"] == 3:  # the second checkpoint's weights (two files a checkpoint)
            raise OSError(28, "No space left on device")
        return real(tensors, path)

    monkeypatch.setattr(ckpt_mod, "save_file", failing_second_checkpoint)
    with pytest.raises(TrainingError, match=r"checkpoint step-00000006 could not be written .*No space left.*step-00000003 is intact"):
        train(adapter, model, tok,
              TrainJob(TEXTS, Budget(steps=9), _cfg(checkpoint_every=3, keep_checkpoints=3), tmp_path / "out"))
    ckpt = latest_checkpoint(tmp_path / "out")
    assert ckpt.name == "step-00000003"
    weights, state = load_checkpoint(ckpt)
    assert state["consumed"]["steps"] == 3 and weights
