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
written and the previous one stays (bench.train.loss_reader).

Layout (as a torchtune recipe): `train` runs a `TrainingRecipe` through its stages: `setup` (device, precision,
seed, the adapter's modules, optimiser, horizon), `resume` (from the newest checkpoint), `prepare_corpus`, the loop
(`run`, one `step` per batch, the `LossReader` reading losses and writing the training log), `checkpoint` and
`finish` (the last checkpoint, the saved encoder, the result).

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
import os
import random
import resource
import signal
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from bench.runtime import distributed, pools, progress, signals
from bench.encode.auto import resolve_auto
from bench.runtime.device import forward_context
from bench.runtime.errors import ConfigError, MethodContractError, TrainingError
from bench.runtime.provenance import config_hash
from bench.train.backbone import check_backbone_methods, load_backbone
from bench.train.budget import Consumption
from bench.train.checkpoint import CheckpointSchedule, CheckpointWriter, TrainState, latest_checkpoint, load_train_state
from bench.train.config import TrainConfig  # its home: bench.train.config (torch-free); importable from here as before
from bench.train.eval_hook import EvalHook, run_isolated  # EvalHook's home is bench.train.eval_hook
from bench.train.job import TrainJob
from bench.train.loader import BatchLoader, Position, default_workers
from bench.train.loss_check import check_loss
from bench.train.loss_reader import LossLog, LossReader
from bench.train.method import AdapterHooks
from bench.train.sharding import shard_batch

log = logging.getLogger(__name__)


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
def train(adapter: Any, model: torch.nn.Module, tokenizer: Any, job: TrainJob) -> TrainResult:
    """Train `model` with `adapter` on `job.texts` until the budget (or the schedule horizon) stops it. The job's
    method, backbone and method settings are `train_method`'s (here the adapter, model and tokenizer are built).

    `job.eval_hook` scores the encoder during training (learning curves; see EvalHook). `job.tracker`
    (bench.runtime.trackers.Trackers, rank 0) gets each logged step's loss, learning rate and rate.

    `job.save_encoder_dir` (relative to out_dir, or absolute; None: do not save) receives the trained encoder as a
    transformers + sentence-transformers folder without the adapter's training-only modules. Its
    sentence-transformers files declare how it is scored: `config.pooling` and `scoring_max_len` (the evaluation's
    max_len; None: the training max_len), written once, with the weights. `job.rank_batch`: the batch one process
    trains on, as the caller already checked it (`per_rank_batch`; bench run does before any process starts);
    None (or a value that does not match the processes): checked here.
    """
    recipe = TrainingRecipe(adapter, model, tokenizer, job)
    ckpt = recipe.setup()
    if ckpt is not None:
        recipe.resume(ckpt)
    recipe.seed_rank()
    recipe.prepare_corpus()
    stopped_by = recipe.run()
    return recipe.finish(stopped_by)


class TrainingRecipe:
    """One training run, stage by stage (see the module docstring); `train` calls the stages in order."""

    def __init__(self, adapter: Any, model: torch.nn.Module, tokenizer: Any, job: TrainJob):
        self.adapter, self.model, self.tokenizer, self.job = adapter, model, tokenizer, job
        self.texts, self.budget, self.config = job.texts, job.budget, job.config
        self.db, self.run_id, self.eval_hook, self.tracker = job.db, job.run_id, job.eval_hook, job.tracker
        self.hooks = AdapterHooks.of(adapter)  # the protocol's optional members, defaults where the adapter has none
        self.out = Path(job.out_dir)
        self.position = Position(0, 0, 0)
        self.consumed = Consumption()
        self.resumed_from: int | None = None  # the step a resumed run started at

    # ------------------------------------------------------------------ setup
    def setup(self) -> Path | None:
        """Device, precision, seed, the adapter's modules, optimiser and horizon; returns the checkpoint to resume
        from (None: a fresh run). A checkpoint in the folder without the job's `resume` is refused."""
        config, texts, rank_batch = self.config, self.texts, self.job.rank_batch
        self.out.mkdir(parents=True, exist_ok=True)
        if not texts:
            raise TrainingError("the training corpus is empty")
        auto = resolve_auto(config.device, config.precision)  # as the run's identity and runtime resolved it
        device = torch.device(auto.device)
        self.world, self.main = distributed.world_size(), distributed.is_main()
        if self.world > 1 and device.type == "cuda":
            device = torch.device("cuda", torch.cuda.current_device())  # cuda:LOCAL_RANK, set by init_from_env
        self.device = device
        # the batch this process trains on, as the caller checked it; else (or when it does not add up to the global
        # batch over these processes) checked here: a global batch that does not divide over them is refused
        if rank_batch is None or rank_batch * self.world != config.batch_size:
            rank_batch = per_rank_batch(config.batch_size, self.world)
        self.rank_batch = rank_batch
        self.precision = auto.train_precision  # auto: bf16 on CUDA, fp32 elsewhere

        ckpt = latest_checkpoint(self.out)
        if ckpt is not None and not self.job.resume:
            raise ConfigError(f"{self.out} already holds a checkpoint ({ckpt.name}); resume it (--resume) or use another output folder")

        # Seed before setup: the adapter's extra modules (MLM head, decoder) are initialised from this state.
        random.seed(config.seed)
        torch.manual_seed(config.seed)
        self.model.to(device)
        self.extra = list(self.adapter.setup(self.model) or [])
        for m in self.extra:
            m.to(device)
        distributed.broadcast_modules([self.model, *self.extra])  # every rank starts from rank 0's weights, as DDP does
        self.params = _parameters(self.model, self.extra)
        decay = [p for p in self.params if p.ndim >= 2]
        no_decay = [p for p in self.params if p.ndim < 2]
        self.optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}], lr=config.lr
        )
        self.horizon = self.budget.planned_steps(config.batch_size) or max(
            1, math.ceil(config.epochs_horizon * len(texts) / config.batch_size)
        )
        self.fingerprint = config_hash(
            {"train": config.shared(), "budget": self.budget.asked(), "adapter": self.hooks.name, "n_texts": len(texts),
             "batches": "per-draw-rng"}  # fmt: skip
        )
        self.writer = CheckpointWriter(self.out, keep=config.keep_checkpoints)
        return ckpt

    def resume(self, ckpt: Path) -> None:
        """Weights, optimiser, adapter state, data position, dropout generator and counters of a checkpoint made
        with the same settings."""
        model_state, state = load_train_state(ckpt)
        if state.fingerprint != self.fingerprint:
            raise ConfigError(
                f"checkpoint {ckpt} was made with other settings (method, budget, max_len, batch size, lr, seed or "
                "corpus differ, or an older lenbench made it); resume with the same command or use another output folder"
            )
        self.model.load_state_dict(model_state)
        for m, s in zip(self.extra, state.extra):
            m.load_state_dict(s)
        self.optimizer.load_state_dict(state.optimizer)
        self.adapter.load_state_dict(state.adapter)
        self.position = Position.from_state(state.stream)
        _restore_rng(state.rng, self.device)
        self.consumed = Consumption(**state.consumed)
        self.resumed_from = self.consumed.steps
        log.info("resuming %s from step %d", self.out, self.consumed.steps)

    def seed_rank(self) -> None:
        if self.world > 1 and not self.main:
            _seed_rank_torch_rng(self.config.seed, self.consumed.steps, self.device)

    def prepare_corpus(self) -> None:
        """The adapter's per-corpus preprocessing (sentence splits, token ids; cached on disk), before the first step."""
        prepare = self.hooks.prepare
        if prepare is None:
            return
        with distributed.main_first():  # rank 0 preprocesses (and caches); the others then read its files
            started = time.monotonic()
            report = prepare(self.texts)
        if report and self.main:
            parts = [f"{what} {'read from the cache' if r.get('cached') else 'made and cached'}"
                     for what, r in (("sentence splits", report.get("sentences")), ("token ids", report.get("tokens"))) if r]  # fmt: skip
            log.info("[%s] corpus preprocessed in %.1f s (%s)", self.hooks.label, time.monotonic() - started,
                     ", ".join(parts) or "nothing to do")  # fmt: skip

    # ------------------------------------------------------------ checkpoint
    def checkpoint(self) -> Path | None:
        """A checkpoint of the current state, written in the background by rank 0 (None on other ranks)."""
        if not self.main:  # every rank holds the same weights, optimiser moments, data position and dropout generator
            return None
        return self.writer.save(self.consumed.steps, self.model.state_dict(), TrainState(
            fingerprint=self.fingerprint, consumed=asdict(self.consumed), stream=self.position.state(),
            rng=_rng_state(self.device), optimizer=self.optimizer.state_dict(), adapter=self.adapter.state_dict(),
            extra=[m.state_dict() for m in self.extra],
        ))  # fmt: skip

    # ------------------------------------------------------------------ the loop
    def _start_loop(self) -> None:
        """The loader, the progress bar, the loss reader, the checkpoint schedule, and the curve's step-0 point."""
        config = self.config
        workers = config.loader_workers
        if workers is None:
            workers = default_workers(max(1, int(os.environ.get("LOCAL_WORLD_SIZE", self.world))))
        self.loader = BatchLoader(self.adapter, self.texts, batch_size=config.batch_size, seed=config.seed,
                                  start=self.position, workers=workers, pin_memory=self.device.type == "cuda")  # fmt: skip
        self.model.train()
        for m in self.extra:
            m.train()
        self.bar = progress.bar(
            total=self.budget.steps or self.horizon, initial=self.consumed.steps, desc=self.hooks.name or "train",
            unit="step", disable=not config.progress or not self.main,
        )
        self.reader = LossReader(
            check_every=config.nan_check_every or (1 if self.device.type == "cpu" else 10), consumed=self.consumed,
            method=self.hooks, out=self.out, writer=self.writer, checkpoint=self.checkpoint, bar=self.bar,
            log=LossLog(self.db, self.run_id, self.tracker),
        )  # fmt: skip
        self.clock_start = time.monotonic() - self.consumed.seconds  # a resumed run keeps counting its seconds
        self.evaluated_at = -1  # the step of the last curve point
        self.schedule = CheckpointSchedule(
            start_step=self.consumed.steps, start_seconds=self.consumed.seconds, every_steps=config.checkpoint_every,
            every_seconds=60 * config.checkpoint_minutes,
        )
        if self.eval_hook is not None and self.consumed.steps == 0:  # the curve starts at the untrained model (step 0)
            self._evaluate(0)

    def _evaluate(self, step: int) -> None:
        """A curve point, its wall time left out of the consumed seconds."""
        self.clock_start += run_isolated(self.eval_hook, self.model, self.extra, self.tokenizer, step, self.device)
        self.evaluated_at = step

    def _stop_reason(self) -> str:
        """Why the run stops before the next step ('' while it goes on)."""
        if distributed.broadcast_float(float(signals.stop_requested())):  # rank 0's signal stops every rank
            return "interrupted"
        reached = self.budget.reached(self.consumed)
        if reached:
            return reached
        return "schedule" if self.consumed.steps >= self.horizon else ""

    def run(self) -> str:
        """Steps until the budget, the horizon or a signal stops the run; returns what stopped it."""
        self._start_loop()
        batches = self.loader.batches()
        empty_batches = 0
        signals.defer_stops(True)  # SIGTERM/SIGINT: finish the step, checkpoint, then stop (bench.runtime.signals)
        try:
            while not (stopped_by := self._stop_reason()):
                step_start = time.monotonic()
                item = next(batches, None)
                if item is None:  # the loader stopped waiting for its workers: a stop was requested meanwhile
                    stopped_by = "interrupted"
                    break
                draw, batch = item
                self.position = draw.after  # consumed, whether or not it gives a batch
                if batch is not None and self.world > 1 and _batch_examples(batch, self.config.batch_size) < self.world:
                    batch = None  # fewer usable examples than processes (every rank sees the same batch: all skip it)
                if batch is None:
                    empty_batches += 1
                    if empty_batches > 100:
                        if self.hooks.where:  # a method file: the same line as `bench method check` gives
                            raise MethodContractError(
                                f"{self.hooks.where}: method {self.hooks.label!r} skipped every text of 100 draws "
                                "(no usable positive); expected a positive for most texts")  # fmt: skip
                        raise TrainingError(f"method {self.hooks.label!r} built no batch from 100 draws of texts")
                    continue
                empty_batches = 0
                self.step(batch, step_start)
                if self.eval_hook is not None and self.consumed.steps % self.eval_hook.every == 0:
                    self.reader.read()
                    self._evaluate(self.consumed.steps)
                if self.schedule.due(self.consumed.steps, self.consumed.seconds):
                    self.reader.read()  # never a checkpoint of weights a non-finite loss has reached
                    self.reader.flush()
                    self.checkpoint()
            self.reader.read()
            if (self.eval_hook is not None and stopped_by != "interrupted" and not signals.stop_requested()
                    and self.consumed.steps and self.evaluated_at != self.consumed.steps):  # fmt: skip
                run_isolated(self.eval_hook, self.model, self.extra, self.tokenizer, self.consumed.steps, self.device)
        except BaseException:
            self.loader.close()
            try:
                self.writer.wait()  # a checkpoint in flight completes (or fails) before the error goes up
            except Exception as exc:  # noqa: BLE001 - the first error is the one to report
                log.warning("checkpoint write failed: %s", exc)
            raise
        finally:
            self.bar.close()
            signals.defer_stops(False)
        return stopped_by

    def step(self, batch: dict[str, Any], step_start: float) -> None:
        """One optimiser step on a global batch (this rank trains on its shard), counted and logged."""
        config, consumed = self.config, self.consumed
        lr = config.lr * linear_schedule(consumed.steps, config.warmup_steps, self.horizon)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        local_batch = shard_batch(batch, trim=self.hooks.shard_trim)
        # autocast to the precision, and the device's attention kernels (no cuDNN attention on CUDA: bench.runtime.device)
        with forward_context(self.device, self.precision):
            loss, extras = self.adapter.loss(self.model, local_batch)
        check_loss(loss, self.adapter)  # a plug-in's loss: a scalar tensor with a grad (bench.train.loss_check)
        value = self.reader.check_before_step(loss)  # on CPU: before the step, so the weights saved are the last good ones
        loss.backward()
        distributed.average_gradients(self.params)
        if config.max_grad_norm and config.max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(self.params, config.max_grad_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.adapter.after_step(self.model)

        n_examples = _batch_examples(batch, config.batch_size)
        consumed.steps += 1
        consumed.examples += n_examples
        n_tokens = _batch_tokens(batch)
        consumed.tokens += n_tokens
        consumed.seconds = distributed.broadcast_float(time.monotonic() - self.clock_start)  # rank 0's clock decides
        mem, consumed.peak_memory_kind = peak_memory(self.device)
        consumed.peak_memory_mb = max(consumed.peak_memory_mb, mem)  # a resumed run keeps the earlier peak
        step_time = max(time.monotonic() - step_start, 1e-9)
        row = None
        if consumed.steps % config.log_every == 0:
            row = {
                "step": consumed.steps, "loss": None, "lr": lr, "examples_per_s": n_examples / step_time,
                "examples": n_examples, "tokens": n_tokens, "step_seconds": step_time, "elapsed_seconds": consumed.seconds,
                "_extras": dict(extras or {}),
            }
        self.bar.update(1)
        self.reader.add(loss, value, row)

    # ------------------------------------------------------------------ finish
    def finish(self, stopped_by: str) -> TrainResult:
        """The last checkpoint (a signal stops here, with it), the saved encoder folder (declaring the scoring
        pooling and max_len) and the result."""
        save_encoder_dir = self.job.save_encoder_dir
        scoring_max_len = self.job.scoring_max_len or self.config.max_len
        self.loader.close()
        self.reader.flush()
        stopping = stopped_by == "interrupted" or bool(signals.stop_requested())
        short = self.schedule.saved == 0 and latest_checkpoint(self.out) is None  # ended before its first checkpoint
        skip = short and not stopping and not self.config.checkpoint_at_end and save_encoder_dir is not None
        saved = None if skip else self.checkpoint()
        self.writer.wait()
        if stopping:
            raise signals.StopRequested(signals.stop_requested() or signal.SIGTERM,
                                        f"checkpoint at step {self.consumed.steps}: {saved or self.out}")  # fmt: skip
        losses = self.reader.losses
        result = TrainResult(
            consumed=self.consumed,
            stopped_by=stopped_by,
            horizon=self.horizon,
            final_loss=losses[-1] if losses else float("nan"),
            out_dir=self.out,
            resumed_from=self.resumed_from,
            losses=losses,
        )
        if save_encoder_dir is not None:
            from bench.encode.loading import save_encoder

            target = Path(save_encoder_dir)
            target = target if target.is_absolute() else self.out / target
            self.model.eval()
            if self.main:
                save_encoder(self.model, self.tokenizer, target, pooling=self.config.pooling, max_len=scoring_max_len)
            result.encoder_dir = target
        distributed.barrier()  # the encoder and last checkpoint are on disk before any rank goes on to use them
        return result


# --------------------------------------------------------------------------- method
def train_method(job: TrainJob) -> TrainResult:
    """Load the job's backbone (pickle-only weights too with `allow_pickle`), build its method's adapter with its
    config (`method_config`, else the paper defaults with `method_overrides`), train, save the encoder (declaring
    `scoring_max_len`, see `train`). `job.method`: a registered name, or the MethodSpec a caller has already looked up."""
    from bench.train.registry import get_method

    if job.method is None or job.backbone is None:
        raise TypeError("train_method needs a TrainJob that names its method and backbone")
    config = job.config
    spec = get_method(job.method) if isinstance(job.method, str) else job.method
    if not spec.trains:
        raise ConfigError(f"method {spec.name!r} does not train (it evaluates the backbone as it is)")
    check_backbone_methods(job.backbone, [spec.name])
    method_config = job.method_config
    if method_config is None:
        try:
            method_config = spec.config_from(job.method_overrides or {})
        except (TypeError, ValueError) as exc:
            raise ConfigError(str(exc)) from None
    pools.prestart()  # the worker pools' forkserver imports torch while the backbone loads
    with distributed.main_first():  # a random backbone is written to disk once, by rank 0
        model, tokenizer, _ = load_backbone(job.backbone, cache_dir=job.backbone_cache_dir, allow_pickle=job.allow_pickle)
    torch.manual_seed(config.seed)
    if not spec.source_file:
        adapter = spec.build(method_config, tokenizer=tokenizer, max_len=config.max_len, seed=config.seed)
        return train(adapter, model, tokenizer, job)
    # A method file: what its own code raises is one line at its line (the traceback with --debug), as
    # `bench method check` reports it.
    from bench.train.method_file import author_fault

    try:
        adapter = spec.build(method_config, tokenizer=tokenizer, max_len=config.max_len, seed=config.seed)
    except Exception as exc:  # noqa: BLE001 - the author's factory and adapter: whatever they raise, one line
        raise author_fault(spec, exc, "building", anywhere=True) from exc  # type: ignore[misc]
    if not getattr(adapter, "where", ""):  # a full adapter: messages (no batch, a non-finite loss) name the file
        try:
            adapter.where = spec.where
        except AttributeError:
            pass
    try:
        return train(adapter, model, tokenizer, job)
    except (TrainingError, ConfigError):
        raise
    except Exception as exc:  # noqa: BLE001 - one line when the file's own code raised it, else lenbench's error
        fault = author_fault(spec, exc, "training")
        if fault is None:
            raise
        raise fault from exc
