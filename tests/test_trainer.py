"""The shared trainer: every method learns on real text, training log in the DB, safetensors checkpoints, NaN stop,
saved encoder folder loadable by sentence-transformers."""

from __future__ import annotations

import json
import statistics

import pytest
import torch

from bench.runtime.errors import ConfigError, TrainingError
from bench.train import Budget, TrainConfig, TrainJob, train
from bench.train.checkpoint import LATEST, checkpoint_root, latest_checkpoint, load_checkpoint
from methods import all_methods, get_method


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: threads only add contention


@pytest.fixture(scope="module")
def tok(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="module")
def wiki_texts(tok):
    """16 real Wikipedia summaries (the packaged wiki-offline corpus) that every method can use: multi-sentence
    (intra-reference) with at least two crop chunks."""
    from bench.data.errors import DataError
    from bench.data.corpus import load_corpus, wiki_offline_file

    try:
        wiki_offline_file()
    except DataError as exc:
        pytest.skip(str(exc))

    crop = get_method("crop").build(tokenizer=tok, max_len=48)
    texts = [t for t in load_corpus(limit=400).texts if crop.accepts(t)][:16]
    assert len(texts) == 16
    return texts


def _model(tiny_model_dir):
    from transformers import AutoModel

    return AutoModel.from_pretrained(tiny_model_dir)


def _cfg(**kw):
    base = dict(max_len=48, batch_size=8, lr=1e-3, progress=False, checkpoint_every=0, seed=0)
    base.update(kw)
    return TrainConfig(**base)


TRAINABLE = sorted(s.name for s in all_methods() if s.trains)


def test_every_builtin_method_is_registered_with_paper_and_defaults():
    names = {s.name for s in all_methods()}
    assert {"vanilla", "simcse", "esimcse", "laser3-self", "laser3-intra", "cocodr-pt", "crop", "paser", "mlm"} <= names
    assert get_method("laser3").name == "laser3-self" and get_method("untrained").name == "vanilla"
    assert not get_method("vanilla").trains
    for spec in all_methods():
        assert spec.paper and spec.summary and spec.defaults() is not None
    with pytest.raises(KeyError, match="unknown method 'nope'"):
        get_method("nope")
    with pytest.raises(ValueError, match="no hyper-parameter"):
        get_method("crop").config_from({"chunk_size": 3})


@pytest.mark.parametrize("method", TRAINABLE)
def test_loss_falls_over_30_steps_on_real_text(method, tiny_model_dir, tok, wiki_texts, tmp_path):
    model = _model(tiny_model_dir)
    adapter = get_method(method).build(tokenizer=tok, max_len=48, seed=0)
    job = TrainJob(wiki_texts, Budget(steps=30), _cfg(), tmp_path / method, save_encoder_dir=None)
    result = train(adapter, model, tok, job)
    losses = result.losses
    assert result.consumed.steps == 30 and len(losses) == 30 and result.stopped_by == "steps"
    first, last = statistics.mean(losses[:5]), statistics.mean(losses[-5:])
    assert last < 0.98 * first, (method, losses)


def test_vanilla_does_not_train(tmp_path):
    from bench.train import train_method

    with pytest.raises(ConfigError, match="does not train"):
        train_method(TrainJob(["x"], Budget(steps=1), _cfg(), tmp_path, method="vanilla", backbone="minilm"))


def test_training_log_in_db_and_safetensors_checkpoints_and_encoder(tiny_model_dir, tok, wiki_texts, tmp_path):
    from safetensors import safe_open

    from results_db import ResultsDB

    db = ResultsDB(tmp_path / "r.sqlite")
    run_id = db.create_run(kind="train", model="x", method="laser3-self", status="running")
    adapter = get_method("laser3-self").build(tokenizer=tok, max_len=48, seed=0)
    cfg = _cfg(checkpoint_every=2, keep_checkpoints=2, lr=1e-4)
    job = TrainJob(wiki_texts, Budget(steps=5), cfg, tmp_path / "out", db=db, run_id=run_id)
    result = train(adapter, _model(tiny_model_dir), tok, job)

    log = db.train_log(run_id)
    assert log["step"].tolist() == [1, 2, 3, 4, 5]
    assert log["loss"].tolist() == pytest.approx(result.losses)
    assert log["lr"].tolist() == pytest.approx([1e-4 * (5 - s) / 5 for s in range(5)])  # warm-up 0, linear decay
    assert (log["examples_per_s"] > 0).all()
    extra = log["extra"].iloc[0]
    extra = json.loads(extra) if isinstance(extra, str) else extra
    assert extra["examples"] == 8 and extra["tokens"] > 0

    root = checkpoint_root(tmp_path / "out")
    kept = sorted(p.name for p in root.iterdir() if p.name.startswith("step-"))
    assert kept == ["step-00000004", "step-00000005"]  # every 2 steps + at the stop, newest 2 kept
    assert (root / LATEST).read_text() == "step-00000005" and latest_checkpoint(tmp_path / "out") == root / "step-00000005"
    for name in ("model.safetensors", "state.safetensors"):
        with safe_open(str(root / "step-00000005" / name), "pt") as f:
            assert len(list(f.keys())) > 0
    model_state, state = load_checkpoint(root / "step-00000005")
    assert state["consumed"]["steps"] == 5 and "optimizer" in state and "rng" in state
    assert not list(root.glob("*.pt")) and not list(root.rglob("*.bin"))

    enc = result.encoder_dir
    assert enc == tmp_path / "out" / "encoder" and (enc / "model.safetensors").exists()
    assert json.loads((enc / "1_Pooling" / "config.json").read_text())["pooling_mode_mean_tokens"] is True
    with safe_open(str(enc / "model.safetensors"), "pt") as f:
        saved = {k: f.get_tensor(k) for k in f.keys()}
    for key, tensor in model_state.items():
        torch.testing.assert_close(saved[key], tensor)  # the encoder folder holds the final weights


