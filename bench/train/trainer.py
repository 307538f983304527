"""The shared trainer (SPEC §1): one loop for every method, so a comparison differs only in the adapter.

AdamW over the encoder and the adapter's extra modules, a linear warm-up (0 steps by default) and linear decay
to zero at the schedule's horizon, seeded RNGs, gradient clipping, bf16 autocast on CUDA, a progress bar with loss
and throughput, training-log rows in the results DB, safetensors checkpoints by time (every 10 minutes, or N steps
when asked: CheckpointSchedule) and at the stop, written in the background (CheckpointWriter), `resume=True`
continuing from the newest checkpoint to the same final step count, a non-finite loss stopping the run with a
TrainingError, and SIGTERM/SIGINT stopping it after the current step with a checkpoint (bench.runtime.signals).

The data side runs ahead of the model: the adapter's per-corpus preprocessing (`prepare`: sentence splits, token
ids; cached on disk) before the first step, then batches built by `--loader-workers` processes while the steps before
them run (bench.train.loader); the losses and weights are the same whatever the number of workers.

No step waits on the device: the loss stays a device tensor, and the host reads the losses of the last steps at once
every `nan_check_every` steps (default: every step on CPU, where reading costs nothing; every 10 elsewhere), before
every checkpoint and at the end. A non-finite loss found there stops the run; on CPU (checked before the backward
pass) the weights saved are those before the offending step, otherwise no checkpoint of the damaged weights is
written and the previous one stays.

Schedule horizon: the step count the budget implies (steps, or examples / batch size); when the budget only
limits tokens or seconds, one epoch of the corpus (the papers train one epoch) - training also stops there.

Several processes (launched by torchrun; see bench.runtime.distributed): `batch_size` stays the global batch. Every rank
draws the same global batch (same seeded stream and per-draw generators), trains on its contiguous shard of the rows, and the
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
import os
import resource
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from bench.runtime import distributed, progress
from bench.runtime.device import resolve_device, resolve_precision
from bench.runtime.device import forward_context
from bench.runtime.errors import ConfigError, TrainingError
from bench.runtime.provenance import config_hash
from bench.train.budget import Budget, Consumption
from bench.runtime import signals
from bench.train.method import AdapterHooks
from bench.train.backbone import check_backbone_methods, load_backbone
from bench.train.loss_check import check_loss
from bench.train.sharding import shard_batch
from bench.train.checkpoint import CheckpointSchedule, CheckpointWriter, TrainState, latest_checkpoint, load_train_state
from bench.train.loader import BatchLoader, Position, default_workers
from bench.train.config import TrainConfig  # its home: bench.train.config (torch-free); importable from here as before

log = logging.getLogger(__name__)



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


def _rng_state(device: torch.device) -> dict[str, Any]:
    """The training thread's generators (dropout); batches have their own, per draw (bench.train.loader)."""
    state: dict[str, Any] = {"torch": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def _restore_rng(state: dict[str, Any], device: torch.device) -> None:
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
    hooks = AdapterHooks.of(adapter)  # the protocol's optional members, defaults where the adapter has none
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
    # autocast to the precision, and the device's attention kernels (no cuDNN attention on CUDA: bench.runtime.device)
    autocast = lambda: forward_context(device, precision)  # noqa: E731

    ckpt = latest_checkpoint(out)
    if ckpt is not None and not resume:
        raise ConfigError(f"{out} already holds a checkpoint ({ckpt.name}); resume it (--resume) or use another output folder")

    # Seed before setup: the adapter's extra modules (MLM head, decoder) are initialised from this state.
    random.seed(config.seed)
    torch.manual_seed(config.seed)
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
    position = Position(0, 0, 0)
    consumed = Consumption()
    fingerprint = config_hash(
        {"train": config.shared(), "budget": budget.asked(), "adapter": hooks.name, "n_texts": len(texts),
         "batches": "per-draw-rng"}  # fmt: skip
    )
    resumed_from = None
    if ckpt is not None:
        model_state, state = load_train_state(ckpt)
        if state.fingerprint != fingerprint:
            raise ConfigError(
                f"checkpoint {ckpt} was made with other settings (method, budget, max_len, batch size, lr, seed or "
                "corpus differ, or an older lenbench made it); resume with the same command or use another output folder"
            )
        model.load_state_dict(model_state)
        for m, s in zip(extra, state.extra):
            m.load_state_dict(s)
        optimizer.load_state_dict(state.optimizer)
        adapter.load_state_dict(state.adapter)
        position = Position.from_state(state.stream)
        _restore_rng(state.rng, device)
        consumed = Consumption(**state.consumed)
        resumed_from = consumed.steps
        log.info("resuming %s from step %d", out, consumed.steps)
    if world > 1 and not main:
        _seed_rank_torch_rng(config.seed, consumed.steps, device)

    prepare = hooks.prepare
    if prepare is not None:
        with distributed.main_first():  # rank 0 preprocesses (and caches); the others then read its files
            started = time.monotonic()
            report = prepare(texts)
        if report and main:
            parts = [f"{what} {'read from the cache' if r.get('cached') else 'made and cached'}"
                     for what, r in (("sentence splits", report.get("sentences")), ("token ids", report.get("tokens"))) if r]  # fmt: skip
            log.info("[%s] corpus preprocessed in %.1f s (%s)", hooks.label, time.monotonic() - started,
                     ", ".join(parts) or "nothing to do")  # fmt: skip

    writer = CheckpointWriter(out, keep=config.keep_checkpoints)

    def checkpoint() -> Path | None:
        if not main:  # every rank holds the same weights, optimiser moments, data position and dropout generator
            return None
        return writer.save(consumed.steps, model.state_dict(), TrainState(
            fingerprint=fingerprint, consumed=asdict(consumed), stream=position.state(), rng=_rng_state(device),
            optimizer=optimizer.state_dict(), adapter=adapter.state_dict(), extra=[m.state_dict() for m in extra],
        ))  # fmt: skip

    workers = config.loader_workers
    if workers is None:
        workers = default_workers(max(1, int(os.environ.get("LOCAL_WORLD_SIZE", world))))
    loader = BatchLoader(adapter, texts, batch_size=config.batch_size, seed=config.seed, start=position, workers=workers,
                         pin_memory=device.type == "cuda")  # fmt: skip
    check_every = config.nan_check_every or (1 if device.type == "cpu" else 10)
    pending_logs: list[dict[str, Any]] = []
    unread: list[tuple[torch.Tensor, dict[str, Any] | None]] = []  # losses of steps not read yet, with their log rows

    def flush_logs() -> None:
        if main and db is not None and run_id is not None and pending_logs:
            db.log_train(run_id, pending_logs)
        pending_logs.clear()

    def read_losses() -> None:
        """Read the losses of the steps since the last read (one host sync); a non-finite one stops the run."""
        if not unread:
            return
        stacked = torch.stack([loss for loss, _ in unread]).float().cpu().tolist()
        values = distributed.mean_over_ranks(stacked) if world > 1 else stacked
        rows = [row for _, row in unread]
        unread.clear()
        record(values, rows)

    def record(values: list[float], rows: list[dict[str, Any] | None]) -> None:
        """The losses (means over ranks) of the last len(values) steps: stop on a non-finite one, else keep them."""
        first_step = consumed.steps - len(values) + 1
        for i, (value, row) in enumerate(zip(values, rows)):
            if not math.isfinite(value):
                writer.wait()
                flush_logs()
                saved = latest_checkpoint(out)
                raise TrainingError(
                    f"non-finite loss ({value}) at step {first_step + i} of {hooks.label}; stopped, "
                    + (f"last checkpoint at {saved}" if saved else "no checkpoint was written")
                    + " (lower --lr or check the data)"
                )
            losses.append(value)
            if row is not None:
                row["loss"] = value
                row.update({k: float(v) for k, v in row.pop("_extras", {}).items()})
                pending_logs.append(row)
                if tracker is not None and main:  # --report-to: the same points as the database's train_log
                    tracker.log({"train/loss": value, "train/learning_rate": row["lr"],
                                 "train/examples_per_s": row["examples_per_s"]}, row["step"])  # fmt: skip
        if values:
            bar.set_postfix({"loss": f"{values[-1]:.3e}"})  # the last step read
        if len(pending_logs) >= 20:
            flush_logs()

    model.train()
    for m in extra:
        m.train()
    losses: list[float] = []
    stopped_by = ""
    bar = progress.bar(
        total=budget.steps or horizon, initial=consumed.steps, desc=hooks.name or "train",
        unit="step", disable=not config.progress or not main,
    )
    clock_start = time.monotonic() - consumed.seconds  # a resumed run keeps counting its seconds
    empty_batches = 0
    evaluated_at = -1  # the step of the last curve point
    schedule = CheckpointSchedule(
        start_step=consumed.steps, start_seconds=consumed.seconds, every_steps=config.checkpoint_every,
        every_seconds=60 * config.checkpoint_minutes,
    )
    if eval_hook is not None and consumed.steps == 0:  # the curve starts at the untrained model (step 0)
        clock_start += run_isolated(eval_hook, model, extra, tokenizer, 0, device)
        evaluated_at = 0
    batches = loader.batches()
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
            draw, batch = next(batches)
            position = draw.after  # consumed, whether or not it gives a batch
            if batch is not None and world > 1 and _batch_examples(batch, config.batch_size) < world:
                batch = None  # fewer usable examples than processes (every rank sees the same batch: all skip it)
            if batch is None:
                empty_batches += 1
                if empty_batches > 100:
                    raise TrainingError(f"method {hooks.label!r} built no batch from 100 draws of texts")
                continue
            empty_batches = 0
            lr = config.lr * linear_schedule(consumed.steps, config.warmup_steps, horizon)
            for group in optimizer.param_groups:
                group["lr"] = lr
            local_batch = shard_batch(batch, trim=hooks.shard_trim)
            with autocast():
                loss, extras = adapter.loss(model, local_batch)
            check_loss(loss, adapter)  # a plug-in's loss: a scalar tensor with a grad (bench.train.loss_check)
            if check_every == 1:  # reading is free here: check before the step, so the weights saved are the last good ones
                # Under several processes the global loss is the mean over ranks (losses normalise for it).
                value = distributed.mean_over_ranks([float(loss.detach().float())])[0]
                if not math.isfinite(value):
                    path = checkpoint()
                    writer.wait()
                    flush_logs()
                    raise TrainingError(
                        f"non-finite loss ({value}) at step {consumed.steps + 1} of {hooks.label}; "
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
            step_time = max(time.monotonic() - step_start, 1e-9)
            row = None
            if consumed.steps % config.log_every == 0:
                row = {
                    "step": consumed.steps, "loss": None, "lr": lr, "examples_per_s": n_examples / step_time,
                    "examples": n_examples, "tokens": n_tokens, "step_seconds": step_time, "elapsed_seconds": consumed.seconds,
                    "_extras": dict(extras or {}),
                }
            bar.update(1)
            if check_every == 1:
                record([value], [row])
            else:
                unread.append((loss.detach(), row))
                if len(unread) >= check_every:
                    read_losses()
            if eval_hook is not None and consumed.steps % eval_hook.every == 0:
                read_losses()
                clock_start += run_isolated(eval_hook, model, extra, tokenizer, consumed.steps, device)
                evaluated_at = consumed.steps
            if schedule.due(consumed.steps, consumed.seconds):
                read_losses()  # never a checkpoint of weights a non-finite loss has reached
                flush_logs()
                checkpoint()
        read_losses()
        if (eval_hook is not None and stopped_by != "interrupted" and not signals.stop_requested() and consumed.steps
                and evaluated_at != consumed.steps):  # fmt: skip
            run_isolated(eval_hook, model, extra, tokenizer, consumed.steps, device)  # the curve's last point
    except BaseException:
        loader.close()
        try:
            writer.wait()  # a checkpoint in flight completes (or fails) before the error goes up
        except Exception as exc:  # noqa: BLE001 - the first error is the one to report
            log.warning("checkpoint write failed: %s", exc)
        raise
    finally:
        bar.close()
        signals.defer_stops(False)
    loader.close()
    flush_logs()
    saved = checkpoint()
    writer.wait()
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
        from bench.encode.loading import save_encoder

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
