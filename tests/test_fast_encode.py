"""Evaluation at an accelerator's speed, checked on the CPU (issue 36): reduced-precision weights keep the scores,
shape-bounded batches give the same embeddings, a second model with the same tokenizer reads its token ids from the
disk, the attention choice and path are in every score's info, and the unpadded (varlen) path pools exactly as the
padded one. The speed itself is measured on a GPU by benchmarks/gpu.py."""

from __future__ import annotations

import numpy as np
import pytest

from bench.encode.encoder import Encoder
from bench.runtime.errors import ConfigError

pytestmark = pytest.mark.usefixtures("one_thread")

TEXTS = [f"sentence number {i} " + "about cats and dogs " * (i % 9) for i in range(40)]


def load(folder, tmp_path, **kw):
    kw = {"max_len": 48, "show_progress": False, "device": "cpu", "backend": "torch", "cache_dir": tmp_path / "cache", **kw}
    return Encoder.load(str(folder), **kw)


def test_bf16_weights_keep_the_stsb_score_within_01_of_fp32():
    """all-MiniLM-L6-v2 on the first 200 STS-B test pairs: the weights themselves are cast (not autocast)."""
    import torch

    from bench.evaluate.suites import EvalContext, parse_suites

    ((suite, _),) = parse_suites("sts:stsb")
    scores = {}
    for precision in ("fp32", "bf16"):
        enc = Encoder.load("minilm", backend="torch", device="cpu", precision=precision, use_cache=False,
                           show_progress=False)  # fmt: skip
        (record,) = suite.evaluate(enc, "stsb", EvalContext(limit=200))
        assert next(enc.model.parameters()).dtype == {"fp32": torch.float32, "bf16": torch.bfloat16}[precision]
        scores[precision] = record.value
    assert scores["fp32"] > 80  # the reference path scores as it should on these pairs
    assert abs(scores["bf16"] - scores["fp32"]) <= 0.1


