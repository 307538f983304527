"""`EncoderOptions` (bench.encode.options): one value, checked when made, carried whole from a command's spec to the
encoder and to the learning-curve hook, with `auto` resolved once by the device policy."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from bench.encode.options import ENCODER_DEFAULTS, EncoderOptions
from bench.runtime.errors import ConfigError


@pytest.mark.parametrize("changes, message", [
    ({"pooling": "max"}, "pooling 'max' is not one of mean, cls"),
    ({"max_len": 2}, "max_len must be >= 4 and <= 100,000, got 2"),
    ({"batch_size": "64"}, "batch_size '64' is not a whole number"),
    ({"precision": "fp8"}, "precision 'fp8' is not one of auto, fp32, bf16, fp16"),
    ({"backend": "tensorrt"}, "backend 'tensorrt' is not one of auto, torch, onnx"),
    ({"emb_dtype": "int8"}, "emb_dtype 'int8' is not one of fp32, fp16"),
])  # fmt: skip
def test_a_bad_option_is_one_config_error_when_the_value_is_made(changes, message):
    with pytest.raises(ConfigError, match=message):
        EncoderOptions(**changes)


def test_auto_is_resolved_once_by_the_device_policy_and_stays_resolved():
    from bench.runtime.device import resolve_device

    here = resolve_device(None)
    resolved = EncoderOptions(max_len=np.int64(32)).resolved()
    assert resolved.max_len == 32 and type(resolved.max_len) is int
    assert resolved.device == here and resolved.precision in ("fp32", "bf16") and resolved.backend in ("torch", "onnx")
    assert resolved.resolved() == resolved  # nothing left to resolve
    cpu = EncoderOptions(device="cpu", precision="bf16").resolved()
    assert (cpu.precision, cpu.backend) == ("bf16", "torch")  # onnx runs fp32 only: auto picks torch
    with pytest.raises(ConfigError, match="--backend onnx runs in fp32 only"):
        EncoderOptions(device="cpu", precision="bf16", backend="onnx").resolved()


def test_the_encoder_keeps_the_value_it_was_given_resolved(tiny_model_dir):
    from bench.encode.encoder import Encoder

    options = EncoderOptions(max_len=32, batch_size=8, device="cpu", precision="bf16", use_cache=False)
    enc = Encoder.load(str(tiny_model_dir), options, show_progress=False)
    assert enc.options == EncoderOptions(pooling="mean", max_len=32, batch_size=8, device="cpu", backend="torch",
                                         precision="bf16", use_cache=False)  # fmt: skip
    assert (enc.max_len, enc.batch_size, enc.precision, enc.use_cache) == (32, 8, "bf16", False)
    assert enc.describe()["precision"] == "bf16" and enc.describe()["backend"] == "torch"
    # a field by name on top of the value (how tests and benchmarks build one)
    assert Encoder.load(str(tiny_model_dir), options, max_len=16, precision="fp32").options.max_len == 16


def test_a_run_spec_carries_one_value_to_the_final_scores_and_the_curve_hook():
    from bench.experiment.curves import curve_hook
    from bench.experiment.run_spec import RunSpec

    spec = RunSpec.from_values(dict(method="simcse", suite=["heldout"], precision="bf16", emb_dtype="fp16",
                                    eval_max_len=96, eval_batch_size=8, pooling="cls", no_cache=True, allow_pickle=True))
    final = spec.eval_settings().encoder
    assert final == EncoderOptions(pooling="cls", max_len=96, batch_size=8, precision="bf16", emb_dtype="fp16",
                                   use_cache=False, allow_pickle=True)  # fmt: skip
    hook = curve_hook(spec, {"every": 10, "suite": ["heldout"], "limit": 20}, None, 1, "simcse", print)
    assert hook.evaluate.options == final
    assert spec.encoder is final and spec.train.pooling == "cls" and spec.train.precision == "bf16"  # one value each
    assert RunSpec().encoder == replace(ENCODER_DEFAULTS, pooling="mean")  # bench run pools with mean


def test_an_unasked_batch_size_is_the_devices_and_hashes_as_the_old_default(monkeypatch):
    """On the CPU 64 texts a batch; on a GPU up to 1,024 within its token budget (64 rows of sentences leave it idle).
    Rows scored with the device's size keep the config hash of rows asked for 64 (the former default); the token
    budget is how texts are batched, never what they score, so it stays outside the hash."""
    import bench.runtime.device as device
    from bench.encode.batching import device_batching
    from bench.experiment.run_spec import RunSpec

    assert device_batching("cpu", None, None, 2048) == (64, 2048)
    monkeypatch.setattr(device, "device_memory", lambda d: 80 << 30)
    assert device_batching("cuda", None, None, None) == (1024, 65536)
    assert device_batching("cuda", 32, 4096, None) == (32, 4096)  # asked values win
    default = RunSpec.from_values(dict(method="simcse", suite=["heldout"]))
    assert default.encoder.batch_size is None
    budget = RunSpec.from_values(dict(method="simcse", suite=["heldout"], eval_batch_tokens=4096))
    assert budget.encoder.batch_tokens == 4096
    hashes = {s.configs(100).comparison for s in (default, budget, RunSpec.from_values(dict(method="simcse", suite=["heldout"], eval_batch_size=64)))}
    assert len(hashes) == 1
    assert RunSpec.from_values(dict(method="simcse", suite=["heldout"], eval_batch_size=32)).configs(100).comparison not in hashes
    # the line that redoes a row names an asked size (it is in the hash), never an unasked one
    assert "--eval-batch-size 32" in RunSpec.from_values(dict(method="simcse", suite=["heldout"], eval_batch_size=32)).reproduce_command("simcse", True)
    assert "--eval-batch-size" not in default.reproduce_command("simcse", True)


def test_auto_is_resolved_by_one_function_everywhere():
    """bench.encode.auto.resolve_auto is the only caller of the device policy's resolvers and of the backends'
    auto choice: the encoder, the identity, the trainer and the runtime record all go through it."""
    import ast
    from pathlib import Path

    repo = Path(__file__).resolve().parent.parent
    resolvers = {"resolve_device", "resolve_precision", "resolve_backend"}
    allowed = {"bench/encode/auto.py", "bench/runtime/device.py", "bench/encode/backends/__init__.py"}
    callers = []
    for top in ("bench", "lenbench", "results_db", "leaderboard"):
        for path in sorted((repo / top).rglob("*.py")):
            where = str(path.relative_to(repo))
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in resolvers:
                    if where not in allowed:
                        callers.append(f"{where}:{node.lineno}")
    assert callers == []


def test_a_run_records_the_training_precision_it_trains_at_not_the_evaluations():
    """On CUDA `auto` scores at fp16 and trains at bf16 autocast: the runtime records both as they run (it recorded
    fp16 for the training when the resolved evaluation precision was resolved again for training)."""
    from bench.encode.auto import resolve_auto
    from bench.experiment.run_job import PreparedRun, run_record
    from bench.experiment.run_spec import RunSpec

    spec = RunSpec.from_values({"method": "simcse", "suite": ["heldout"], "device": "cuda", "backend": "torch"})
    runtime = run_record(PreparedRun(spec, {}, None, 16))
    assert (runtime["device"], runtime["precision"], runtime["train_precision"]) == ("cuda", "fp16", "bf16")
    assert runtime["encoder_backend"] == "torch"
    assert resolve_auto("cpu", "auto") == resolve_auto("cpu", "fp32")  # fp32 on the CPU, for both
