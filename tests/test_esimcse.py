"""ESimCSE adapter: word repetition, momentum queue, EMA update, loss with queue negatives, resume."""

from __future__ import annotations

import random

import pytest
import torch
import torch.nn.functional as F

from methods import get_method
from methods.esimcse import MomentumQueue, ema_update, repeat_tokens, repetition_length

SENTENCE = "A man with a hard hat is dancing in the street while the crowd watches him closely."


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir), tiny_model_dir


def _model(tiny_dir):
    from transformers import AutoModel

    torch.manual_seed(0)
    return AutoModel.from_pretrained(tiny_dir)


def _is_repetition_of(original: list[int], repeated: list[int]) -> bool:
    """True when `repeated` is `original` with some tokens each written twice in a row (nothing else added)."""
    i = 0
    j = 0
    while i < len(original):
        if j >= len(repeated) or repeated[j] != original[i]:
            return False
        j += 1
        if j < len(repeated) and repeated[j] == original[i] and (i + 1 >= len(original) or original[i + 1] != original[i]):
            j += 1  # the duplicate of original[i]
        i += 1
    return j == len(repeated)


def test_repetition_keeps_every_token_in_order_and_only_adds_duplicates(tiny):
    tok, _ = tiny
    ids = tok(SENTENCE)["input_ids"]
    n_body = len(ids) - 2
    changed = 0
    for seed in range(300):
        out = repeat_tokens(ids, 0.32, random.Random(seed))
        assert out[0] == tok.cls_token_id and out[-1] == tok.sep_token_id
        assert out.count(tok.cls_token_id) == 1 and out.count(tok.sep_token_id) == 1  # specials never repeated
        assert _is_repetition_of(ids, out), (ids, out)
        # Removing one copy of each adjacent duplicate gives back the original exactly.
        added = len(out) - len(ids)
        assert 0 <= added < max(2, int(0.32 * n_body))
        changed += added > 0
    assert changed > 200  # most draws repeat something at dup_rate 0.32


def test_repetition_never_exceeds_the_position_limit(tiny):
    tok, tiny_dir = tiny
    ids = tok(SENTENCE)["input_ids"]
    for seed in range(100):
        out = repeat_tokens(ids, 1.0, random.Random(seed), max_total=len(ids) + 2)
        assert len(out) <= len(ids) + 2 and _is_repetition_of(ids, out)
    assert repeat_tokens(ids, 1.0, random.Random(0), max_total=len(ids)) == ids
    # The adapter takes the limit from the backbone (max_position_embeddings) at setup.
    adapter = get_method("esimcse").build(tokenizer=tok, max_len=32, seed=0)
    model = _model(tiny_dir)
    adapter.setup(model)
    assert adapter.position_limit == min(model.config.max_position_embeddings, tok.model_max_length)


def test_repetition_length_range_is_paper_interval():
    rng = random.Random(0)
    # N = 20 tokens: int(0.32 * 20) = 6 -> dup_len in {0..5}, all of them reached, never 6.
    seen = {repetition_length(20, 0.32, rng) for _ in range(3000)}
    assert seen == set(range(6))
    # Short texts: max(2, int(0.32 * 3) = 0) = 2 -> {0, 1}.
    assert {repetition_length(3, 0.32, rng) for _ in range(500)} == {0, 1}
    # Never more repeats than tokens.
    assert {repetition_length(1, 1.0, rng) for _ in range(200)} <= {0, 1}


def test_repetition_is_redrawn_every_batch(tiny):
    tok, _ = tiny
    adapter = get_method("esimcse").build(tokenizer=tok, max_len=32, seed=0)
    rng = random.Random(1)
    views = {tuple(adapter.make_batch([SENTENCE, "Another text."], rng)["positive_input_ids"][0].tolist()) for _ in range(20)}
    assert len(views) > 5  # same text, new positive each time it is batched


