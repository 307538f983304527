"""Worker process pools that cannot deadlock and never hold their parent: the one way lenbench starts a pool.

Why not fork: by the time a pool starts, this process has usually run the fast tokenizer, whose Rust thread pool
(and the locks its threads hold) a forked child inherits frozen; a child that then tokenises can wait forever on a
lock no thread of its own will release (issue 44: `bench run` hung after the baseline's evaluation, every time).
So every worker is started by `start_context()`: the forkserver (Linux, macOS) or spawn. The forkserver is a fresh
interpreter, started once per process, that never runs a tokenizer; each worker is a fork of it, so no worker
inherits a lock. Workers get what they need (a tokenizer) as a pickled copy through the pool's initializer.

Why bounded: `WorkerPool.map` waits for the next finished chunk at most `stall_seconds()`
(LENBENCH_POOL_STALL_SECONDS, default 120 s). A pool that finishes nothing in that time (a deadlocked, stopped or
crashed worker) is torn down, its workers killed, and the chunks left are computed in this process with the
caller's in-process function; one line says so. Results are the same either way.

Why killed, not joined, on a stop: a pool ended by an exception (StopRequested from SIGTERM/SIGINT included) kills
its workers instead of waiting for them, and `end_all()` (called when a command ends, and at exit) kills the
workers of every pool kept alive, so a signal ends the job within seconds and leaves no process behind. Workers
ignore SIGINT (the parent decides), die with the forkserver (Linux: PR_SET_PDEATHSIG) and watch the forkserver's
parent, this process: once it has ended, they exit and the forkserver with them, so even a SIGKILLed parent leaves no
worker (Linux).

LENBENCH_POOLS: `auto` (default; each caller decides by its size thresholds), `on` (a pool wherever one could be
used, with at least two workers even on one or two cores: how tests reach the pool path on a small machine), `off`
(never a process pool: everything in this process).
"""

from __future__ import annotations

import hashlib
import logging
import multiprocessing
import os
import signal
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from multiprocessing import context as mp_context
from multiprocessing import spawn as mp_spawn
from typing import Any

from bench import environment
from bench.runtime.heartbeat import progressed

log = logging.getLogger(__name__)

MODE_ENV = "LENBENCH_POOLS"
STALL_ENV = "LENBENCH_POOL_STALL_SECONDS"
CORES_ENV = "LENBENCH_CORES"
STALL_SECONDS = 120.0
MODES = ("auto", "on", "off")
# Imported once by the forkserver, so each worker (a fork of it) starts with them loaded. What a worker unpickles
# (a transformers tokenizer, a method's adapter, torch tensors) needs torch and transformers: without them here every
# worker imported both itself while its parent waited (the parent's write of a worker's pickled start-up data blocks
# until the worker has read it, and reading it runs the imports), one worker after another: on a 16-core GPU machine
# the loader's 15 workers and the token pool's 16 cost a training run a minute before its first step. Importing them
# once costs a second or two, which `prestart()` overlaps with the caller's own model load. None of them starts a
# thread (a forkserver must have none when it forks); a module that is not installed is skipped by multiprocessing.
PRELOAD = ("numpy", "tokenizers", "torch", "transformers", "transformers.models", "bench.runtime.pools")


def mode() -> str:
    """LENBENCH_POOLS as one of MODES (unset: auto; another value is refused, as for every lenbench variable)."""
    return environment.choice(MODE_ENV) or "auto"


def stall_seconds() -> float:
    """How long a pool may finish nothing before it is torn down (LENBENCH_POOL_STALL_SECONDS, > 0)."""
    return environment.number(STALL_ENV, STALL_SECONDS)


