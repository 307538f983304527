"""Multi-process runs under `torchrun`: process group, rank helpers, the collectives lenbench needs, re-launching.

One recipe for one device and many (nanoGPT's pattern): nothing here does anything unless the launcher set
`WORLD_SIZE` > 1, so the single-process code path is the distributed one with every collective a no-op.

* `init_from_env()` starts the process group once (nccl on CUDA, gloo on CPU) with a timeout on collectives
  (`$LENBENCH_DIST_TIMEOUT` seconds, default 1800), so no rank waits forever on one that died.
* `rank()`, `world_size()`, `is_main()`: rank 0 alone logs, shows progress bars and writes checkpoints,
  encoders and database rows.
* `all_gather_with_grad()`: rows of every rank, concatenated in rank order, with gradient flowing back to
  the rank that produced them (torch.distributed.nn's all_gather, as sentence-transformers'
  `gather_across_devices=True`); ranks may hold different numbers of rows.
* `shard_bounds()`: the contiguous share of n items that one rank takes (`bench.train.sharding.shard_batch` cuts
  a training batch with it).
* `average_gradients()`, `mean_over_ranks()`, `broadcast_from_main()`: what keeps every rank's weights,
  loss and stop decision identical (rank 0's clock decides the wall-clock budget).
* re-launching a command on N processes lives in `bench.runtime.launch`.

A collective that fails (a rank died, or the timeout passed) raises `DistributedError`, a one-line user error
that says to continue with `--resume`.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from typing import TYPE_CHECKING, Any


from bench.runtime.errors import TrainingError

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 1800.0
GRADIENT_BUCKET_ELEMENTS = 2**24  # 64 MiB of fp32 per all_reduce


class DistributedError(TrainingError):
    """A collective failed: another rank died or did not answer within the timeout."""


def env_world_size() -> int:
    """WORLD_SIZE as torchrun sets it (1 when not launched by it)."""
    try:
        return max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        return 1


def timeout_seconds() -> float:
    from bench import environment

    return float(environment.number("LENBENCH_DIST_TIMEOUT", DEFAULT_TIMEOUT_S))


def active() -> bool:
    """True inside a process group of more than one rank (never without torch.distributed imported: a single
    process, e.g. a warm `bench eval` over cached texts, does not import torch for this)."""
    if "torch.distributed" not in sys.modules:
        return False
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def rank() -> int:
    if not active():
        return 0
    import torch.distributed as dist

    return dist.get_rank()


def world_size() -> int:
    if not active():
        return 1
    import torch.distributed as dist

    return dist.get_world_size()


def is_main() -> bool:
    return rank() == 0


def backend() -> str | None:
    if not active():
        return None
    import torch.distributed as dist

    return str(dist.get_backend())


def init_from_env(device: str | None = None) -> bool:
    """Join the process group torchrun describes (only when WORLD_SIZE > 1); True when distributed.

    nccl when the run uses CUDA (each rank on cuda:LOCAL_RANK), gloo otherwise. Idempotent. Rank > 0 logs only
    warnings. SIGTERM (torchrun stopping the survivors of a failed rank, or a scheduler stopping the job) is
    bench.runtime.signals' business: the trainer stops every rank at the same step when rank 0 gets one.
    """
    if env_world_size() <= 1:
        return False
    import torch
    import torch.distributed as dist

    if dist.is_initialized():
        return dist.get_world_size() > 1
    use_cuda = torch.cuda.is_available() and (device is None or str(device).startswith("cuda"))
    name = "nccl" if use_cuda else "gloo"
    if use_cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(backend=name, timeout=dt.timedelta(seconds=timeout_seconds()))
    if dist.get_rank() != 0:
        logging.getLogger().setLevel(logging.WARNING)
    return True


def local_device(device: str) -> str:
    """A CUDA device string for this rank: cuda:LOCAL_RANK whatever index was asked (each rank its own GPU)."""
    import torch
    if active() and str(device).startswith("cuda"):
        return f"cuda:{torch.cuda.current_device()}"
    return device


def release(clean: bool) -> None:
    """End of a command: the process group destroyed after a clean run (after a failed collective, destroying it
    could block; the process is about to exit anyway)."""
    if clean and active():
        import torch.distributed as dist

        dist.destroy_process_group()


def shutdown() -> None:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def describe(per_rank_batch: int | None = None) -> dict[str, Any]:
    """What Run.runtime records about how a run was spread over processes."""
    out: dict[str, Any] = {"world_size": world_size(), "backend": backend()}
    if active():
        out["nnodes"] = int(os.environ.get("GROUP_WORLD_SIZE", os.environ.get("NNODES", "1")) or 1)
        out["local_world_size"] = int(os.environ.get("LOCAL_WORLD_SIZE", world_size()))
    if per_rank_batch is not None:
        out["per_rank_batch"] = per_rank_batch
    return out


# ---------------------------------------------------------------------------------- collectives
def _comm_device() -> torch.device:
    """Where collective buffers live: the rank's GPU for nccl, the CPU for gloo."""
    import torch
    if backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