def test_defaults_are_paper_settings(tiny):
    from bench.train.method import MethodAdapter

    spec = get_method("esimcse")
    assert isinstance(spec.build(tokenizer=tiny[0], max_len=32, seed=0), MethodAdapter)
    cfg = spec.defaults()
    assert (cfg.dup_rate, cfg.momentum, cfg.temperature) == (0.32, 0.995, 0.05)
    assert cfg.queue_batches == 3  # 2.5x batch rounded (half up) to whole batches
    assert spec.summary and "ESimCSE" in spec.paper
    with pytest.raises(ValueError, match="dup_rate"):
        spec.config_from({"dup_rate": 1.5})


def test_queue_fifo_order_and_capacity():
    q = MomentumQueue(capacity_batches=3)
    for b in range(5):  # batch b: 2 rows with ids = b, embedding rows = b
        q.push(torch.full((2, 4), b), torch.ones(2, 4, dtype=torch.long), torch.full((2, 3), float(b)))
    assert len(q.entries) == 3 and len(q) == 6
    assert [int(e["input_ids"][0, 0]) for e in q.entries] == [2, 3, 4]  # the two oldest left first
    emb = q.embeddings(lambda ids, mask: pytest.fail("cached entries must not be re-encoded"))
    assert emb[:, 0].tolist() == [2, 2, 3, 3, 4, 4]  # oldest first
    # Invalidated entries are re-encoded with the given encoder (resume / refresh mode).
    q.invalidate()
    emb = q.embeddings(lambda ids, mask: ids[:, :3].float() * 10)
    assert emb[:, 0].tolist() == [20, 20, 30, 30, 40, 40]
    assert len(MomentumQueue(0).entries) == 0


def test_ema_update_formula(tiny):
    _, tiny_dir = tiny
    online, momentum = _model(tiny_dir), _model(tiny_dir)
    with torch.no_grad():
        for p in online.parameters():
            p.add_(torch.randn_like(p))
    before = {k: v.clone() for k, v in momentum.named_parameters()}
    ema_update(momentum, online, 0.995)
    online_p = dict(online.named_parameters())
    for name, p in momentum.named_parameters():
        torch.testing.assert_close(p, 0.995 * before[name] + 0.005 * online_p[name])


def test_after_step_updates_momentum_encoder_and_it_is_frozen_eval(tiny):
    tok, tiny_dir = tiny
    model = _model(tiny_dir)
    adapter = get_method("esimcse").build(tokenizer=tok, max_len=32, seed=0)
    assert adapter.setup(model) == []  # nothing extra for the optimiser
    m = adapter.momentum_encoder
    assert all(not p.requires_grad for p in m.parameters())
    name, p0 = next(iter(m.named_parameters()))
    old = p0.detach().clone()
    with torch.no_grad():
        dict(model.named_parameters())[name].add_(1.0)
    adapter.after_step(model)
    torch.testing.assert_close(p0, 0.995 * old + 0.005 * dict(model.named_parameters())[name])


def test_queue_is_encoded_by_the_momentum_encoder_in_eval_mode(tiny):
    """Dropout on and the online encoder in train mode: the queue's embeddings are still the momentum encoder's
    deterministic (eval-mode) ones, never the online encoder's."""
    tok, tiny_dir = tiny
    model = _model(tiny_dir).train()
    adapter = get_method("esimcse").build(tokenizer=tok, max_len=32, seed=0)
    adapter.setup(model)
    with torch.no_grad():  # make the online encoder a different state from the momentum copy
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    batch = adapter.make_batch(["the cat sat on the mat", "dogs bark at night"], random.Random(0))
    adapter.loss(model, batch)
    assert len(adapter.queue.entries) == 0  # loss() has no side effect: a step the trainer drops leaves nothing
    adapter.after_step(model)  # EMA update, then the positives are enqueued, encoded by the updated state
    assert len(adapter.queue.entries) == 1
    assert model.training and not adapter.momentum_encoder.training
    queued = adapter.queue.entries[0]["embeddings"]
    again = adapter._momentum_encode(batch["positive_input_ids"], batch["positive_attention_mask"])
    torch.testing.assert_close(queued, again)  # deterministic: no dropout
    with torch.no_grad():
        h = model.eval()(input_ids=batch["positive_input_ids"], attention_mask=batch["positive_attention_mask"]).last_hidden_state
    online = (h * batch["positive_attention_mask"][..., None]).sum(1) / batch["positive_attention_mask"].sum(1, keepdim=True)
    assert not torch.allclose(queued, online, atol=1e-4)


