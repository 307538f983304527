"""Budgets (SPEC §1): parsing, clear errors, and each kind stopping training within one step of its limit."""

from __future__ import annotations

import pytest
import torch

from bench.runtime.errors import ConfigError
from bench.train import Budget, Consumption, TrainConfig, TrainJob, train


# ------------------------------------------------------------------------------------------ parsing
def test_parse_every_kind_and_canonical_label():
    b = Budget.parse(" seconds=1.5 , steps=10,examples=64,tokens=5000")
    assert (b.steps, b.examples, b.tokens, b.seconds) == (10, 64, 5000, 1.5)
    assert b.label() == "steps=10,examples=64,tokens=5000,seconds=1.5"
    assert b.asked() == {"steps": 10, "examples": 64, "tokens": 5000, "seconds": 1.5}
    assert Budget.parse("STEPS=3").steps == 3 and Budget.parse("seconds=600").label() == "seconds=600"
    assert Budget.parse("examples=1e3").examples == 1000


@pytest.mark.parametrize(
    "text, message",
    [
        ("steps=0", "must be a positive"),
        ("seconds=0", "must be a positive"),
        ("tokens=-5", "must be a positive"),
        ("", "empty budget"),
        (" , ", "empty budget"),
        ("steps", "is not kind=N"),
        ("100", "is not kind=N"),
        ("epochs=1", "unknown budget kind 'epochs'"),
        ("steps=ten", "is not a number"),
        ("steps=1.5", "whole number"),
        ("steps=3,steps=4", "given twice"),
        ("seconds=nan", "positive finite"),
        ("seconds=inf", "positive finite"),
    ],
)
def test_malformed_or_zero_budget_is_a_clear_config_error(text, message):
    with pytest.raises(ConfigError, match=message):
        Budget.parse(text)


def test_budget_object_validation():
    with pytest.raises(ConfigError, match="at least one limit"):
        Budget()
    with pytest.raises(ConfigError, match="positive"):
        Budget(steps=0)


def test_reached_is_the_first_kind_at_its_limit_and_planned_steps():
    b = Budget(steps=10, examples=100)
    assert b.reached(Consumption(steps=9, examples=99)) is None
    assert b.reached(Consumption(steps=9, examples=100)) == "examples"
    assert b.reached(Consumption(steps=10, examples=10)) == "steps"
    assert b.planned_steps(16) == 7  # ceil(100 / 16) < 10
    assert Budget(tokens=10).planned_steps(16) is None and Budget(seconds=1).planned_steps(16) is None


# ------------------------------------------------------------------------------- stops at the limit
class CountingAdapter:
    """A minimal adapter: a linear probe over token counts. Every batch has `batch_size` examples and a known
    number of tokens, and each loss call can sleep, so every budget kind is exercised deterministically."""

    name = "counting"

    def __init__(self, tokens_per_example: int = 7, sleep: float = 0.0):
        self.tokens_per_example = tokens_per_example
        self.sleep = sleep

    def setup(self, model):
        return []

    def make_batch(self, texts, rng):
        return {"x": torch.ones(len(texts), 4), "n_examples": len(texts), "n_tokens": len(texts) * self.tokens_per_example}

    def loss(self, model, batch):
        if self.sleep:
            import time

            time.sleep(self.sleep)
        return model(batch["x"]).pow(2).mean(), {}

    def after_step(self, model):
        return None

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        return None


TEXTS = [f"text {i}" for i in range(50)]


def _run(tmp_path, budget: str, adapter=None, batch_size: int = 4, loader_workers: int | None = None):
    cfg = TrainConfig(batch_size=batch_size, progress=False, checkpoint_every=0, loader_workers=loader_workers)
    job = TrainJob(TEXTS, Budget.parse(budget), cfg, tmp_path / budget.replace("=", "-").replace(".", "_"), save_encoder_dir=None)
    return train(adapter or CountingAdapter(), torch.nn.Linear(4, 1), None, job)


@pytest.mark.parametrize(
    "budget, kind, steps",
    [
        ("steps=5", "steps", 5),
        ("examples=18", "examples", 5),  # 4 per step: 16 < 18 after 4 steps, 20 >= 18 after 5
        ("examples=20", "examples", 5),  # exactly at the limit: no extra step
        ("tokens=100", "tokens", 4),  # 28 tokens per step: 84 < 100, 112 >= 100
        ("tokens=112", "tokens", 4),
    ],
)
def test_count_budgets_stop_within_one_step_of_the_limit(tmp_path, budget, kind, steps):
    result = _run(tmp_path, budget)
    limit = Budget.parse(budget).asked()[kind]
    assert result.stopped_by == kind
    assert result.consumed.steps == steps
    used = getattr(result.consumed, kind)
    per_step = {"steps": 1, "examples": 4, "tokens": 28}[kind]
    assert limit <= used < limit + per_step  # reached, overshooting by less than one step
    assert result.consumed.examples == 4 * steps and result.consumed.tokens == 28 * steps


class FakeClock:
    """The trainer's clock, advanced only by the steps themselves: a seconds budget is tested at its step boundary
    without reading the wall clock (how close a real run stops is measured in benchmarks/budget_seconds.py)."""

    def __init__(self):
        self.now = 1000.0

    def monotonic(self):
        return self.now


class TickingAdapter(CountingAdapter):
    def __init__(self, clock: FakeClock, step_seconds: float):
        super().__init__()
        self.clock, self.step_seconds = clock, step_seconds

    def loss(self, model, batch):
        self.clock.now += self.step_seconds
        return super().loss(model, batch)


def test_seconds_budget_stops_at_the_first_step_boundary_past_it(tmp_path, monkeypatch):
    import bench.train.trainer as trainer

    clock = FakeClock()
    monkeypatch.setattr(trainer, "time", clock)
    result = _run(tmp_path, "seconds=0.45", adapter=TickingAdapter(clock, 0.1), loader_workers=0)
    # 0.4 s after four steps is under the limit, 0.5 s after the fifth is past it: the run stops there, not later
    assert result.stopped_by == "seconds"
    assert result.consumed.steps == 5 and result.consumed.seconds == pytest.approx(0.5)
    assert result.consumed.peak_memory_mb > 0 and result.consumed.peak_memory_kind == "process_rss_peak"


def test_first_reached_of_several_kinds_stops(tmp_path):
    result = _run(tmp_path, "steps=100,examples=12,seconds=600")
    assert result.stopped_by == "examples" and result.consumed.steps == 3


def test_token_or_seconds_only_budget_is_bounded_by_one_epoch(tmp_path):
    result = _run(tmp_path, "tokens=1000000")
    assert result.stopped_by == "schedule" and result.consumed.steps == result.horizon == 13  # ceil(50 / 4)


def test_linear_schedule_decays_lr_to_zero_at_the_horizon():
    from bench.train.trainer import linear_schedule

    assert [linear_schedule(s, 0, 4) for s in range(4)] == [1.0, 0.75, 0.5, 0.25]
    assert [round(linear_schedule(s, 2, 6), 3) for s in range(6)] == [0.5, 1.0, 1.0, 0.75, 0.5, 0.25]
