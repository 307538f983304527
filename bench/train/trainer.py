"""The shared trainer (SPEC §1): one loop for every method, so a comparison differs only in the adapter.

AdamW over the encoder and the adapter's extra modules, a linear warm-up (0 steps by default) and linear decay
to zero at the schedule's horizon, seeded RNGs, gradient clipping, bf16 autocast on CUDA, a progress bar with loss
and throughput, training-log rows in the results DB, safetensors checkpoints on a schedule (every tenth of the run
or N steps, and at least every 10 minutes: CheckpointSchedule) and at the stop, `resume=True` continuing from the
newest checkpoint to the same final step count, a non-finite loss stopping the run with a TrainingError after
saving a checkpoint, and SIGTERM/SIGINT stopping it after the current step with a checkpoint (bench.runtime.signals).

Schedule horizon: the step count the budget implies (steps, or examples / batch size); when the budget only
limits tokens or seconds, one epoch of the corpus (the papers train one epoch) - training also stops there.

Several processes (launched by torchrun; see bench.runtime.distributed): `batch_size` stays the global batch. Every rank
draws the same global batch (same seeded stream and rng), trains on its contiguous shard of the rows, and the
gradients are averaged over ranks; contrastive losses gather the positives of every rank (methods/losses.py), so a
step is the one-device step on the whole batch. Budgets count global steps, examples and tokens; rank 0's clock
decides the wall-clock budget. Rank 0 alone writes checkpoints, training-log rows, the progress bar and the encoder;
a checkpoint holds no per-rank state, so `resume=True` works at any world size.
"""

from __future__ import annotations

import logging
import math
import signal
import random
import resource
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from bench.runtime import distributed, progress
from bench.runtime.device import PRECISIONS, resolve_device, resolve_precision
from bench.runtime.device import autocast as device_autocast
from bench.runtime.errors import ConfigError, TrainingError
from bench.runtime.provenance import config_hash
from bench.train.budget import Budget, Consumption
from bench.runtime import signals
from bench.train.backbone import check_backbone_methods, load_backbone
from bench.train.loss_check import check_loss
from bench.train.sharding import shard_batch
from bench.train.checkpoint import CheckpointSchedule, TrainState, latest_checkpoint, load_train_state, save_checkpoint

log = logging.getLogger(__name__)



@dataclass
class TrainConfig:
    """Settings every method of a comparison shares (SPEC §1). Defaults suit a CPU; papers use bs 64, max_len 256."""

    max_len: int = 64
    batch_size: int = 16
    lr: float = 3e-5
    weight_decay: float = 0.0  # SimCSE / LA(SER)^3 train with the HF Trainer default (no decay)
    warmup_steps: int = 0  # SPEC §1: linear warm-up 0, then linear decay
    max_grad_norm: float = 1.0  # HF Trainer default clipping, as the reference implementations
    seed: int = 0
    pooling: str = "mean"  # pooling the saved encoder declares (used at evaluation)
    checkpoint_every: int | None = None  # steps between checkpoints; None: a tenth of the run (CheckpointSchedule)
    checkpoint_minutes: float = 10.0  # and at least this often (0: no time rule), so a kill loses at most this
    keep_checkpoints: int = 1
    log_every: int = 1  # steps between training-log rows
    epochs_horizon: float = 1.0  # schedule horizon when the budget gives no step count
    precision: str = "auto"  # auto: bf16 autocast on CUDA, fp32 on CPU
    device: str | None = None  # None: cuda if available
    progress: bool = True

    def __post_init__(self) -> None:
        if self.max_len < 8:
            raise ConfigError(f"max_len must be at least 8 tokens, got {self.max_len}")
        if self.batch_size < 2:
            raise ConfigError(f"batch_size must be at least 2 (in-batch negatives), got {self.batch_size}")
        if not self.lr > 0:
            raise ConfigError(f"lr must be positive, got {self.lr}")
        if self.warmup_steps < 0 or (self.checkpoint_every or 0) < 0 or self.checkpoint_minutes < 0 or self.log_every < 1:
            raise ConfigError("warmup_steps, checkpoint_every and checkpoint_minutes must be >= 0 and log_every >= 1")
        if self.precision not in PRECISIONS:
            raise ConfigError(f"precision {self.precision!r} is not one of {PRECISIONS}")

    def shared(self) -> dict[str, Any]:
        """The fields that define a comparison (progress/logging/device cadence excluded)."""
        d = asdict(self)
        for k in ("checkpoint_every", "checkpoint_minutes", "keep_checkpoints", "log_every", "device", "progress"):
            d.pop(k)
        return d