def test_queue_entries_use_the_precision_the_loss_ran_under(tiny):
    """The trainer runs loss() under autocast (bf16 on CUDA) and after_step() outside it; the enqueued embeddings
    must be those the momentum encoder gives under that same autocast (as refresh mode, inside loss, would)."""
    tok, tiny_dir = tiny
    model = _model(tiny_dir).eval()
    adapter = get_method("esimcse").build(tokenizer=tok, max_len=32, seed=0)
    adapter.setup(model)
    batch = adapter.make_batch(["the cat sat on the mat", "dogs bark at night"], random.Random(0))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        adapter.loss(model, batch)
    adapter.after_step(model)
    args = (batch["positive_input_ids"], batch["positive_attention_mask"])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = adapter._momentum_encode(*args)
    torch.testing.assert_close(adapter.queue.entries[0]["embeddings"], expected)
    assert not torch.equal(expected, adapter._momentum_encode(*args))  # fp32 would differ


def test_loss_is_cross_entropy_over_batch_and_queue_negatives(tiny):
    tok, tiny_dir = tiny
    model = _model(tiny_dir).eval()  # no dropout: the hand computation below is exact
    adapter = get_method("esimcse").build(tokenizer=tok, max_len=32, seed=0)
    adapter.setup(model)
    rng = random.Random(0)
    first = adapter.make_batch(["the cat sat on the mat", "dogs bark at night", "rain falls in spain"], rng)
    loss1, logs1 = adapter.loss(model, first)
    assert logs1["queue_size"] == 0
    adapter.after_step(model)  # no optimiser step here: the EMA keeps the momentum encoder equal to the model
    batch = adapter.make_batch(["a man plays guitar", "stocks fell sharply today", "she reads a long book"], rng)
    loss, logs = adapter.loss(model, batch)
    assert logs["queue_size"] == 3

    def emb(m, ids, mask):
        h = m(input_ids=ids, attention_mask=mask).last_hidden_state
        x = (h * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)  # mean pooling (the default)
        return F.normalize(x, dim=-1)

    with torch.no_grad():
        z1 = emb(model, batch["anchor_input_ids"], batch["anchor_attention_mask"])
        z2 = emb(model, batch["positive_input_ids"], batch["positive_attention_mask"])
        # Queue = the first batch's positives, encoded by the momentum encoder (identical to the model here).
        zq = emb(adapter.momentum_encoder, first["positive_input_ids"], first["positive_attention_mask"])
        logits = torch.cat([z1 @ z2.T, z1 @ zq.T], dim=1) / 0.05
        expected = F.cross_entropy(logits, torch.arange(3))
        batch_only = F.cross_entropy((z1 @ z2.T) / 0.05, torch.arange(3))
    assert logits.shape == (3, 6)
    torch.testing.assert_close(loss.detach(), expected, rtol=1e-4, atol=1e-5)
    assert not torch.isclose(loss.detach(), batch_only)  # the queue really enters the denominator