def test_a_model_handed_in_is_never_cast(tiny_model_dir, tmp_path):
    """A model being trained (scored for a learning curve) keeps its fp32 weights; bf16 then runs as autocast."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(str(tiny_model_dir))
    enc = Encoder(model, AutoTokenizer.from_pretrained(str(tiny_model_dir)), name="t", device="cpu", backend="torch",
                  precision="bf16", use_cache=False, show_progress=False)  # fmt: skip
    vectors = enc.encode(TEXTS[:4])
    assert next(model.parameters()).dtype == torch.float32 and np.isfinite(vectors).all()


def test_fp16_is_its_own_cache_namespace(tiny_model_dir, tmp_path):
    fp32, fp16 = load(tiny_model_dir, tmp_path), load(tiny_model_dir, tmp_path, precision="fp16")
    assert fp32.cache.namespace.endswith("|fp32") and fp16.cache.namespace.endswith("|fp16")
    assert fp16.describe()["precision"] == "fp16"


def test_shape_bounded_batches_give_the_unbucketed_embeddings(tiny_model_dir, tmp_path):
    plain = load(tiny_model_dir, tmp_path, use_cache=False)
    reference = plain.encode(TEXTS)
    bounded = load(tiny_model_dir, tmp_path, use_cache=False, batch_size=16)
    bounded.shape_bounded, bounded.batch_tokens = True, 256  # the accelerator plan, on the CPU
    got = bounded.encode(TEXTS)
    np.testing.assert_allclose(got, reference, atol=2e-5)
    widths = {w for _, w in bounded.shapes}
    assert widths <= {8, 16, 24, 32, 40, 48} and all(r in (1, 2, 4, 8, 16) or r == 256 // w for r, w in bounded.shapes)
    assert bounded.texts_encoded == len(TEXTS)  # padding rows are not counted as texts
    for start in range(1, 9):  # more sets of other sizes (attack variants, other chunks): no shape outside the set
        bounded.encode(TEXTS[start::2])
    assert {w for _, w in bounded.shapes} <= {8, 16, 24, 32, 40, 48}


def test_a_second_model_with_the_same_tokenizer_reads_the_token_ids(tiny_model_dir, tmp_path):
    from bench.encode.backbones import make_random_bert

    other_dir = make_random_bert(tmp_path / "other", size="tiny", seed=1)  # other weights, the same tokenizer
    first = load(tiny_model_dir, tmp_path)
    first.encode(TEXTS)
    assert first.token_ids.tokenized == len(TEXTS) and first.token_ids.hits == 0
    second = load(other_dir, tmp_path)
    vectors = second.encode(TEXTS)
    assert second.texts_encoded == len(TEXTS)  # another model: every embedding is new
    assert second.token_ids.hits == len(TEXTS) and second.token_ids.tokenized == 0
    fresh = load(other_dir, tmp_path / "elsewhere", use_cache=False)
    np.testing.assert_allclose(vectors, fresh.encode(TEXTS), atol=1e-6)
    assert not fresh.token_ids.on_disk  # --no-cache: no token-id cache on disk either


def test_every_score_names_the_attention_kernels_and_path(tiny_model_dir, tmp_path):
    from bench.evaluate import score_info

    enc = load(tiny_model_dir, tmp_path, use_cache=False)
    before = score_info.start(enc)
    enc.encode(TEXTS[:5])
    info = score_info.measure(enc, before, "sts", set())
    # flash-attn is not installed here: the padded path, and the CPU's default kernels
    assert info["attention_path"] == "padded" and info["attention_kernels"] == "sdpa default"
    assert info["batch_shapes"] == len(enc.shapes) >= 1


def test_the_flash_backend_is_refused_in_one_line_without_flash_attn_and_auto_never_picks_it(tiny_model_dir, tmp_path):
    from bench.encode.backends import resolve_backend
    from bench.encode.backends.torch_varlen import flash_attn_installed

    if flash_attn_installed():
        pytest.skip("flash-attn is installed here")
    with pytest.raises(ConfigError, match="flash-attn"):
        load(tiny_model_dir, tmp_path, backend="flash")
    assert resolve_backend("auto", "cuda", "bf16") == "torch"


def test_the_unpadded_path_pools_as_the_padded_one(tiny_model_dir, tmp_path, monkeypatch):
    """The varlen backend's unpadding (one packed sequence, positions restarting per row, cumulative lengths) and its
    pooling, run through a reference attention that does what flash-attn's varlen kernel does, one row at a time."""
    import torch
    from transformers import AttentionInterface

    from bench.encode.backends import torch_varlen

    def varlen_reference(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):  # noqa: ANN001, ANN003, ANN202
        cu = kwargs["cu_seq_lens_q"].tolist()
        assert attention_mask is None and query.shape[0] == 1  # packed: no padding anywhere
        parts = [torch.nn.functional.scaled_dot_product_attention(query[:, :, a:b], key[:, :, a:b], value[:, :, a:b],
                                                                  scale=scaling) for a, b in zip(cu[:-1], cu[1:])]  # fmt: skip
        return torch.cat(parts, dim=2).transpose(1, 2).contiguous(), None

    AttentionInterface.register("lenbench_varlen_reference", varlen_reference)
    monkeypatch.setattr(torch_varlen.VarlenBackend, "implementation", "lenbench_varlen_reference")
    monkeypatch.setattr(torch_varlen.VarlenBackend, "unusable", staticmethod(lambda device, precision: None))
    for pooling in ("mean", "cls"):
        padded = load(tiny_model_dir, tmp_path, use_cache=False, pooling=pooling).encode(TEXTS)
        varlen = load(tiny_model_dir, tmp_path, use_cache=False, pooling=pooling, backend="flash")
        np.testing.assert_allclose(varlen.encode(TEXTS), padded, atol=2e-5)
        assert varlen.attention_info()["attention_path"] == "unpadded (flash-attn varlen)"


def test_batch_tokens_is_an_encoder_option_from_the_command_line_to_the_plan(tiny_model_dir, tmp_path):
    from bench.cli import build_parser
    from bench.encode.options import EncoderOptions
    from bench.experiment.eval_spec import EvalOptions

    args = build_parser().parse_args(["eval", "--model", "minilm", "--suite", "sts:stsb", "--batch-tokens", "96"])
    assert EvalOptions.from_args(args).encoder.batch_tokens == 96
    enc = load(tiny_model_dir, tmp_path, use_cache=False, batch_tokens=96, batch_size=None)
    # None rows: the CPU's 64, times 12 for a model 12 times narrower than MiniLM (32 wide: bench.encode.batching)
    assert (enc.batch_size, enc.batch_tokens) == (768, 96)
    enc.encode(TEXTS)
    assert all(rows == 1 or rows * width <= 96 for rows, width in enc.shapes)
    with pytest.raises(ConfigError, match="batch_tokens"):
        EncoderOptions(batch_tokens=0)
