"""PaSeR adapter: RAKE, phrase masking, decoding signal, shared embeddings, saved encoder, EDA source."""

from __future__ import annotations

import logging
import math
import random

import pytest
import torch
from safetensors import safe_open

from methods import get_method
from methods.eda import wordnet_available
from methods.paser import decoding_signal
from methods.rake import rake, split_words

SENTENCE = "Fast machine translation is hard, but statistical machine learning is a fast field of research."


@pytest.fixture(scope="module")
def tok(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


def _model(tiny_model_dir):
    from transformers import AutoModel

    torch.manual_seed(0)
    return AutoModel.from_pretrained(tiny_model_dir)


def _adapter(tok, **overrides):
    spec = get_method("paser")
    return spec.build(spec.config_from(overrides), tokenizer=tok, max_len=32, seed=0)


def test_rake_matches_hand_computation():
    # Stop words (NLTK's English list): is, but, a, of; punctuation also splits. Candidate phrases:
    #   [fast machine translation] [hard] [statistical machine learning] [fast field] [research]
    # freq: fast 2, machine 2, others 1.  deg(w) = sum of the lengths of the phrases w occurs in:
    #   fast 3+2=5, machine 3+3=6, translation 3, hard 1, statistical 3, learning 3, field 2, research 1.
    # word score deg/freq: fast 2.5, machine 3, translation 3, hard 1, statistical 3, learning 3, field 2, research 1.
    # phrase score = sum: statistical machine learning 3+3+3 = 9; fast machine translation 2.5+3+3 = 8.5;
    #   fast field 2.5+2 = 4.5; hard 1; research 1 (tie: sentence order).
    phrases = rake(split_words(SENTENCE))
    assert [(p.text, p.score) for p in phrases] == [
        ("statistical machine learning", 9.0),
        ("fast machine translation", 8.5),
        ("fast field", 4.5),
        ("hard", 1.0),
        ("research", 1.0),
    ]
    assert rake(split_words("the of and, is it.")) == []


def test_rake_reproduces_the_papers_masked_phrases():
    """PaSeR Table 7: the phrases masked in "At least 89 dead ..." and "There are two options for you"."""
    # least/89/dead: deg 3, freq 1 -> 3 each, 9; china/earthquakes: 2 each, 4.
    assert [(p.text, p.score) for p in rake(split_words("At least 89 dead in china earthquakes"))] == [
        ("least 89 dead", 9.0),
        ("china earthquakes", 4.0),
    ]
    assert [p.text for p in rake(split_words("There are two options for you"))] == ["two options"]
    # Repeated phrase: one entry, every occurrence listed (all are masked); freq counts both occurrences.
    (p,) = [q for q in rake(split_words("Red wine, red wine and cheese.")) if q.text == "red wine"]
    assert p.spans == ((0, 2), (3, 5)) and p.score == 4.0  # red: deg 4 / freq 2 = 2; wine: 2


def test_masking_covers_exactly_the_top3_phrase_tokens(tok):
    adapter = _adapter(tok, synonyms_source="none")
    ex = adapter.build_example(SENTENCE, random.Random(0))
    s_ids, t_ids, labels = ex["s_ids"], ex["t_ids"], ex["mlm_labels"]
    assert s_ids == tok(SENTENCE)["input_ids"]  # no augmentation: s is the text
    # Expected mask from the word positions of the top-3 phrases (word indices by hand).
    words = split_words(SENTENCE)
    masked_words = {0, 1, 2, 7, 8, 9, 12, 13}  # fast machine translation / statistical machine learning / fast field
    enc = tok(words, is_split_into_words=True)
    expected_masked = [i for i, w in enumerate(enc.word_ids()) if w in masked_words]
    got_masked = [i for i, t in enumerate(t_ids) if t == tok.mask_token_id]
    assert got_masked == expected_masked
    assert len(t_ids) == len(s_ids)
    for i, (a, b) in enumerate(zip(s_ids, t_ids)):
        if i in expected_masked:
            assert labels[i] == a  # MLM label: the original token
        else:
            assert b == a and labels[i] == -100
    # Decoder target: phrases in RAKE rank order, each closed by [SEP].
    assert tok.decode(ex["target"]) == (
        "statistical machine learning [SEP] fast machine translation [SEP] fast field [SEP]"
    )


@pytest.mark.skipif(not wordnet_available(), reason="WordNet (Debian wordnet-base) not installed")
def test_synonym_replacement_never_touches_masked_words(tok):
    adapter = _adapter(tok)
    assert adapter.config.synonyms_source.startswith("wordnet:")
    plain = _adapter(tok, synonyms_source="none").build_example(SENTENCE, random.Random(0))
    masked_target = [l for l in plain["mlm_labels"] if l != -100]
    assert len(masked_target) == 8
    replaced = 0
    for seed in range(20):
        ex = adapter.build_example(SENTENCE, random.Random(seed))
        # The MLM labels are still exactly the phrase tokens, in order.
        assert [l for l in ex["mlm_labels"] if l != -100] == masked_target
        replaced += ex["s_ids"] != plain["s_ids"]
    assert replaced >= 15  # s is augmented (at least one word replaced) in almost every draw


def test_missing_wordnet_is_said_once_and_recorded(tok, monkeypatch, caplog):
    monkeypatch.setenv("LENBENCH_WORDNET", "/nonexistent/wordnet")
    with caplog.at_level(logging.WARNING, logger="methods.paser"):
        adapter = _adapter(tok)
    assert adapter.config.synonyms_source == "none"
    assert sum("WITHOUT the EDA synonym" in r.getMessage() for r in caplog.records) == 1
    assert adapter.build_example(SENTENCE, random.Random(0)) is not None  # still trains
    with pytest.raises(FileNotFoundError, match="wordnet-base"):
        _adapter(tok, synonyms_source="wordnet")


def test_decoding_signal_shape_and_scaling():
    torch.manual_seed(0)
    e_s, e_t = torch.randn(4, 8), torch.randn(4, 8)
    sig = decoding_signal(e_s, e_t, 10.0, 10.0)
    assert sig.shape == (4, 4, 8)
    torch.testing.assert_close(sig[:, 0], e_s)
    torch.testing.assert_close(sig[:, 1], e_t)
    torch.testing.assert_close(sig[:, 2], 10 * (e_s - e_t).abs())
    torch.testing.assert_close(sig[:, 3], 10 * (e_s * e_t).abs())  # Eq. 2: n * |E_s * E_s~|
    torch.testing.assert_close(decoding_signal(e_s, e_t, 10.0, 10.0, product_abs=False)[:, 3], 10 * e_s * e_t)


def test_defaults_and_memory_layouts(tok, tiny_model_dir):
    from bench.train.method import MethodAdapter

    assert isinstance(_adapter(tok, synonyms_source="none"), MethodAdapter)
    cfg = get_method("paser").defaults()
    assert (cfg.top_k_phrases, cfg.signal_diff_scale, cfg.signal_product_scale, cfg.decoder_layers, cfg.pooling) == (
        3, 10.0, 10.0, 6, "cls"
    )
    assert cfg.skip_generative_over_tokens is None
    for layout, slots in (("concat", 1), ("slots", 4)):
        adapter = _adapter(tok, synonyms_source="none", memory_layout=layout, decoder_layers=1)
        (heads,) = adapter.setup(_model(tiny_model_dir))
        assert heads.decoder.memory(torch.randn(2, 4, 32)).shape == (2, slots, 32)
    with pytest.raises(ValueError, match="memory_layout"):
        get_method("paser").config_from({"memory_layout": "nope"})


def test_decoder_layers_are_initialised_independently(tok, tiny_model_dir):
    adapter = _adapter(tok, synonyms_source="none", decoder_layers=3)
    (heads,) = adapter.setup(_model(tiny_model_dir))
    w = [layer.linear1.weight for layer in heads.decoder.layers.layers]
    assert not torch.equal(w[0], w[1]) and not torch.equal(w[1], w[2])  # not deep copies of one layer
    assert heads.decoder.positions.weight.std() < 0.05  # BERT-scale positions, not N(0, 1)


def test_run_config_records_the_resolved_synonym_source(monkeypatch):
    """`bench run` records asdict(config) before building the adapter: the config itself says what will run."""
    from dataclasses import asdict

    spec = get_method("paser")
    if wordnet_available():
        assert asdict(spec.config_from({}))["synonyms_source"].startswith("wordnet:")
    monkeypatch.setenv("LENBENCH_WORDNET", "/nonexistent/wordnet-2")
    assert asdict(spec.config_from({}))["synonyms_source"] == "none"
    assert asdict(spec.config_from({"synonyms_source": "none"}))["synonyms_source"] == "none"
    with pytest.raises(ValueError, match="wordnet-base"):  # a bad hyper-parameter value for the CLI
        spec.config_from({"synonyms_source": "wordnet"})


def test_decoder_shares_word_embeddings_and_trains_them(tok, tiny_model_dir):
    model = _model(tiny_model_dir)
    adapter = _adapter(tok, synonyms_source="none")
    (heads,) = adapter.setup(model)
    emb = model.get_input_embeddings().weight
    assert heads.decoder.word_embedding_weight.data_ptr() == emb.data_ptr()
    assert len(heads.decoder.layers.layers) == 6
    # Not listed twice: the training-only modules do not own the encoder's embedding.
    assert all(p.data_ptr() != emb.data_ptr() for p in heads.parameters())
    assert not any(k.startswith("_shared") or "word_embeddings" in k for k in heads.state_dict())
    batch = adapter.make_batch([SENTENCE, "A man is playing a guitar on the street."], random.Random(0))
    assert batch["decoder_input_ids"][0, 0] == tok.cls_token_id
    model.train()
    loss, logs = adapter.loss(model, batch)
    assert logs["mlm_loss"] > 0 and logs["generative_loss"] > 0
    torch.testing.assert_close(loss.detach(), torch.tensor(logs["mlm_loss"] + logs["generative_loss"]), rtol=1e-5, atol=1e-5)
    model.zero_grad()
    # Gradient of the generative loss alone reaches the shared embedding matrix through the decoder.
    signal = torch.randn(2, 4, 32)
    heads.decoder(signal, batch["decoder_input_ids"], batch["decoder_attention_mask"]).sum().backward()
    assert emb.grad is not None and emb.grad.abs().sum() > 0


def test_training_lowers_loss_and_saved_encoder_has_no_decoder(tok, tiny_model_dir, tmp_path):
    from bench.encode.encoder import Encoder
    from bench.encode.loading import save_encoder

    model = _model(tiny_model_dir)
    adapter = _adapter(tok, synonyms_source="none", decoder_layers=2)
    extra = adapter.setup(model)
    params = list(model.parameters()) + [p for m in extra for p in m.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-3)
    texts = [SENTENCE, "A man is playing a guitar on the street.", "Stock markets fell after the bank raised rates."]
    model.train()
    losses = []
    for _ in range(15):
        loss, _ = adapter.loss(model, adapter.make_batch(texts, random.Random(0)))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    out = save_encoder(model, tok, tmp_path / "enc", pooling="cls", max_len=32)
    with safe_open(str(out / "model.safetensors"), "pt") as fh:
        keys = list(fh.keys())
    assert keys and not any("decoder" in k or "mlm" in k or "memory" in k for k in keys)
    enc = Encoder.load(str(out), show_progress=False, use_cache=False, device="cpu")
    assert enc.pooling == "cls"
    vec = enc.encode(["a test sentence"])
    assert vec.shape == (1, 32)



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


@pytest.mark.parametrize("budget", ["steps=2", "examples=6", "tokens=50", "seconds=0.01"])
def test_trains_under_every_budget_kind_with_shared_trainer(tiny_model_dir, tmp_path, budget):
    from bench.train import Budget, TrainConfig, TrainJob, train_method

    result = train_method(TrainJob(
        method="paser", backbone=str(tiny_model_dir), texts=CORPUS, budget=Budget.parse(budget),
        config=TrainConfig(max_len=32, batch_size=4, progress=False, pooling="cls"), out_dir=tmp_path / "run",
        method_overrides={"synonyms_source": "none", "decoder_layers": 2},
    ))
    kind = budget.split("=")[0]
    assert result.stopped_by == kind and result.consumed.steps >= 1
    assert all(math.isfinite(x) for x in result.losses)


def test_resume_with_shared_trainer_is_exact(tiny_model_dir, tmp_path):
    """Stop after 3 of 6 steps (checkpoint), resume: same losses and weights as the uninterrupted run."""
    from bench.train import Budget, TrainConfig, TrainJob, train_method
    from bench.train.checkpoint import LATEST, checkpoint_root

    def run(out, resume=False):
        return train_method(TrainJob(
            method="paser", backbone=str(tiny_model_dir), texts=CORPUS, budget=Budget(steps=6),
            config=TrainConfig(max_len=32, batch_size=4, progress=False, checkpoint_every=3, keep_checkpoints=2),
            out_dir=out, resume=resume, method_overrides={"synonyms_source": "none", "decoder_layers": 2},
        ))

    full = run(tmp_path / "full")
    part = run(tmp_path / "part")
    root = checkpoint_root(tmp_path / "part")
    import shutil

    shutil.rmtree(root / "step-00000006")
    (root / LATEST).write_text("step-00000003")
    resumed = run(tmp_path / "part", resume=True)
    assert resumed.resumed_from == 3
    assert resumed.losses == pytest.approx(full.losses[3:], rel=1e-5, abs=1e-6)
    assert part.losses == pytest.approx(full.losses, rel=1e-5, abs=1e-6)


def test_trained_encoder_has_no_decoder_keys_and_loads_in_bench_eval(tiny_model_dir, tmp_path):
    from bench.cli import main
    from bench.train import Budget, TrainConfig, TrainJob, train_method
    from results_db import ResultsDB
    from tests.conftest import write_sts

    result = train_method(TrainJob(
        method="paser", backbone=str(tiny_model_dir), texts=CORPUS, budget=Budget(steps=1),
        config=TrainConfig(max_len=32, batch_size=4, progress=False, pooling="cls"), out_dir=tmp_path / "run",
        method_overrides={"synonyms_source": "none", "decoder_layers": 1},
    ))
    with safe_open(str(result.encoder_dir / "model.safetensors"), "pt") as fh:
        keys = list(fh.keys())
    assert keys and not any(k.split(".")[0] in ("decoder", "mlm_head", "heads", "layers") or "memory" in k for k in keys)
    pairs = [(a, b, float(i)) for i, (a, b) in enumerate(zip(CORPUS[:5], CORPUS[1:6]))]
    write_sts(tmp_path / "data" / "sts" / "stsb-test.tsv", pairs)
    db = tmp_path / "r.sqlite"
    args = ["eval", "--model", str(result.encoder_dir), "--suite", "sts:stsb", "--max-len", "32",
            "--data-dir", str(tmp_path / "data"), "--db", str(db), "--no-cache"]  # fmt: skip
    assert main(args) == 0
    scores = ResultsDB(db).scores()
    assert scores["dataset"].tolist() == ["stsb"] and scores["value"].notna().all()
