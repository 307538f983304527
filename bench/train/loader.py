"""Training batches built ahead of the step that uses them: the text stream, the per-draw randomness and the loader.

The trainer takes batches from `BatchLoader`; with `workers` > 0 they are built in worker processes (torch's
DataLoader, its workers started by the forkserver, never forked: bench.runtime.pools; a bounded queue of `prefetch`
batches per worker) while the step before runs; with 0 they are built on the training thread when asked for.

Results never depend on the number of workers, because nothing a batch is made of depends on who builds it or when:

- which texts make draw d is decided in order, on the training process (`TextStream`, the seeded shuffled passes
  over the corpus, and the adapter's `accepts` filter): one draw's texts are the next `batch_size` accepted texts;
- the randomness of draw d is its own generator, `draw_rng(seed, d)` (and torch's global generator is reseeded from
  it around `make_batch`, so an adapter that draws from torch gets the same tensors anywhere, and the training
  thread's dropout stream is never touched by batch building);
- `adapter.make_batch(texts, rng)` depends only on its arguments (the protocol: bench.train.method).

A draw can give no batch (None: no usable pair); it is consumed all the same. Each item carries the stream position
after its draw (`Position`): the trainer checkpoints the position of the last draw it consumed, however far the
workers have run ahead, so `--resume` continues exactly there.
"""

from __future__ import annotations

import copy
import hashlib
import logging
import pickle
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from bench.runtime import pools, signals
from bench.runtime.errors import MethodContractError, TrainingError
from bench.train.method import AdapterHooks

log = logging.getLogger(__name__)

POLL_SECONDS = 1.0  # how long one wait for a worker's batch lasts before a stop request or a stall is looked at


MAX_WORKERS = 8  # a batch takes milliseconds to build: more workers only cost their start (and memory)