def test_saved_encoder_loads_in_sentence_transformers_and_bench_encoder(tiny_model_dir, tok, wiki_texts, tmp_path):
    st = pytest.importorskip("sentence_transformers")
    from bench.encode.encoder import Encoder

    adapter = get_method("simcse").build(tokenizer=tok, max_len=48, seed=0)
    result = train(adapter, _model(tiny_model_dir), tok, TrainJob(wiki_texts, Budget(steps=2), _cfg(), tmp_path / "out"))
    model = st.SentenceTransformer(str(result.encoder_dir), device="cpu")
    texts = ["A man is playing a guitar.", "The stock market fell sharply."]
    ours = Encoder.load(str(result.encoder_dir), use_cache=False, show_progress=False).encode(texts)
    theirs = model.encode(texts, normalize_embeddings=True)
    assert ours.shape == theirs.shape == (2, 32)
    assert torch.allclose(torch.from_numpy(ours), torch.from_numpy(theirs), atol=1e-5)


class AtStep:
    """Wraps an adapter and does `at` instead of its loss at the given (1-based) loss call."""

    def __init__(self, inner, step: int):
        self.inner, self.step, self.calls = inner, step, 0
        self.name = inner.name

    def __getattr__(self, item):
        if item == "inner":  # not set yet: a copy being unpickled in a loader worker
            raise AttributeError(item)
        return getattr(self.inner, item)

    def loss(self, model, batch):
        self.calls += 1
        return self.at(model, batch) if self.calls == self.step else self.inner.loss(model, batch)


class NanAt(AtStep):
    """Its loss is NaN at the given step: an injected divergence."""

    def at(self, model, batch):
        loss, logs = self.inner.loss(model, batch)
        return loss * float("nan"), logs


def test_nan_loss_stops_with_clear_error_and_saved_checkpoint(tiny_model_dir, tok, wiki_texts, tmp_path):
    from results_db import ResultsDB

    db = ResultsDB(tmp_path / "r.sqlite")
    run_id = db.create_run(kind="train", model="x", method="simcse", status="running")
    adapter = NanAt(get_method("simcse").build(tokenizer=tok, max_len=48, seed=0), step=3)
    model = _model(tiny_model_dir)
    with pytest.raises(TrainingError, match=r"non-finite loss \(nan\) at step 3 of simcse; stopped, checkpoint saved at .*step-00000002"):
        train(adapter, model, tok, TrainJob(wiki_texts, Budget(steps=10), _cfg(), tmp_path / "out", db=db, run_id=run_id))
    ckpt = latest_checkpoint(tmp_path / "out")
    assert ckpt is not None and ckpt.name == "step-00000002"
    model_state, state = load_checkpoint(ckpt)
    assert state["consumed"]["steps"] == 2
    assert all(torch.isfinite(t).all() for t in model_state.values())  # the weights before the bad step
    assert db.train_log(run_id)["step"].tolist() == [1, 2]  # the log up to the stop is in the DB
    assert not (tmp_path / "out" / "encoder").exists()  # a diverged run saves no encoder


def test_existing_checkpoint_without_resume_is_refused(tiny_model_dir, tok, wiki_texts, tmp_path):
    adapter = get_method("crop").build(tokenizer=tok, max_len=48, seed=0)
    train(adapter, _model(tiny_model_dir), tok,
          TrainJob(wiki_texts, Budget(steps=1), _cfg(), tmp_path / "out", save_encoder_dir=None))
    with pytest.raises(ConfigError, match="already holds a checkpoint"):
        train(adapter, _model(tiny_model_dir), tok, TrainJob(wiki_texts, Budget(steps=1), _cfg(), tmp_path / "out"))


