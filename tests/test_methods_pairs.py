"""Pair construction of each method pinned to its paper (SPEC §2), plus the InfoNCE loss against a hand computation.

laser3: shared/papers/000 §4 "Implementation Details" (m for 10 / 50 tokens at max len 256 is 1..25 / 1..5);
laser3-intra / cocodr-pt: §4 "Intra-reference" and "Baselines"; crop: shared/papers/003 §2; simcse: two dropout
masks over the same text; mlm: BERT's 15% with 80/10/10.
"""

from __future__ import annotations

import math
import random

import pytest
import torch

from bench.evaluate.attacks import elongate
from methods import get_method
from methods.losses import info_nce
from methods.mlm import MlmConfig, mask_tokens
from methods.pairs import choose_anchor

# Three sentences that pysbd splits as written.
S1 = "The river flows through the old town."
S2 = "Its bridges were built in the twelfth century by local masons."
S3 = "Today the town is known for its annual music festival."
DOC = f"{S1} {S2} {S3}"


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: threads only add contention


@pytest.fixture(scope="module")
def tok(reference_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(reference_dir)


def body(tok, text: str) -> list[int]:
    return tok(text, add_special_tokens=False)["input_ids"]


def strip(tok, ids: list[int]) -> list[int]:
    assert ids[0] == tok.cls_token_id and ids[-1] == tok.sep_token_id
    return ids[1:-1]


def text_with_tokens(tok, n: int) -> str:
    """A text of exactly n WordPiece tokens (one common word per token)."""
    words = "alpha river stone green house music night water light paper".split()
    text = " ".join(words[i % len(words)] for i in range(n))
    assert len(body(tok, text)) == n
    return text


# ------------------------------------------------------------------------------------------ laser3
@pytest.mark.parametrize("n_tokens, expected_max", [(10, 25), (50, 5)])
def test_laser3_m_range_at_max_len_256(tok, n_tokens, expected_max):
    adapter = get_method("laser3-self").build(tokenizer=tok, max_len=256, seed=0)
    rng = random.Random(0)
    ms = {adapter.elongation_factor(n_tokens, rng) for _ in range(3000)}
    assert ms == set(range(1, expected_max + 1))  # uniform over 1..max: every value shows up, nothing beyond


@pytest.mark.parametrize("n_tokens, expected_max", [(10, 25), (50, 5)])
def test_laser3_self_positive_is_the_anchor_elongated_m_times_within_max_len(tok, n_tokens, expected_max):
    adapter = get_method("laser3").build(tokenizer=tok, max_len=256, seed=0)  # alias of laser3-self
    text = text_with_tokens(tok, n_tokens)
    rng = random.Random(1)
    seen = set()
    for _ in range(400):
        anchor, positive = adapter.make_pair(text, rng)
        assert strip(tok, anchor) == body(tok, text)  # anchor: the text itself (one sentence)
        assert len(positive) <= 256
        m, rest = divmod(len(positive) - 2, n_tokens)
        assert rest == 0 and 1 <= m <= expected_max
        if m not in seen:  # token-level elongation == tokenising f(S, m) = S repeated m times joined with a space
            assert positive == tok(elongate(text, m))["input_ids"]
        seen.add(m)
    assert seen == set(range(1, expected_max + 1))


def test_laser3_never_exceeds_max_len_on_long_and_odd_inputs(tok):
    for max_len in (64, 128, 256):
        adapter = get_method("laser3-self").build(tokenizer=tok, max_len=max_len, seed=0)
        rng = random.Random(max_len)
        for n in (1, 3, 31, 62, 63, 127, 200, 300):
            text = text_with_tokens(tok, n)
            for _ in range(50):
                anchor, positive = adapter.make_pair(text, rng)
                assert len(anchor) <= max_len and len(positive) <= max_len
                if n >= max_len - 2:
                    assert positive == anchor  # no room: m = 1 (the anchor is cut at max_len)


def test_laser3_twice_and_none_ablations(tok):
    spec = get_method("laser3-self")
    text = text_with_tokens(tok, 10)
    rng = random.Random(0)
    twice = spec.build(spec.config_from({"m_mode": "twice"}), tokenizer=tok, max_len=256)
    none = spec.build(spec.config_from({"m_mode": "none"}), tokenizer=tok, max_len=256)
    assert len(twice.make_pair(text, rng)[1]) == 2 + 20
    assert len(none.make_pair(text, rng)[1]) == 2 + 10
    assert len(twice.make_pair(text_with_tokens(tok, 200), rng)[1]) == 2 + 200  # twice does not fit: m = 1
    with pytest.raises(ValueError, match="m_mode"):
        spec.config_from({"m_mode": "thrice"})


def test_laser3_self_anchor_is_the_first_sentence_of_a_document(tok):
    adapter = get_method("laser3-self").build(tokenizer=tok, max_len=256, seed=0)
    anchor, positive = adapter.make_pair(DOC, random.Random(0))
    first = body(tok, S1)
    assert strip(tok, anchor) == first
    m = (len(positive) - 2) // len(first)
    assert strip(tok, positive) == first * m


def test_laser3_intra_anchor_is_first_sentence_elongated_positive_is_the_rest(tok):
    adapter = get_method("laser3-intra").build(tokenizer=tok, max_len=256, seed=0)
    first, rest = body(tok, S1), body(tok, f"{S2} {S3}")
    rng = random.Random(0)
    ms = set()
    for _ in range(300):
        anchor, positive = adapter.make_pair(DOC, rng)
        assert strip(tok, positive) == rest
        m, r = divmod(len(anchor) - 2, len(first))
        assert r == 0 and strip(tok, anchor) == first * m and len(anchor) <= 256
        ms.add(m)
    assert ms == set(range(1, 254 // len(first) + 1))
    assert not adapter.accepts(S1) and adapter.make_pair(S1, rng) is None  # no rest of the document


def test_cocodr_pt_anchor_is_first_sentence_not_elongated_positive_is_the_rest(tok):
    adapter = get_method("cocodr-pt").build(tokenizer=tok, max_len=256, seed=0)
    for seed in range(20):
        anchor, positive = adapter.make_pair(DOC, random.Random(seed))
        assert strip(tok, anchor) == body(tok, S1)
        assert strip(tok, positive) == body(tok, f"{S2} {S3}")
    assert not adapter.accepts(S1) and adapter.make_pair(S1, random.Random(0)) is None


def test_random_anchor_ablation_takes_any_sentence_and_the_others_in_order():
    seen = set()
    for seed in range(60):
        anchor, rest = choose_anchor(DOC, "random", random.Random(seed))
        others = [s for s in (S1, S2, S3) if s != anchor]
        assert anchor in (S1, S2, S3) and rest == " ".join(others)
        seen.add(anchor)
    assert seen == {S1, S2, S3}


# -------------------------------------------------------------------------------------------- crop
def sentence(n_chars: int, word: str) -> str:
    """A sentence of exactly n_chars characters: 'Word word word ... word.' padded with x's before the dot."""
    words = [word.capitalize()]
    while len(" ".join(words)) + len(word) + 2 <= n_chars:
        words.append(word)
    s = " ".join(words)
    s = s + "x" * (n_chars - 1 - len(s)) + "."
    assert len(s) == n_chars
    return s


def test_crop_drops_sentences_under_100_or_over_250_chars_and_pairs_two_distinct_chunks(tok):
    from methods.crop import kept_sentences

    kept = [sentence(100, "alpha"), sentence(180, "beta"), sentence(250, "gamma"), sentence(140, "delta")]
    dropped = [sentence(99, "short"), sentence(251, "long"), sentence(40, "tiny")]
    # interleave: short/long sentences between the kept ones
    text = " ".join([dropped[0], kept[0], kept[1], dropped[1], kept[2], dropped[2], kept[3]])
    assert kept_sentences(text, 100, 250) == kept

    adapter = get_method("crop").build(tokenizer=tok, max_len=256, seed=0)
    chunks = [f"{kept[i]} {kept[i + 1]}" for i in range(3)]  # every run of t=2 consecutive kept sentences
    assert adapter.text_chunks(text) == chunks
    chunk_ids = {tuple(tok(c, truncation=True, max_length=256)["input_ids"]): c for c in chunks}
    rng = random.Random(0)
    pairs = set()
    for _ in range(300):
        a, p = adapter.make_pair(text, rng)
        assert tuple(a) in chunk_ids and tuple(p) in chunk_ids  # both sides are whole 2-sentence chunks
        assert a != p  # two distinct chunks (they may overlap, never coincide)
        pairs.add((chunk_ids[tuple(a)], chunk_ids[tuple(p)]))
    assert len(pairs) == 6  # every ordered pair of distinct chunks is drawn
    for s in dropped:
        assert all(s not in c for pair in pairs for c in pair)


def test_crop_skips_texts_with_fewer_than_two_chunks(tok):
    adapter = get_method("crop").build(tokenizer=tok, max_len=256, seed=0)
    two_kept = " ".join([sentence(120, "alpha"), sentence(60, "short"), sentence(130, "beta")])
    assert adapter.text_chunks(two_kept) == [f"{sentence(120, 'alpha')} {sentence(130, 'beta')}"]
    assert not adapter.accepts(two_kept)
    assert adapter.make_pair(two_kept, random.Random(0)) is None
    assert adapter.make_batch([two_kept, DOC], random.Random(0)) is None  # no pair at all -> no batch


# ------------------------------------------------------------------------------------------ simcse
def test_simcse_passes_the_same_text_twice_with_dropout_active(tok, tiny_model_dir):
    from transformers import AutoModel

    spec = get_method("simcse")
    adapter = spec.build(tokenizer=tok, max_len=32, seed=0)
    model = AutoModel.from_pretrained(tiny_model_dir)
    adapter.setup(model)
    dropouts = [m for m in model.modules() if isinstance(m, torch.nn.Dropout)]
    assert dropouts and all(m.p == 0.1 for m in dropouts)

    texts = ["A man is playing a guitar.", "The stock market fell sharply today.", "Children play in the park."]
    batch = adapter.make_batch(texts, random.Random(0))
    assert torch.equal(batch["anchor_input_ids"], batch["positive_input_ids"])
    assert strip(tok, batch["anchor_input_ids"][0].tolist()) == body(tok, texts[0])

    calls = []
    model.register_forward_pre_hook(lambda mod, args, kwargs: calls.append((kwargs["input_ids"].clone(), mod.training)), with_kwargs=True)
    model.train()  # what the trainer does
    torch.manual_seed(0)
    a, p = adapter.embed_pair(model, batch)
    (ids, training), n = calls[0], len(texts)
    assert len(calls) == 1 and training and torch.equal(ids[:n], ids[n:])  # one forward over the text twice (2B rows)
    assert not torch.allclose(a, p)  # two dropout masks: two different views of one text
    model.eval()
    a, p = adapter.embed_pair(model, batch)
    torch.testing.assert_close(a, p)  # without dropout the two views coincide: dropout is the augmentation

    with pytest.raises(ValueError, match="dropout"):
        spec.config_from({"dropout": 0.0})


# --------------------------------------------------------------------------------------------- mlm
def test_mlm_masks_15_percent_with_80_10_10():
    vocab = 30522
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1000, 2000, (400, 128), generator=g)
    special = torch.zeros_like(ids, dtype=torch.bool)
    special[:, 0] = special[:, -1] = True
    special[:, 100:] = True  # padding
    corrupted, labels = mask_tokens(ids, special, MlmConfig(), mask_id=103, vocab=vocab, generator=g)

    selected = labels != -100
    n_candidates = int((~special).sum())
    assert not selected[special].any()  # [CLS]/[SEP]/[PAD] never predicted
    assert torch.equal(labels[selected], ids[selected])  # labels: the original tokens
    assert torch.equal(corrupted[~selected], ids[~selected])  # nothing else is touched
    frac = selected.sum().item() / n_candidates
    assert frac == pytest.approx(0.15, abs=0.006)  # 39,200 candidates: sd 0.0018

    n = selected.sum().item()
    masked = (corrupted[selected] == 103).sum().item() / n
    kept = (corrupted[selected] == ids[selected]).sum().item() / n
    randomised = 1 - masked - kept
    assert masked == pytest.approx(0.8, abs=0.02)  # ~5,900 selected: sd 0.005
    assert kept == pytest.approx(0.1, abs=0.015)
    assert randomised == pytest.approx(0.1, abs=0.015)
    assert ((corrupted[selected] >= 2000) | (corrupted[selected] < 1000)).float().mean() > 0.09  # random = whole vocab


def test_mlm_batch_never_masks_special_tokens(tok):
    adapter = get_method("mlm").build(tokenizer=tok, max_len=32, seed=0)
    batch = adapter.make_batch([DOC, S1, "short"], random.Random(0))
    ids, labels, mask = batch["input_ids"], batch["labels"], batch["attention_mask"]
    assert (labels[:, 0] == -100).all() and (labels[mask == 0] == -100).all()
    assert (ids[:, 0] == tok.cls_token_id).all()
    assert batch["n_examples"] == 3 and batch["n_tokens"] == int(mask.sum())


# ------------------------------------------------------------------------------------------ InfoNCE
def test_info_nce_matches_hand_computation_on_3x3():
    """cos matrix (rows anchors, cols positives) = [[1, 0, r], [0, 1, 0], [0, 0, r]] with r = 1/sqrt(2); t = 0.5."""
    anchors = torch.tensor([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 3.0]])  # norms differ: cosine, not dot
    positives = torch.tensor([[5.0, 0.0, 0.0], [0.0, 0.5, 0.0], [1.0, 0.0, 1.0]])
    r = 1 / math.sqrt(2)
    t = 0.5
    l1 = -math.log(math.exp(1 / t) / (math.exp(1 / t) + math.exp(0) + math.exp(r / t)))
    l2 = -math.log(math.exp(1 / t) / (math.exp(0) + math.exp(1 / t) + math.exp(0)))
    l3 = -math.log(math.exp(r / t) / (math.exp(0) + math.exp(0) + math.exp(r / t)))
    expected = (l1 + l2 + l3) / 3
    assert expected == pytest.approx(0.38723, abs=1e-5)  # the number itself, so a wrong formula above shows
    assert info_nce(anchors, positives, temperature=t).item() == pytest.approx(expected, rel=1e-6)
    # an extra negative identical to every anchor's positive direction adds one exp(cos/t) term per row
    extra = torch.tensor([[0.0, 1.0, 0.0]])
    l2x = -math.log(math.exp(1 / t) / (math.exp(0) + math.exp(1 / t) + math.exp(0) + math.exp(1 / t)))
    l1x = -math.log(math.exp(1 / t) / (math.exp(1 / t) + 1 + math.exp(r / t) + 1))
    l3x = -math.log(math.exp(r / t) / (1 + 1 + math.exp(r / t) + 1))
    got = info_nce(anchors, positives, temperature=t, extra_negatives=extra).item()
    assert got == pytest.approx((l1x + l2x + l3x) / 3, rel=1e-6)


def test_mlm_head_ties_the_word_embeddings_without_storing_them_again(tiny_model_dir):
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(str(tiny_model_dir))
    adapter = get_method("mlm").build(tokenizer=AutoTokenizer.from_pretrained(str(tiny_model_dir)), max_len=32, seed=0)
    (head,) = adapter.setup(model)
    embedding = model.get_input_embeddings().weight
    assert head._shared.weight.data_ptr() == embedding.data_ptr()  # tied: same storage
    # the checkpoint of the training-only head holds no copy of the encoder's embedding matrix
    assert all(t.shape != embedding.shape for t in head.state_dict().values())
    assert all(p.data_ptr() != embedding.data_ptr() for p in head.parameters())