def default_workers(world: int = 1) -> int:
    """The cores left beside the training process(es): this process's usable cores (`pools.usable_cores`: a job
    slot's share where a sweep or claim runs several) / processes per machine - 1, at most MAX_WORKERS."""
    return max(0, min(MAX_WORKERS, pools.usable_cores() // max(1, world) - 1))


def draw_rng(seed: int, draw: int) -> random.Random:
    """The generator of draw number `draw` of a run seeded `seed` (independent of every other draw)."""
    digest = hashlib.sha256(f"{seed}|draw|{draw}".encode()).digest()
    return random.Random(int.from_bytes(digest[:16], "little"))


# ------------------------------------------------------------------------------------ text stream
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


@dataclass(frozen=True)
class Position:
    """Where the data stream stands after a draw: the next draw's number and the text stream's place."""

    draw: int
    epoch: int
    index: int

    def state(self) -> dict[str, int]:
        return {"draw": self.draw, "epoch": self.epoch, "index": self.index}

    @classmethod
    def from_state(cls, state: dict[str, int]) -> Position:
        return cls(int(state.get("draw", 0)), int(state["epoch"]), int(state["index"]))


@dataclass(frozen=True)
class Draw:
    """One draw: its number, the corpus indices of its texts, and the position after it."""

    number: int
    text_ids: tuple[int, ...]
    after: Position


class _Draws(Sampler):
    """The draws in order, picked on the training process (cheap: indices and the adapter's `accepts`)."""

    def __init__(self, texts: Sequence[str], batch_size: int, seed: int, start: Position,
                 accepts: Callable[[str], bool] | None, name: str):  # fmt: skip
        self.texts, self.batch_size, self.accepts, self.name = texts, batch_size, accepts, name
        self.stream = TextStream(len(texts), seed)
        self.stream.restore({"epoch": start.epoch, "index": start.index})
        self.draw = start.draw

    def __iter__(self) -> Iterator[Draw]:
        while True:
            yield self.next_draw()

    def restore(self, position: Position) -> None:
        """Continue from `position` (the draws after it come next)."""
        self.stream.restore({"epoch": position.epoch, "index": position.index})
        self.draw = position.draw

    def next_draw(self) -> Draw:
        picked: list[int] = []
        tried = 0
        while len(picked) < self.batch_size:
            i = self.stream.next_index()
            tried += 1
            if self.accepts is None or self.accepts(self.texts[i]):
                picked.append(i)
            elif tried > len(self.texts) and not picked:
                raise TrainingError(f"method {self.name!r} can use no text of the training corpus")
        number = self.draw
        self.draw += 1
        return Draw(number, tuple(picked), Position(self.draw, self.stream.epoch, self.stream.index))


@dataclass(frozen=True)
class BrokenContract:
    """What a batch build that broke the method's contract returns instead of a batch: its one-line message, raised
    again as a MethodContractError on the training process."""

    message: str


class _Builder(Dataset):
    """draw -> (draw, adapter.make_batch(its texts, draw_rng(seed, draw)) or None).

    A loader worker gets a pickled copy (workers are never forked: bench.runtime.pools): the adapter without its
    torch modules (make_batch never uses the weights, which stay with the trainer) and with the sentence splits
    this process has installed, so a worker splits nothing the training process already split."""

    def __init__(self, adapter: Any, texts: Sequence[str], seed: int):
        self.adapter, self.texts, self.seed = adapter, texts, seed

    def __getstate__(self) -> dict[str, Any]:
        from bench.data import sentences
        from bench.train import method_file

        # The adapter travels as bytes after the method files it may come from (`--method ./m.py`), which the
        # worker loads first: their classes and functions are pickled by reference to modules only loading makes.
        return {"adapter": pickle.dumps(_without_modules(self.adapter)), "texts": self.texts, "seed": self.seed,
                "splits": sentences.installed(), "method_files": method_file.loaded()}  # fmt: skip

    def __setstate__(self, state: dict[str, Any]) -> None:
        from bench.data import sentences
        from bench.train import method_file

        sentences.install(state.pop("splits"))
        method_file.install(state.pop("method_files"))
        state["adapter"] = pickle.loads(state["adapter"])
        self.__dict__.update(state)

    def __getitem__(self, draw: Draw) -> tuple[Draw, dict[str, Any] | None]:
        rng = draw_rng(self.seed, draw.number)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(rng.getrandbits(63))
            try:
                batch = self.adapter.make_batch([self.texts[i] for i in draw.text_ids], rng)
            except MethodContractError as exc:  # carried back whole: a worker's error would come wrapped in its traceback
                return draw, BrokenContract(str(exc))
            except Exception as exc:  # a method file's own code raised: one line at its line, as in the main process
                from bench.train.method_file import worker_fault

                fault = worker_fault(exc, f"making a batch of method {getattr(self.adapter, 'name', '')!r}")
                if fault is None:  # lenbench's own error, or a packaged method's: its traceback
                    raise
                return draw, BrokenContract(str(fault))
        return draw, batch

    def __len__(self) -> int:  # pragma: no cover - the stream is endless; DataLoader only asks with a sampler
        raise TypeError("an endless stream of draws")


def _without_modules(adapter: Any) -> Any:
    """A shallow copy of `adapter` whose torch.nn.Module attributes (a momentum encoder, an MLM head) are None."""
    fields = getattr(adapter, "__dict__", None)
    if not fields or not any(isinstance(v, torch.nn.Module) for v in fields.values()):
        return adapter
    clone = copy.copy(adapter)
    for name, value in fields.items():
        if isinstance(value, torch.nn.Module):
            setattr(clone, name, None)
    return clone


def _identity(item: Any) -> Any:
    return item


def _worker_init(_: int) -> None:
    """A worker leaves Ctrl-C to the trainer (which finishes its step, checkpoints and stops the workers), tokenises
    on one thread and dies with its parent (bench.runtime.pools.worker_started)."""
    pools.worker_started()


class BatchLoader:
    """Endless (draw, batch) items for one run; `workers` processes build them ahead, `prefetch` each (bounded)."""

    def __init__(self, adapter: Any, texts: Sequence[str], *, batch_size: int, seed: int, start: Position | None = None,
                 workers: int = 0, prefetch: int = 2, pin_memory: bool = False):  # fmt: skip
        if workers < 0:
            raise ValueError(f"loader workers must be >= 0, got {workers}")
        self.workers = workers
        hooks = AdapterHooks.of(adapter)
        self.start = start or Position(0, 0, 0)
        self.sampler = _Draws(texts, batch_size, seed, self.start, hooks.accepts, hooks.label)
        self.builder = _Builder(adapter, texts, seed)
        self._iter: Iterator[tuple[Draw, dict[str, Any] | None]] | None = None
        self._loader: DataLoader | None = None
        if workers > 0:
            self._loader = DataLoader(
                self.builder, batch_size=None, sampler=self.sampler, collate_fn=_identity, num_workers=workers,
                prefetch_factor=max(1, prefetch), pin_memory=pin_memory, worker_init_fn=_worker_init,
                timeout=POLL_SECONDS,  # each wait for a batch: one second, then _from_workers decides
                multiprocessing_context=pools.start_context(),  # never fork: the tokenizer's threads have run
                generator=torch.Generator().manual_seed(seed),  # its workers' seeds: never a draw from the global
            )  # generator, which is the training thread's (dropout) and checkpointed

    def __iter__(self) -> Iterator[tuple[Draw, dict[str, Any] | None]]:
        for draw, batch in self._items():
            if isinstance(batch, BrokenContract):
                raise MethodContractError(batch.message)
            yield draw, batch

    def _items(self) -> Iterator[tuple[Draw, Any]]:
        if self._loader is not None:
            try:
                return self._from_workers(iter(self._loader))
            except (pickle.PicklingError, AttributeError, TypeError) as exc:  # what pickling an object refuses with
                # A plug-in adapter holding a lambda or a local class: the same batches, built here.
                log.warning("loader workers off: the adapter of %r cannot be copied to a worker process (%s: %s); "
                            "batches are built on the training thread (the same batches)", self.sampler.name,
                            type(exc).__name__, exc)  # fmt: skip
                self._loader, self.workers = None, 0
        return (self.builder[draw] for draw in self.sampler)

    def _from_workers(self, it: Any) -> Iterator[tuple[Draw, dict[str, Any] | None]]:
        """The workers' items, waited for a second at a time: a stop requested meanwhile ends the stream (the trainer
        then checkpoints the last step it took), and workers that deliver nothing for `pools.stall_seconds()` are
        ended and the stream goes on here, from the draw after the last one delivered (the same batches)."""
        stall = pools.stall_seconds()
        last: Position | None = None
        waited = 0.0
        while True:
            try:
                draw, batch = next(it)
            except RuntimeError as exc:
                if "timed out" not in str(exc):
                    raise
                if signals.stop_requested():
                    return
                waited += POLL_SECONDS
                if waited < stall:
                    continue
                log.warning("loader workers delivered no batch in %g s (stuck); they are ended and batches are built "
                            "on the training thread from here (the same batches)", stall)  # fmt: skip
                shutdown = getattr(it, "_shutdown_workers", None)
                if shutdown is not None:
                    shutdown()
                self.sampler.restore(last or self.start)
                self.workers = 0
                yield from (self.builder[d] for d in self.sampler)
                return
            waited = 0.0
            last = draw.after
            yield draw, batch

    def close(self) -> None:
        """Stop the workers (an endless loader's workers otherwise live until the loader is collected)."""
        it, self._iter = self._iter, None
        shutdown = getattr(it, "_shutdown_workers", None)
        if shutdown is not None:
            shutdown()

    def batches(self) -> Iterator[tuple[Draw, dict[str, Any] | None]]:
        """The one iterator of this loader (started on first call); `close()` stops its workers."""
        if self._iter is None:
            self._iter = iter(self)
        return self._iter