def usable_cores() -> int:
    """Cores this process may run on: its CPU affinity, and no more than $LENBENCH_CORES where that is set (a sweep
    or claim job slot's share of the machine: three jobs on 16 cores get 5 each, not 16 workers apiece), at least 1."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, int(environment.number(CORES_ENV, cores))))


def pool_workers(workers: int | None, items: int, minimum_items: int) -> int:
    """How many worker processes a job of `items` gets: 0 for none (do it in this process). `workers` None: every
    usable core. auto: a pool from `minimum_items` items and two workers; on: from two items, two workers at least;
    off: never."""
    chosen = mode()
    n = usable_cores() if workers is None else max(1, workers)
    if chosen == "off" or items < 2:
        return 0
    if chosen == "on":
        return max(2, n)
    return n if n > 1 and items >= minimum_items else 0


WORKER_PREFIX = "lenbench-worker"


class _ForkServerWorker(mp_context.ForkServerProcess):
    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.name = f"{WORKER_PREFIX}-{self.name}"


class _SpawnWorker(mp_context.SpawnProcess):
    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.name = f"{WORKER_PREFIX}-{self.name}"


class _ForkServerContext(mp_context.ForkServerContext):
    Process = _ForkServerWorker


class _SpawnContext(mp_context.SpawnContext):
    Process = _SpawnWorker


def _without_main(original: Callable[[str], dict[str, Any]]) -> Callable[[str], dict[str, Any]]:
    """multiprocessing's preparation data for a new child, less the caller's main module for our workers: a spawned
    or forkserver child otherwise re-runs the script that started this process (a script that calls lenbench
    without an `if __name__ == "__main__":` guard would run again in every worker). Workers run functions of
    importable modules only."""

    def preparation_data(name: str) -> dict[str, Any]:
        data = original(name)
        if str(name).startswith(WORKER_PREFIX):
            data.pop("init_main_from_path", None)
            data.pop("init_main_from_name", None)
        return data

    preparation_data.lenbench_without_main = True  # type: ignore[attr-defined]
    return preparation_data


if not getattr(mp_spawn.get_preparation_data, "lenbench_without_main", False):
    mp_spawn.get_preparation_data = _without_main(mp_spawn.get_preparation_data)


def start_context() -> Any:
    """The multiprocessing context every pool uses (DataLoader workers too): the forkserver where the platform has
    it (with PRELOAD), else spawn. Never fork (see the module docstring)."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = _ForkServerContext()
        context.set_forkserver_preload(list(PRELOAD))  # the one forkserver of this process; no '__main__' either
        return context
    return _SpawnContext()


def prestart() -> None:
    """Start this process's forkserver now, so that its imports (PRELOAD) run while the caller loads a model rather
    than when the first pool starts a worker. Cheap (the server imports in its own process); nothing where no pool
    would start (pools off, or auto on one usable core) or the platform has no forkserver."""
    if not pool_workers(None, 2, 2) or "forkserver" not in multiprocessing.get_all_start_methods():
        return  # the smallest job a pool could take gets none here: no pool will start
    start_context()
    from multiprocessing import forkserver

    forkserver.ensure_running()