@contextmanager
def _guard(op: str) -> Iterator[None]:
    """Turns a failed collective into a DistributedError that says what happened and what to do."""
    try:
        yield
    except (RuntimeError, OSError) as exc:  # DistBackendError and gloo's connection errors are RuntimeErrors
        if isinstance(exc, DistributedError):
            raise
        cause = " ".join(str(exc).split())[:300]
        raise DistributedError(
            f"rank {rank()} of {world_size()} lost contact with another rank during {op} (it died, or did not "
            f"answer within {timeout_seconds():.0f}s, $LENBENCH_DIST_TIMEOUT); the run is not finished: continue "
            f"it with --resume (any number of processes). Cause: {cause}"
        ) from exc


def barrier() -> None:
    if active():
        import torch
        import torch.distributed as dist

        with _guard("a barrier"):
            if backend() == "nccl":
                dist.barrier(device_ids=[torch.cuda.current_device()])
            else:
                dist.barrier()


def broadcast_from_main(obj: Any) -> Any:
    """Rank 0's value of a picklable object, on every rank."""
    return broadcast_from(obj, 0)


def broadcast_from(obj: Any, src: int) -> Any:
    """Rank `src`'s value of a picklable object, on every rank (the others' `obj` is ignored)."""
    if not active():
        return obj
    import torch.distributed as dist

    box = [obj]
    with _guard("a broadcast"):
        dist.broadcast_object_list(box, src=src, device=_comm_device())
    return box[0]


def all_gather_object(obj: Any) -> list[Any]:
    """Every rank's object, in rank order."""
    if not active():
        return [obj]
    import torch.distributed as dist

    out: list[Any] = [None] * world_size()
    with _guard("an all_gather_object"):
        dist.all_gather_object(out, obj)
    return out


def mean_over_ranks(values: Sequence[float]) -> list[float]:
    """Element-wise mean of small float vectors over ranks (float64)."""
    import torch
    import torch.distributed as dist

    if not active():
        return [float(v) for v in values]
    t = torch.tensor(list(values), dtype=torch.float64, device=_comm_device())
    with _guard("an all_reduce"):
        dist.all_reduce(t)
    return [float(v) / world_size() for v in t.cpu()]


def sum_over_ranks(value: torch.Tensor) -> torch.Tensor:
    """The sum over ranks of a (small, no-grad) tensor."""
    import torch
    import torch.distributed as dist

    if not active():
        return value
    t = value.detach().to(_comm_device(), torch.float64).clone()
    with _guard("an all_reduce"):
        dist.all_reduce(t)
    return t.to(value.device)


def broadcast_float(value: float) -> float:
    """Rank 0's float on every rank (e.g. its clock: the wall-clock budget stops every rank at the same step)."""
    import torch
    import torch.distributed as dist

    if not active():
        return value
    t = torch.tensor([value], dtype=torch.float64, device=_comm_device())
    with _guard("a broadcast"):
        dist.broadcast(t, src=0)
    return float(t.item())


def broadcast_modules(modules: Sequence[torch.nn.Module]) -> None:
    """Every rank's parameters and buffers set to rank 0's (DDP does the same when it wraps a model)."""
    import torch
    import torch.distributed as dist

    if not active():
        return
    seen: set[int] = set()
    for module in modules:
        for tensor in [*module.parameters(), *module.buffers()]:
            if id(tensor) in seen:
                continue
            seen.add(id(tensor))
            buf = tensor.detach().to(_comm_device()).contiguous()
            with _guard("the start-up broadcast of weights"):
                dist.broadcast(buf, src=0)
            with torch.no_grad():
                tensor.copy_(buf.to(tensor.device))


@contextmanager
def main_first():
    """Rank 0 runs the block first (e.g. writes a shared file once), then the other ranks."""
    if not is_main():
        barrier()
    yield
    if is_main():
        barrier()


@lru_cache(maxsize=1)
def _all_gather_with_grad_fn() -> Any:
    """The autograd Function below, defined on first use: importing this module must not import torch."""
    import torch

    class _AllGatherWithGrad(torch.autograd.Function):
        """all_gather whose backward sums, over ranks, the gradient of this rank's slot and hands it to this rank
        (an all_reduce of the whole gathered gradient: embeddings are small, and gloo has no reduce_scatter)."""

        @staticmethod
        def forward(ctx: Any, tensor: torch.Tensor) -> tuple[torch.Tensor, ...]:  # noqa: ANN401
            import torch.distributed as dist

            parts = [torch.empty_like(tensor) for _ in range(world_size())]
            dist.all_gather(parts, tensor.contiguous())
            return tuple(parts)

        @staticmethod
        def backward(ctx: Any, *grads: torch.Tensor) -> torch.Tensor:  # noqa: ANN401
            import torch.distributed as dist

            stacked = torch.stack([g.contiguous() for g in grads])
            with _guard("the all_gather's backward all_reduce"):
                dist.all_reduce(stacked)
            return stacked[rank()]

    return _AllGatherWithGrad