def test_method_that_can_use_no_text_is_a_clear_error(tiny_model_dir, tok, tmp_path):
    adapter = get_method("laser3-intra").build(tokenizer=tok, max_len=48, seed=0)
    with pytest.raises(TrainingError, match="can use no text"):
        train(adapter, _model(tiny_model_dir), tok, TrainJob(["One sentence only.", "Another single sentence."],
              Budget(steps=1), _cfg(), tmp_path / "out", save_encoder_dir=None))
    with pytest.raises(TrainingError, match="empty"):
        train(adapter, _model(tiny_model_dir), tok, TrainJob([], Budget(steps=1), _cfg(), tmp_path / "o2"))


def test_train_config_validation():
    for kw, msg in [({"batch_size": 1}, "batch_size"), ({"lr": 0}, "lr"), ({"max_len": 4}, "max_len"),
                    ({"precision": "fp8"}, "precision")]:
        with pytest.raises(ConfigError, match=msg):
            TrainConfig(**kw)


def test_train_state_round_trips_and_a_checkpoint_missing_a_field_is_one_error(tmp_path):
    from bench.runtime.errors import TrainingError
    from bench.train.checkpoint import TrainState, load_train_state, save_checkpoint

    state = TrainState(fingerprint="abc", consumed={"steps": 4, "examples": 32}, stream={"epoch": 0, "index": 4},
                       rng={"python": (3, (1, 2), None), "torch": torch.arange(3, dtype=torch.uint8)},
                       optimizer={"state": {0: {"exp_avg": torch.ones(2)}}}, adapter={}, extra=[{"w": torch.zeros(1)}])  # fmt: skip
    folder = save_checkpoint(tmp_path, 4, {"w": torch.ones(2)}, state)
    _, back = load_train_state(folder)
    assert back.fingerprint == "abc" and back.consumed == {"steps": 4, "examples": 32} and back.rng["python"] == (3, (1, 2), None)
    assert torch.equal(back.optimizer["state"][0]["exp_avg"], torch.ones(2)) and torch.equal(back.rng["torch"], state.rng["torch"])
    partial = state.as_dict()
    del partial["stream"]
    folder = save_checkpoint(tmp_path, 5, {"w": torch.ones(2)}, partial)
    with pytest.raises(TrainingError, match="lacks stream"):
        load_train_state(folder)


def test_optional_adapter_hooks_have_their_declared_defaults():
    """An adapter that defines only the protocol's required members trains with AdapterHooks' defaults; the
    built-ins' own hooks are read as they declare them."""
    from bench.train.method import AdapterHooks

    class Bare:
        def make_batch(self, texts, rng):  # noqa: ANN001, ANN202
            return None

    assert AdapterHooks.of(Bare()) == AdapterHooks() and AdapterHooks.of(Bare()).label == "?"
    simcse = AdapterHooks.of(type("S", (), {"name": "simcse", "shard_trim": ("anchor_", "positive_")})())
    assert (simcse.label, simcse.shard_trim, simcse.accepts) == ("simcse", ("anchor_", "positive_"), None)
    from methods.crop import CropAdapter

    assert AdapterHooks.of(object.__new__(CropAdapter)).accepts is not None  # crop refuses texts of one chunk


def test_a_bench_run_shorter_than_its_checkpoint_interval_writes_no_checkpoint(tiny_model_dir, tok, wiki_texts, tmp_path,
                                                                              monkeypatch):
    """A run that ends before its first scheduled checkpoint keeps only its encoder (bench run deleted the
    checkpoint it wrote at the end: hundreds of MiB written for nothing); --keep-checkpoints still saves one, and so
    does a run that saved one on its schedule."""
    from bench.experiment.run_spec import RunSpec
    from bench.train import checkpoint

    saves: list[int] = []
    real_save = checkpoint.CheckpointWriter.save
    monkeypatch.setattr(checkpoint.CheckpointWriter, "save",
                        lambda self, step, *a, **k: saves.append(step) or real_save(self, step, *a, **k))
    config = RunSpec.from_values(dict(method="simcse", budget="steps=3", batch_size=8, max_len=48)).train
    assert config.checkpoint_at_end is False  # bench run's config, without --keep-checkpoints
    result = train(get_method("simcse").build(tokenizer=tok, max_len=48, seed=0), _model(tiny_model_dir), tok,
                   TrainJob(wiki_texts, Budget(steps=3), _cfg(checkpoint_at_end=False), tmp_path / "short"))  # fmt: skip
    assert result.consumed.steps == 3 and saves == [] and latest_checkpoint(tmp_path / "short") is None
    assert (result.encoder_dir / "config.json").exists()
    kept = RunSpec.from_values(dict(method="simcse", budget="steps=3", keep_checkpoints=True)).train
    assert kept.checkpoint_at_end is True
    train(get_method("simcse").build(tokenizer=tok, max_len=48, seed=0), _model(tiny_model_dir), tok,
          TrainJob(wiki_texts, Budget(steps=3), _cfg(checkpoint_at_end=False, checkpoint_every=2), tmp_path / "scheduled"))
    assert saves == [2, 3]  # the scheduled one, and the stop's (a kill after it loses nothing)