@dataclass
class EvalHook:
    """Evaluation during training (learning curves): `evaluate(model, tokenizer, step)` is called after steps every,
    2 * every, ... and after the last step. The trainer knows nothing of what it does (the command builds it from
    bench.evaluate); it runs it isolated, so training is exactly what it would be without it: in eval mode under
    no_grad, with every RNG (python, numpy, torch, CUDA) saved before and restored after, train mode restored, and
    its wall time left out of the run's consumed seconds (a seconds budget buys the same training). Under several
    processes every rank calls it (the evaluation shards its encoding like the final one)."""

    every: int
    evaluate: Any  # callable(model, tokenizer, step) -> None

    def __post_init__(self) -> None:
        if self.every < 1:
            raise ConfigError(f"--eval-every must be a positive number of steps, got {self.every}")


def run_isolated(hook: EvalHook, model: torch.nn.Module, extra: Sequence[torch.nn.Module], tokenizer: Any, step: int,
                 device: torch.device) -> float:  # fmt: skip
    """Call the hook without disturbing training (see EvalHook); returns the seconds it took."""
    import numpy as np

    start = time.monotonic()
    states = (random.getstate(), np.random.get_state(), torch.get_rng_state(),
              torch.cuda.get_rng_state(device) if device.type == "cuda" else None)  # fmt: skip
    modes = [m.training for m in (model, *extra)]
    try:
        model.eval()
        with torch.no_grad():
            hook.evaluate(model, tokenizer, step)
    finally:
        random.setstate(states[0])
        np.random.set_state(states[1])
        torch.set_rng_state(states[2])
        if states[3] is not None:
            torch.cuda.set_rng_state(states[3], device)
        for m, mode in zip((model, *extra), modes):
            m.train(mode)
    return time.monotonic() - start


@dataclass
class TrainResult:
    consumed: Consumption
    stopped_by: str  # a budget kind, or "schedule" (the horizon was reached)
    horizon: int
    final_loss: float
    out_dir: Path
    encoder_dir: Path | None = None
    resumed_from: int | None = None  # the step a resumed run started at
    losses: list[float] = field(default_factory=list)


# ------------------------------------------------------------------------------------ helpers
class TextStream:
    """Seeded shuffled passes over the corpus; its position (epoch, index) is saved for resume."""

    def __init__(self, n_texts: int, seed: int):
        self.n = n_texts
        self.seed = seed
        self.epoch = 0
        self.index = 0
        self._order = self._shuffle(0)

    def _shuffle(self, epoch: int) -> list[int]:
        order = list(range(self.n))
        random.Random(f"{self.seed}|epoch|{epoch}").shuffle(order)
        return order

    def next_index(self) -> int:
        if self.index >= self.n:
            self.epoch += 1
            self.index = 0
            self._order = self._shuffle(self.epoch)
        i = self._order[self.index]
        self.index += 1
        return i

    def state(self) -> dict[str, int]:
        return {"epoch": self.epoch, "index": self.index}

    def restore(self, state: dict[str, int]) -> None:
        self.epoch, self.index = int(state["epoch"]), int(state["index"])
        self._order = self._shuffle(self.epoch)


def linear_schedule(step: int, warmup: int, horizon: int) -> float:
    """LR factor: linear warm-up to 1 over `warmup` steps, then linear decay to 0 at `horizon`."""
    if warmup and step < warmup:
        return (step + 1) / warmup
    return max(0.0, (horizon - step) / max(1, horizon - warmup))


def peak_memory(device: torch.device) -> tuple[float, str]:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20, "cuda_max_allocated"
    # ru_maxrss is in KiB on Linux: the peak resident set of this process (model, data, evaluation included).
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "process_rss_peak"


def _batch_tokens(batch: dict[str, Any]) -> int:
    if "n_tokens" in batch:
        return int(batch["n_tokens"])
    return int(sum(int(v.sum()) for k, v in batch.items() if k.endswith("attention_mask") and torch.is_tensor(v)))


def _batch_examples(batch: dict[str, Any], fallback: int) -> int:
    return int(batch.get("n_examples", fallback))


def _parameters(model: torch.nn.Module, extra: Sequence[torch.nn.Module]) -> list[torch.nn.Parameter]:
    """Trainable parameters, each once (extra modules may share the encoder's word embeddings)."""
    seen: set[int] = set()
    params = []
    for module in [model, *extra]:
        for p in module.parameters():
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                params.append(p)
    return params


