"""The one way lenbench writes a file or a folder it keeps: written whole beside the target under a hidden temporary
name, then moved into place. A write that fails (a full disk, a file-size limit, a read-only folder, a folder where
the file should be) becomes one line naming the target, never a traceback, and leaves no partial file; what was at
the target before is left as it was.

    with atomic_file(folder / "results.json", "results.json") as tmp:
        tmp.write_text(text)                     # fails -> WriteFault, one line; no .part file stays

    with atomic_folder(out, "the backbone") as tmp:
        model.save_pretrained(tmp)               # the folder appears whole, or not at all

`best_effort=True` (caches: losing one only costs time) logs the fault instead of raising it.

    with one_at_a_time(folder, "the sentence splits"):
        found = read(path) or compute_and_write(path)   # a second process waits here, then reads the file

`one_at_a_time` makes the processes that want the same cache file compute it once: runs of one sweep or claim
started side by side (three seeds of one method) would otherwise each spend the same minutes preparing it.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.runtime.errors import WriteFault, write_error

__all__ = ["WriteFault", "atomic_file", "atomic_folder", "is_write_fault", "one_at_a_time"]

log = logging.getLogger(__name__)

# What a library says when the disk refuses a write it made on its own (safetensors, torch's zip writer, onnx).
_FAULT_WORDS = ("file too large", "no space left", "disk quota", "read-only file system", "permission denied",
                "failed writing", "input/output error", "is a directory")  # fmt: skip


def is_write_fault(exc: BaseException) -> bool:
    """An OSError, or a serializer's error that reports one (SafetensorError 'File too large', torch's 'failed
    writing file'): the disk's refusal, not a bug."""
    if isinstance(exc, OSError):
        return True
    if not isinstance(exc, Exception):
        return False
    text = str(exc).lower()
    return any(word in text for word in _FAULT_WORDS)


def _fault(what: str, target: Path, exc: BaseException, kept: str, best_effort: bool) -> None:
    fault = write_error(what, target, exc, kept)
    if best_effort:
        log.info("%s", fault)
        return
    raise fault from None


@contextmanager
def atomic_file(target: str | os.PathLike[str], what: str, *, kept: str = "", best_effort: bool = False) -> Iterator[Path]:
    """Yield a temporary path beside `target`; on a clean exit it is moved onto `target` (see the module docstring).
    An exception that is not a write fault goes on as it is (the temporary file is removed either way)."""
    target = Path(target)
    tmp: Path | None = None
    if target.is_dir() and not target.is_symlink() and not best_effort:  # named as itself, not as the temporary file
        raise WriteFault(f"{what} could not be written: {target} is a folder; move it away (or give another output "
                         "folder), then run the same command again")  # fmt: skip
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = _temporary_name(target)
        os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))  # the umask's mode, as a plain write gets
    except Exception as exc:  # noqa: BLE001 - the folder refuses the file before anything is written
        if not is_write_fault(exc):
            raise
        _fault(what, target, exc, kept, best_effort)  # raises unless best effort
        with _discarded() as scratch:  # best effort: the caller writes into a scratch file that is dropped
            yield scratch
        return
    try:
        yield tmp
        os.replace(tmp, target)
    except Exception as exc:  # noqa: BLE001 - sorted below: the disk's refusals become one line, others go on
        if not is_write_fault(exc):
            raise
        _fault(what, target, exc, kept, best_effort)
    finally:
        if tmp is not None and tmp.exists():
            tmp.unlink()


@contextmanager
def atomic_folder(target: str | os.PathLike[str], what: str, *, kept: str = "", best_effort: bool = False,
                  replace: bool = False) -> Iterator[Path]:  # fmt: skip
    """Yield a temporary folder beside `target`; on a clean exit it becomes `target`. Without `replace`, a `target`
    that another process completed meanwhile (it holds a config.json) is kept: that process wrote the same content,
    and a partial folder left by an older lenbench (no config.json) is replaced. With `replace`, each written entry
    replaces its namesake in `target` (an encoder saved again over an earlier one)."""
    target = Path(target)
    tmp: Path | None = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = _temporary_name(target)
        tmp.mkdir()  # the umask's mode (mkdtemp's 0700 would make the folder private once moved in)
    except Exception as exc:  # noqa: BLE001 - the parent refuses the folder before anything is written
        if not is_write_fault(exc):
            raise
        _fault(what, target, exc, kept, best_effort)  # raises unless best effort
        with tempfile.TemporaryDirectory(prefix="lenbench-discarded-") as scratch:
            yield Path(scratch)
        return
    try:
        yield tmp
        _move_entries(tmp, target) if replace else _move_folder(tmp, target)
    except Exception as exc:  # noqa: BLE001 - the disk's refusals become one line, others go on
        if not is_write_fault(exc):
            raise
        _fault(what, target, exc, kept, best_effort)
    finally:
        if tmp is not None and tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def _discarded() -> Iterator[Path]:
    """A scratch file in the system's temporary folder, removed afterwards: where a best-effort write goes when its
    own folder refuses it (the context manager must still yield; the caller's write then costs nothing but time)."""
    fd, name = tempfile.mkstemp(prefix="lenbench-discarded-")
    os.close(fd)
    try:
        yield Path(name)
    finally:
        Path(name).unlink(missing_ok=True)


def _temporary_name(target: Path) -> Path:
    """A hidden name beside `target`, unique to this process and call."""
    return target.parent / f".{target.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.part"


def _move_entries(tmp: Path, target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    for entry in tmp.iterdir():
        into = target / entry.name
        if into.is_dir() and not into.is_symlink():
            shutil.rmtree(into)
        os.replace(entry, into)


def _move_folder(tmp: Path, target: Path) -> None:
    for _ in range(3):
        try:
            tmp.rename(target)
            return
        except OSError:  # another process put it there first, or a partial folder from before writes were atomic
            if (target / "config.json").exists():
                return
            if target.is_dir():
                shutil.rmtree(target, ignore_errors=True)
            elif target.exists():
                raise
    tmp.rename(target)


WAIT_NOTE_S = 2.0  # a wait on another process longer than this is said once (a silent pause looks like a hang)


@contextmanager
def one_at_a_time(folder: str | os.PathLike[str], what: str, poll: float = 0.1) -> Iterator[None]:
    """Hold an exclusive advisory lock on `folder` (flock on the folder itself: no lock file is left for `bench cache`
    to explain) while the body runs, so that processes preparing a file of that cache folder take turns and the
    later ones read what the first wrote. Two different files of one folder are prepared one after the other too:
    each preparation already uses every core it may, so little is lost, and one lock is all there is to reason
    about. The kernel drops the lock when its holder exits or is killed, so a dead holder never blocks anyone. The
    wait polls (a signal ends it at once) and says once, after a moment, what it waits for. Where
    the folder cannot be made or locked (read-only, no flock on this platform or file system), the body runs
    unlocked: the caches' writes are atomic, so the cost is only the duplicated work this avoids."""
    try:
        import fcntl

        Path(folder).mkdir(parents=True, exist_ok=True)
        fd = os.open(folder, os.O_RDONLY)
    except (ImportError, OSError):
        fd = -1
    if fd < 0:
        yield
        return
    try:
        start, told = time.monotonic(), False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not told and time.monotonic() - start > WAIT_NOTE_S:
                    log.warning("waiting for another process preparing %s in %s (it is read from there after)",
                                what, folder)  # fmt: skip
                    told = True
                time.sleep(poll)
            except OSError:  # a file system without flock: run unlocked
                break
        yield
    finally:
        os.close(fd)  # releases the lock