def test_resume_restores_momentum_encoder_and_reencodes_queue(tiny):
    tok, tiny_dir = tiny
    model = _model(tiny_dir)
    adapter = get_method("esimcse").build(tokenizer=tok, max_len=32, seed=0)
    adapter.setup(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    rng = random.Random(0)
    for texts in (["one small step", "two big leaps"], ["red apples fall", "blue skies clear"]):
        loss, _ = adapter.loss(model, adapter.make_batch(texts, rng))
        opt.zero_grad()
        loss.backward()
        opt.step()
        adapter.after_step(model)
    state = adapter.state_dict()

    fresh = get_method("esimcse").build(tokenizer=tok, max_len=32, seed=0)
    fresh.setup(_model(tiny_dir))  # a momentum copy of some other state...
    fresh.load_state_dict(state)  # ...replaced by the checkpoint's
    for (n, a), (_, b) in zip(adapter.momentum_encoder.state_dict().items(), fresh.momentum_encoder.state_dict().items()):
        torch.testing.assert_close(a, b, msg=n)
    assert [e["input_ids"].tolist() for e in fresh.queue.entries] == [e["input_ids"].tolist() for e in adapter.queue.entries]
    assert all(e["embeddings"] is None for e in fresh.queue.entries)  # nothing from an unknown encoder state
    negatives = fresh.queue_negatives(model)
    expected = torch.cat([fresh._momentum_encode(e["input_ids"], e["attention_mask"]) for e in fresh.queue.entries])
    torch.testing.assert_close(negatives, expected)
    with pytest.raises(ValueError, match="momentum_encoder"):
        fresh.load_state_dict({"queue": []})


def test_refresh_mode_keeps_queue_on_current_momentum_state(tiny):
    tok, tiny_dir = tiny
    model = _model(tiny_dir)
    spec = get_method("esimcse")
    adapter = spec.build(spec.config_from({"refresh_queue_each_step": True}), tokenizer=tok, max_len=32, seed=0)
    adapter.setup(model)
    rng = random.Random(0)
    adapter.loss(model, adapter.make_batch(["first batch text", "another one"], rng))
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1)
    adapter.after_step(model)  # the momentum encoder moves
    got = adapter.queue_negatives(model)
    e = adapter.queue.entries[0]
    torch.testing.assert_close(got, adapter._momentum_encode(e["input_ids"], e["attention_mask"]))


CORPUS = [
    SENTENCE,
    "A man is playing a guitar on the street.",
    "Stock markets fell sharply after the central bank raised interest rates.",
    "The children built a large sand castle on the beach.",
    "Heavy rain caused flooding in several coastal towns.",
    "Scientists discovered a new species of deep sea fish.",
    "The old library reopened after a long renovation.",
    "Electric cars are becoming cheaper every year.",
]


def _train(tiny_dir, out, budget, resume=False, **overrides):
    from bench.train import Budget, TrainConfig, TrainJob, train_method

    return train_method(TrainJob(
        method="esimcse", backbone=str(tiny_dir), texts=CORPUS, budget=Budget.parse(budget),
        config=TrainConfig(max_len=32, batch_size=4, progress=False, checkpoint_every=3, keep_checkpoints=2),
        out_dir=out, resume=resume, method_overrides=overrides,
    ))


@pytest.mark.parametrize("budget", ["steps=2", "examples=6", "tokens=40", "seconds=0.01"])
def test_trains_under_every_budget_kind_with_shared_trainer(tiny, tmp_path, budget):
    result = _train(tiny[1], tmp_path / "run", budget)
    assert result.stopped_by == budget.split("=")[0] and result.consumed.steps >= 1
    assert all(x == x for x in result.losses)  # finite (trainer stops on non-finite)


@pytest.mark.parametrize("refresh", [True, False])
def test_resume_with_shared_trainer(tiny, tmp_path, refresh):
    """Stop after 3 of 6 steps, resume. With the queue re-encoded each step the continuation is exact; in the
    paper's cached mode the resumed queue is re-encoded by the restored momentum encoder, so the losses after
    the resume may differ slightly from the uninterrupted run (by design: no embedding of an unknown state)."""
    import shutil

    from bench.train.checkpoint import LATEST, checkpoint_root, load_checkpoint

    full = _train(tiny[1], tmp_path / "full", "steps=6", refresh_queue_each_step=refresh)
    _train(tiny[1], tmp_path / "part", "steps=6", refresh_queue_each_step=refresh)
    root = checkpoint_root(tmp_path / "part")
    _, state = load_checkpoint(root / "step-00000003")
    assert set(state["adapter"]) == {"momentum_encoder", "queue"} and len(state["adapter"]["queue"]) == 3
    shutil.rmtree(root / "step-00000006")
    (root / LATEST).write_text("step-00000003")
    resumed = _train(tiny[1], tmp_path / "part", "steps=6", resume=True, refresh_queue_each_step=refresh)
    assert resumed.resumed_from == 3 and len(resumed.losses) == 3
    if refresh:
        assert resumed.losses == pytest.approx(full.losses[3:], rel=1e-5, abs=1e-6)
    else:
        assert resumed.losses == pytest.approx(full.losses[3:], rel=0.2, abs=0.05)