def _rng_state(py_rng: random.Random, device: torch.device) -> dict[str, Any]:
    state: dict[str, Any] = {"python": py_rng.getstate(), "torch": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def _restore_rng(py_rng: random.Random, state: dict[str, Any], device: torch.device) -> None:
    py_rng.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], device)


def _seed_rank_torch_rng(seed: int, step: int, device: torch.device) -> None:
    """Ranks > 0 draw their own dropout masks (rank 0 keeps the one-device stream, checkpointed as usual)."""
    import hashlib

    digest = hashlib.sha256(f"{seed}|rank|{distributed.rank()}|step|{step}".encode()).digest()
    value = int.from_bytes(digest[:8], "little") % 2**63
    torch.manual_seed(value)
    if device.type == "cuda":
        torch.cuda.manual_seed(value)


def per_rank_batch(batch_size: int, world: int) -> int:
    """The batch one process trains on: the global batch split evenly; sizes that do not divide are refused."""
    if batch_size % world:
        raise ConfigError(
            f"batch size {batch_size} does not divide over {world} processes; the batch size is the global batch "
            f"(each process takes batch/{world}): give a multiple of {world}"
        )
    if batch_size // world < 1:
        raise ConfigError(f"batch size {batch_size} is smaller than the {world} processes")
    return batch_size // world