def worker_started() -> None:
    """First thing in every worker: leave Ctrl-C to the parent (it ends the pool), die with the forkserver or with
    the process that started it (Linux), and tokenise on one thread (the pool is the parallelism)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    _die_with_parent()


def _die_with_parent() -> None:
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # pragma: no cover - not Linux: the pool still ends its workers itself
        pass
    _die_with_owner()


def _die_with_owner() -> None:
    """A worker of the forkserver ends when the process that started the forkserver (the pool's owner) ends.

    PR_SET_PDEATHSIG ties a worker to its parent, the forkserver, and the forkserver does not end with a SIGKILLed
    owner: it waits for the end of the owner's pipe, whose other end every worker also holds (multiprocessing hands
    it to each process the forkserver starts). So a SIGKILLed `bench run` left the forkserver and its loader worker
    running, holding the job's stdout open. A thread of the worker watches the forkserver's parent instead: once the
    owner has ended, the forkserver's parent changes (it is reparented at the owner's exit, before anyone reaps it),
    and the worker exits; the forkserver then sees its pipe close and exits too."""
    server = os.getppid()
    try:
        with open(f"/proc/{server}/cmdline", "rb") as fh:
            if b"multiprocessing.forkserver" not in fh.read():
                return  # spawned by the owner itself: PR_SET_PDEATHSIG above already covers it
    except OSError:  # pragma: no cover - no /proc (not Linux)
        return
    owner = _parent_of(server)
    if owner is None:  # pragma: no cover - the forkserver is gone already
        os._exit(1)

    def watch() -> None:
        while _parent_of(server) == owner:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="lenbench-owner-watch", daemon=True).start()


def _parent_of(pid: int) -> int | None:
    """The parent pid of `pid` from /proc (None when it has ended)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return int(fh.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _start_worker(initializer: Callable[..., None] | None, initargs: tuple[Any, ...]) -> None:
    worker_started()
    if initializer is not None:
        initializer(*initargs)


_LIVE: "weakref.WeakSet[WorkerPool]" = weakref.WeakSet()


class WorkerPool:
    """A process pool started by `start_context()` whose `map` never waits on a stuck worker (module docstring)."""

    def __init__(self, workers: int, name: str, initializer: Callable[..., None] | None = None,
                 initargs: tuple[Any, ...] = ()):  # fmt: skip
        self.workers, self.name = int(workers), name
        self._executor: ProcessPoolExecutor | None = ProcessPoolExecutor(
            max_workers=self.workers, mp_context=start_context(), initializer=_start_worker,
            initargs=(initializer, initargs))  # fmt: skip
        _LIVE.add(self)

    @property
    def alive(self) -> bool:
        return self._executor is not None

    def map(self, fn: Callable[[Any], Any], chunks: Iterable[Any], local: Callable[[Any], Any] | None = None,
            stall: float | None = None) -> list[Any]:  # fmt: skip
        """[fn(chunk) for chunk in chunks] computed by the workers, in order. When the pool finishes no chunk for
        `stall` seconds (default `stall_seconds()`) or breaks, it is torn down and the chunks left are computed
        here by `local` (default `fn`). Any exception (a stop included) kills the workers before it propagates."""
        chunks = list(chunks)
        local = fn if local is None else local
        limit = stall_seconds() if stall is None else stall
        results: list[Any] = [None] * len(chunks)
        done = [False] * len(chunks)
        try:
            executor = self._executor
            if executor is None:
                raise BrokenProcessPool("the pool was ended")
            futures: dict[Future, int] = {executor.submit(fn, c): i for i, c in enumerate(chunks)}
            reason = self._collect(futures, results, done, limit)
        except BrokenProcessPool as exc:
            reason = f"its worker process ended ({exc})"
        except BaseException:
            self.end()
            raise
        if reason:
            self.end()
            left = [i for i, d in enumerate(done) if not d]
            log.warning("%s pool: %s; finishing %d of %d chunks in this process", self.name, reason, len(left), len(chunks))
            for i in left:
                results[i] = local(chunks[i])
        return results

    @staticmethod
    def _collect(futures: dict[Future, int], results: list[Any], done: list[bool], limit: float) -> str:
        """Results into place as they finish; '' when all did, else why the pool is given up."""
        pending = set(futures)
        while pending:
            finished, pending = wait(pending, timeout=limit, return_when=FIRST_COMPLETED)
            if not finished:
                return f"no chunk finished in {limit:g} s (workers stuck); its workers are ended"
            progressed()  # a stalled run is told apart from a slow one by this (bench.runtime.heartbeat)
            for future in finished:
                i = futures[future]
                results[i] = future.result()  # a worker's exception is the caller's (as Executor.map)
                done[i] = True
        return ""

    def end(self) -> None:
        """Kill the workers now (no wait for a chunk in progress) and release the pool."""
        executor, self._executor = self._executor, None
        _LIVE.discard(self)
        if executor is None:
            return
        processes = list((getattr(executor, "_processes", None) or {}).values())
        for process in processes:
            try:
                process.kill()
            except (OSError, AttributeError, ValueError):
                pass
        executor.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + 5
        for process in processes:
            try:
                process.join(max(0.0, deadline - time.monotonic()))
            except (AssertionError, ValueError):  # not started, or already closed
                pass

    def close(self) -> None:
        """Let idle workers exit (they finish no new chunk); kill any still there after 5 s."""
        executor = self._executor
        if executor is None:
            return
        processes = list((getattr(executor, "_processes", None) or {}).values())
        executor.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + 5
        for process in processes:
            try:
                process.join(max(0.0, deadline - time.monotonic()))
            except (AssertionError, ValueError):
                pass
        self.end()


class KeptPools:
    """One kept pool per name, reused while the same (key, workers) asks again: starting workers costs more than a
    small job, and a run prepares corpora and encodes in many calls. Replaced (old workers ended) on a new key."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pools: dict[str, tuple[str, WorkerPool]] = {}

    def get(self, name: str, workers: int, key: str = "", initializer: Callable[..., None] | None = None,
            initargs: tuple[Any, ...] = ()) -> WorkerPool:  # fmt: skip
        full = f"{key}|{workers}"
        with self._lock:
            held = self._pools.get(name)
            if held is not None and held[0] == full and held[1].alive:
                return held[1]
            if held is not None:
                held[1].close()
            pool = WorkerPool(workers, name, initializer, initargs)
            self._pools[name] = (full, pool)
            return pool

    def end(self) -> None:
        with self._lock:
            pools, self._pools = list(self._pools.values()), {}
        for _, pool in pools:
            pool.end()


KEPT = KeptPools()


def end_all() -> None:
    """Kill the workers of every pool of this process (a stop, and interpreter exit): nothing is left behind."""
    KEPT.end()
    for pool in list(_LIVE):
        pool.end()


def digest(*parts: Any) -> str:
    """A short key for KeptPools from strings/bytes (a tokenizer's serialised form, a setting)."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part if isinstance(part, bytes) else str(part).encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()[:24]


@dataclass(frozen=True)
class PoolSetup:
    """Which kept pool a `parallel_map` runs in: its `name`, the `key` it is reused under while it stays the same,
    and how its workers are set up (`initializer(*initargs)`, once per worker)."""

    name: str = "worker"
    key: str = ""
    initializer: Callable[..., None] | None = None
    initargs: tuple[Any, ...] = ()


def parallel_map(fn: Callable[[list[Any]], list[Any]], items: Sequence[Any], workers: int | None = None, *,
                 pool: PoolSetup = PoolSetup(), local: Callable[[list[Any]], list[Any]] | None = None,
                 minimum_items: int = 64) -> list[Any]:  # fmt: skip
    """fn over chunks of `items`, results concatenated in order: in the kept `pool` when `pool_workers` says so,
    else `local` (default `fn`) in this process. `fn` must be a module-level function (it is pickled)."""
    items = list(items)
    local = fn if local is None else local
    n = pool_workers(workers, len(items), minimum_items)
    if n == 0:
        return local(items)
    # Small chunks handed out as workers free up: long and short items spread evenly.
    size = max(16, min(512, len(items) // (n * 8) or 1))
    chunks = [items[i : i + size] for i in range(0, len(items), size)]
    kept = KEPT.get(pool.name, n, pool.key, pool.initializer, pool.initargs)
    out: list[Any] = []
    for part in kept.map(fn, chunks, local=local):
        out.extend(part)
    return out


def _register_exit() -> None:
    """end_all at interpreter exit, before concurrent.futures joins its pools' threads (which would wait for a
    stuck worker forever): threading's exit hooks run in reverse order of registration, and concurrent.futures
    registered its own when imported above."""
    register = getattr(threading, "_register_atexit", None)
    if register is not None:
        register(end_all)
    else:  # pragma: no cover - an interpreter without the hook
        import atexit

        atexit.register(end_all)


_register_exit()