def _gather_padded(tensor: torch.Tensor, with_grad: bool) -> list[torch.Tensor]:
    """Every rank's tensor (any sizes in every dim, same ndim), padded with zeros to the largest and trimmed back."""
    import torch
    import torch.distributed as dist

    dev = tensor.device
    comm = _comm_device()
    shape = torch.tensor(list(tensor.shape), dtype=torch.long, device=comm)
    shapes = [torch.empty_like(shape) for _ in range(world_size())]
    with _guard("an all_gather of shapes"):
        dist.all_gather(shapes, shape)
    sizes = [tuple(int(x) for x in s.cpu()) for s in shapes]
    biggest = [max(s[d] for s in sizes) for d in range(tensor.ndim)]
    pad: list[int] = []
    for d in reversed(range(tensor.ndim)):
        pad += [0, biggest[d] - tensor.shape[d]]
    local = torch.nn.functional.pad(tensor, pad) if any(pad) else tensor
    local = local.to(comm).contiguous()
    with _guard("an all_gather"):
        if with_grad:
            parts = list(_all_gather_with_grad_fn().apply(local))
        else:
            parts = [torch.empty_like(local) for _ in range(world_size())]
            dist.all_gather(parts, local)
    return [part[tuple(slice(0, n) for n in size)].to(dev) for part, size in zip(parts, sizes)]


def all_gather_with_grad(tensor: torch.Tensor) -> tuple[torch.Tensor, int]:
    """(rows of every rank concatenated in rank order, the offset of this rank's rows); gradients flow back.

    Ranks may hold different numbers of rows. The backward pass sums each rank's gradient into the rows it
    produced (reduce-scatter), so with gradients averaged over ranks afterwards, a loss normalised by the
    global row count trains exactly as one device with the whole batch.
    """
    import torch
    if not active():
        return tensor, 0
    parts = _gather_padded(tensor, with_grad=True)
    offset = sum(p.shape[0] for p in parts[: rank()])
    return torch.cat(parts, dim=0), offset


def all_gather_rows(tensor: torch.Tensor, pad_value: int | float = 0) -> torch.Tensor:
    """Rows of every rank (no gradient) concatenated in rank order; 2-D tensors of different widths are
    right-padded with `pad_value` to the widest (token ids / masks of shards of one batch)."""
    import torch
    if not active():
        return tensor
    parts = _gather_padded(tensor, with_grad=False)
    if tensor.ndim >= 2:
        width = max(p.shape[1] for p in parts)
        parts = [
            torch.nn.functional.pad(p, (0, width - p.shape[1]), value=pad_value) if p.shape[1] < width else p
            for p in parts
        ]
    return torch.cat(parts, dim=0)


def average_gradients(params: Sequence[torch.nn.Parameter]) -> None:
    """Mean of every parameter's gradient over ranks (what DDP does), in flat buckets.

    A parameter without a gradient on this rank but with one on another (a branch only some shards used)
    contributes zeros, so every rank reduces the same buffers in the same order; one without a gradient on any
    rank (e.g. BERT's unused pooler) keeps none, so the optimiser skips it exactly as on one device.
    """
    import torch
    import torch.distributed as dist
    from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

    if not active():
        return
    n = world_size()
    has_grad = torch.tensor([p.grad is not None for p in params], dtype=torch.int32, device=_comm_device())
    with _guard("the gradient all_reduce"):
        dist.all_reduce(has_grad)
    grads = []
    for p, used in zip(params, has_grad.tolist()):
        if not used:
            continue
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        grads.append(p.grad)
    buckets: list[list[torch.Tensor]] = []
    size = 0
    for g in grads:
        if not buckets or size + g.numel() > GRADIENT_BUCKET_ELEMENTS or g.dtype != buckets[-1][0].dtype:
            buckets.append([])
            size = 0
        buckets[-1].append(g)
        size += g.numel()
    for bucket in buckets:
        flat = _flatten_dense_tensors(bucket)
        dev = flat.device
        flat = flat.to(_comm_device())
        with _guard("the gradient all_reduce"):
            dist.all_reduce(flat)
        flat = (flat / n).to(dev)
        for g, synced in zip(bucket, _unflatten_dense_tensors(flat, bucket)):
            g.copy_(synced)


# --------------------------------------------------------------------------------------- sharding
def shard_bounds(n: int, rank_: int | None = None, world: int | None = None) -> tuple[int, int]:
    """[start, end) of this rank's contiguous share of n items; shares differ by at most one item."""
    r = rank() if rank_ is None else rank_
    w = world_size() if world is None else world
    return n * r // w, n * (r + 1) // w