# ------------------------------------------------------------------------------------- trainer
def train(
    adapter: Any,
    model: torch.nn.Module,
    tokenizer: Any,
    texts: Sequence[str],
    budget: Budget,
    config: TrainConfig,
    out_dir: str | Path,
    *,
    db: Any = None,
    run_id: int | None = None,
    resume: bool = False,
    save_encoder_dir: str | Path | None = "encoder",
    eval_hook: EvalHook | None = None,
    tracker: Any = None,
) -> TrainResult:
    """Train `model` with `adapter` on `texts` until the budget (or the schedule horizon) stops it.

    `eval_hook` scores the encoder during training (learning curves; see EvalHook). `tracker`
    (bench.runtime.trackers.Trackers, rank 0) gets each logged step's loss, learning rate and rate.

    `save_encoder_dir` (relative to out_dir, or absolute; None: do not save) receives the trained encoder as a
    transformers + sentence-transformers folder without the adapter's training-only modules.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if not texts:
        raise TrainingError("the training corpus is empty")
    device = torch.device(resolve_device(config.device))
    world, main = distributed.world_size(), distributed.is_main()
    if world > 1 and device.type == "cuda":
        device = torch.device("cuda", torch.cuda.current_device())  # cuda:LOCAL_RANK, set by init_from_env
    per_rank_batch(config.batch_size, world)
    precision = resolve_precision(config.precision, device)  # auto: bf16 on CUDA, fp32 elsewhere (bench.runtime.device)
    autocast = lambda: device_autocast(device, precision)  # noqa: E731

    ckpt = latest_checkpoint(out)
    if ckpt is not None and not resume:
        raise ConfigError(f"{out} already holds a checkpoint ({ckpt.name}); resume it (--resume) or use another output folder")

    # Seed before setup: the adapter's extra modules (MLM head, decoder) are initialised from this state.
    random.seed(config.seed)
    torch.manual_seed(config.seed)
    py_rng = random.Random(config.seed)
    model.to(device)
    extra = list(adapter.setup(model) or [])
    for m in extra:
        m.to(device)
    distributed.broadcast_modules([model, *extra])  # every rank starts from rank 0's weights, as DDP does
    params = _parameters(model, extra)
    decay = [p for p in params if p.ndim >= 2]
    no_decay = [p for p in params if p.ndim < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}], lr=config.lr
    )
    horizon = budget.planned_steps(config.batch_size) or max(
        1, math.ceil(config.epochs_horizon * len(texts) / config.batch_size)
    )
    stream = TextStream(len(texts), config.seed)
    consumed = Consumption()
    fingerprint = config_hash(
        {"train": config.shared(), "budget": budget.asked(), "adapter": getattr(adapter, "name", ""), "n_texts": len(texts)}
    )
    resumed_from = None
    if ckpt is not None:
        model_state, state = load_train_state(ckpt)
        if state.fingerprint != fingerprint:
            raise ConfigError(
                f"checkpoint {ckpt} was made with other settings (method, budget, max_len, batch size, lr, seed or "
                "corpus differ); resume with the same command or use another output folder"
            )
        model.load_state_dict(model_state)
        for m, s in zip(extra, state.extra):
            m.load_state_dict(s)
        optimizer.load_state_dict(state.optimizer)
        adapter.load_state_dict(state.adapter)
        stream.restore(state.stream)
        _restore_rng(py_rng, state.rng, device)
        consumed = Consumption(**state.consumed)
        resumed_from = consumed.steps
        log.info("resuming %s from step %d", out, consumed.steps)
    if world > 1 and not main:
        _seed_rank_torch_rng(config.seed, consumed.steps, device)

    def checkpoint() -> Path | None:
        if not main:  # every rank holds the same weights, optimiser moments, stream and python rng
            return None
        return save_checkpoint(
            out,
            consumed.steps,
            model.state_dict(),
            TrainState(
                fingerprint=fingerprint, consumed=asdict(consumed), stream=stream.state(), rng=_rng_state(py_rng, device),
                optimizer=optimizer.state_dict(), adapter=adapter.state_dict(), extra=[m.state_dict() for m in extra],
            ),
            keep=config.keep_checkpoints,
        )

    accepts = getattr(adapter, "accepts", None)

    def next_texts() -> list[str]:
        picked: list[str] = []
        tried = 0
        while len(picked) < config.batch_size:
            text = texts[stream.next_index()]
            tried += 1
            if accepts is None or accepts(text):
                picked.append(text)
            elif tried > len(texts) and not picked:
                raise TrainingError(f"method {getattr(adapter, 'name', '?')!r} can use no text of the training corpus")
        return picked

    pending_logs: list[dict[str, Any]] = []

    def flush_logs() -> None:
        if main and db is not None and run_id is not None and pending_logs:
            db.log_train(run_id, pending_logs)
        pending_logs.clear()

    model.train()
    for m in extra:
        m.train()
    losses: list[float] = []
    stopped_by = ""
    bar = progress.bar(
        total=budget.steps or horizon, initial=consumed.steps, desc=getattr(adapter, "name", "train"),
        unit="step", disable=not config.progress or not main,
    )
    clock_start = time.monotonic() - consumed.seconds  # a resumed run keeps counting its seconds
    empty_batches = 0
    evaluated_at = -1  # the step of the last curve point
    schedule = CheckpointSchedule(
        horizon=horizon, start_step=consumed.steps, start_seconds=consumed.seconds, every_steps=config.checkpoint_every,
        every_seconds=60 * config.checkpoint_minutes, budget_seconds=budget.seconds,
    )
    signals.defer_stops(True)  # SIGTERM/SIGINT: finish the step, checkpoint, then stop (bench.runtime.signals)
    try:
        while True:
            if distributed.broadcast_float(float(signals.stop_requested())):  # rank 0's signal stops every rank
                stopped_by = "interrupted"
                break
            reached = budget.reached(consumed)
            if reached:
                stopped_by = reached
                break
            if consumed.steps >= horizon:
                stopped_by = "schedule"
                break
            step_start = time.monotonic()
            batch = adapter.make_batch(next_texts(), py_rng)
            if batch is not None and world > 1 and _batch_examples(batch, config.batch_size) < world:
                batch = None  # fewer usable examples than processes (every rank sees the same batch: all skip it)
            if batch is None:
                empty_batches += 1
                if empty_batches > 100:
                    raise TrainingError(f"method {getattr(adapter, 'name', '?')!r} built no batch from 100 draws of texts")
                continue
            empty_batches = 0
            lr = config.lr * linear_schedule(consumed.steps, config.warmup_steps, horizon)
            for group in optimizer.param_groups:
                group["lr"] = lr
            local_batch = shard_batch(batch, trim=getattr(adapter, "shard_trim", ()))
            with autocast():
                loss, extras = adapter.loss(model, local_batch)
            check_loss(loss, adapter)  # a plug-in's loss: a scalar tensor with a grad (bench.train.loss_check)
            # Under several processes the global loss is the mean over ranks (losses normalise for it).
            value = distributed.mean_over_ranks([float(loss.detach().float())])[0]
            if not math.isfinite(value):
                # Weights are still those before this step; the data position is past the offending batch.
                path = checkpoint()
                flush_logs()
                raise TrainingError(
                    f"non-finite loss ({value}) at step {consumed.steps + 1} of {getattr(adapter, 'name', '?')}; "
                    f"stopped, checkpoint saved at {path or out} (lower --lr or check the data)"
                )
            loss.backward()
            distributed.average_gradients(params)
            if config.max_grad_norm and config.max_grad_norm > 0:
                torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            adapter.after_step(model)

            n_examples = _batch_examples(batch, config.batch_size)
            consumed.steps += 1
            consumed.examples += n_examples
            n_tokens = _batch_tokens(batch)
            consumed.tokens += n_tokens
            consumed.seconds = distributed.broadcast_float(time.monotonic() - clock_start)  # rank 0's clock decides
            mem, consumed.peak_memory_kind = peak_memory(device)
            consumed.peak_memory_mb = max(consumed.peak_memory_mb, mem)  # a resumed run keeps the earlier peak
            losses.append(value)
            step_time = max(time.monotonic() - step_start, 1e-9)
            if consumed.steps % config.log_every == 0:
                row = {
                    "step": consumed.steps, "loss": value, "lr": lr, "examples_per_s": n_examples / step_time,
                    "examples": n_examples, "tokens": n_tokens, "step_seconds": step_time, "elapsed_seconds": consumed.seconds,
                }
                row.update({k: float(v) for k, v in (extras or {}).items()})
                pending_logs.append(row)
                if tracker is not None and main:  # --report-to: the same points as the database's train_log
                    tracker.log({"train/loss": value, "train/learning_rate": lr,
                                 "train/examples_per_s": n_examples / step_time}, consumed.steps)  # fmt: skip
                if len(pending_logs) >= 20:
                    flush_logs()
            bar.update(1)
            bar.set_postfix({"loss": f"{value:.3e}", "examples/s": f"{n_examples / step_time:.1f}"})  # this step's loss and rate
            if eval_hook is not None and consumed.steps % eval_hook.every == 0:
                clock_start += run_isolated(eval_hook, model, extra, tokenizer, consumed.steps, device)
                evaluated_at = consumed.steps
            if schedule.due(consumed.steps, consumed.seconds):
                flush_logs()
                checkpoint()
        if (eval_hook is not None and stopped_by != "interrupted" and not signals.stop_requested() and consumed.steps
                and evaluated_at != consumed.steps):  # fmt: skip
            run_isolated(eval_hook, model, extra, tokenizer, consumed.steps, device)  # the curve's last point
    finally:
        bar.close()
        signals.defer_stops(False)
    flush_logs()
    saved = checkpoint()
    if stopped_by == "interrupted" or signals.stop_requested():
        raise signals.StopRequested(signals.stop_requested() or signal.SIGTERM, f"checkpoint at step {consumed.steps}: {saved or out}")
    result = TrainResult(
        consumed=consumed,
        stopped_by=stopped_by,
        horizon=horizon,
        final_loss=losses[-1] if losses else float("nan"),
        out_dir=out,
        resumed_from=resumed_from,
        losses=losses,
    )
    if save_encoder_dir is not None:
        from bench.encode.encoder import save_encoder

        target = Path(save_encoder_dir)
        target = target if target.is_absolute() else out / target
        model.eval()
        if main:
            save_encoder(model, tokenizer, target, pooling=config.pooling, max_len=config.max_len)
        result.encoder_dir = target
    distributed.barrier()  # the encoder and last checkpoint are on disk before any rank goes on to use them
    return result


# --------------------------------------------------------------------------- method
def train_method(
    method: str,
    *,
    backbone: str,
    texts: Sequence[str],
    budget: Budget,
    config: TrainConfig,
    out_dir: str | Path,
    db: Any = None,
    run_id: int | None = None,
    resume: bool = False,
    method_overrides: dict[str, Any] | None = None,
    method_config: Any = None,
    backbone_cache_dir: str | Path | None = None,
    eval_hook: EvalHook | None = None,
    tracker: Any = None,
) -> TrainResult:
    """Load the backbone, build the method's adapter with its config (`method_config`, else the paper defaults
    with `method_overrides`), train, save the encoder."""
    from bench.train.registry import get_method

    spec = get_method(method)
    if not spec.trains:
        raise ConfigError(f"method {spec.name!r} does not train (it evaluates the backbone as it is)")
    check_backbone_methods(backbone, [spec.name])
    if method_config is None:
        try:
            method_config = spec.config_from(method_overrides or {})
        except (TypeError, ValueError) as exc:
            raise ConfigError(str(exc)) from None
    with distributed.main_first():  # a random backbone is written to disk once, by rank 0
        model, tokenizer, _ = load_backbone(backbone, cache_dir=backbone_cache_dir)
    torch.manual_seed(config.seed)
    adapter = spec.build(method_config, tokenizer=tokenizer, max_len=config.max_len, seed=config.seed)
    return train(adapter, model, tokenizer, texts, budget, config, out_dir, db=db, run_id=run_id, resume=resume,
                 eval_hook=eval_hook, tracker=tracker)
