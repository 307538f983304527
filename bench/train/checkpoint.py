"""Checkpoints in safetensors: everything `--resume` needs to continue a run exactly where it stopped.

Layout under <out>/checkpoints/:
    step-00000120/model.safetensors    encoder weights (what the saved encoder will hold)
    step-00000120/state.safetensors    every other tensor: adapter's extra modules, AdamW moments, RNG states,
                                       adapter state (momentum encoder, queue ...)
    step-00000120/state.json           the structure around those tensors + plain values (step, consumption,
                                       data position, python RNG state, config fingerprint)
    LATEST                             name of the newest complete checkpoint

`CheckpointSchedule` decides when: every 10 minutes of training by default (--checkpoint-minutes), every N steps
when asked (--checkpoint-every), and the trainer saves at the stop; a kill never loses more than that. A short run
writes one checkpoint, at its end, unless its config says not to (`TrainConfig.checkpoint_at_end`: bench run keeps
only the saved encoder of a run that ended before its first scheduled checkpoint).

`CheckpointWriter` writes in the background: the state is copied to host memory on the training thread (a consistent
snapshot), then a thread serialises and writes it while the next steps run; one write at a time, and the trainer
waits for it before the next checkpoint, at the end and on an error. A checkpoint is written to a temporary folder
and renamed into place, and LATEST is replaced atomically, so a process killed (or a write failing) while saving
leaves the previous checkpoint intact. Only the newest `keep` checkpoints stay.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from bench.runtime.errors import write_error

LATEST = "LATEST"


@dataclass
class TrainState:
    """What a checkpoint holds besides the encoder weights: everything `--resume` restores, in one place.

    fingerprint: the config hash the run was started with (a resume with other settings is refused);
    consumed: the budget used so far (`bench.train.budget.Consumption` as a dict: steps, examples, tokens, seconds);
    stream: the position in the shuffled corpus; rng: the python / torch (/ cuda) RNG states;
    optimizer, adapter, extra: the state dicts of AdamW, the method adapter and its extra modules.
    """

    fingerprint: str
    consumed: dict[str, Any]
    stream: dict[str, Any]
    rng: dict[str, Any]
    optimizer: dict[str, Any]
    adapter: dict[str, Any]
    extra: list[dict[str, Any]]

    def as_dict(self) -> dict[str, Any]:
        """The fields by name (no copies: the tensors are copied once, when the checkpoint is written)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, state: dict[str, Any], folder: str | os.PathLike[str] = "") -> "TrainState":
        """The state a checkpoint's state.json + state.safetensors hold; one that lacks a field is a TrainingError
        naming the checkpoint."""
        missing = [f.name for f in fields(cls) if f.name not in state]
        if missing:
            from bench.runtime.errors import TrainingError

            raise TrainingError(f"checkpoint {folder} lacks {', '.join(missing)} (not written by this trainer); move that "
                                "folder away and run again (--resume then starts this run's training over)")  # fmt: skip
        return cls(**{f.name: state[f.name] for f in fields(cls)})


# ------------------------------------------------------------------ nested state <-> tensors + JSON
def flatten_state(obj: Any, tensors: dict[str, torch.Tensor], path: str = "s") -> Any:
    """Replace every tensor in a nested dict/list/tuple by a reference; tensors go to `tensors` (cloned, CPU).

    Dict keys keep their type (optimizer state is keyed by int) and tuples stay tuples (random.getstate()).
    Tensors are cloned, so weights shared between modules (tied embeddings) save without safetensors' aliasing error.
    """
    if isinstance(obj, torch.Tensor):
        key = f"{path}#{len(tensors)}"
        tensors[key] = obj.detach().to("cpu").contiguous().clone()
        return {"__tensor__": key}
    if isinstance(obj, np.ndarray):
        return flatten_state(torch.from_numpy(np.ascontiguousarray(obj)), tensors, path)
    if isinstance(obj, dict):
        return {"__dict__": [[k, flatten_state(v, tensors, f"{path}.{k}")] for k, v in obj.items()]}
    if isinstance(obj, tuple):
        return {"__tuple__": [flatten_state(v, tensors, f"{path}.{i}") for i, v in enumerate(obj)]}
    if isinstance(obj, list):
        return [flatten_state(v, tensors, f"{path}.{i}") for i, v in enumerate(obj)]
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, (np.integer, np.floating)):
        return obj.item()
    raise TypeError(f"cannot checkpoint a value of type {type(obj).__name__} at {path}")


def unflatten_state(obj: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(obj, dict):
        if "__tensor__" in obj:
            return tensors[obj["__tensor__"]]
        if "__dict__" in obj:
            return {k: unflatten_state(v, tensors) for k, v in obj["__dict__"]}
        if "__tuple__" in obj:
            return tuple(unflatten_state(v, tensors) for v in obj["__tuple__"])
    if isinstance(obj, list):
        return [unflatten_state(v, tensors) for v in obj]
    return obj


# --------------------------------------------------------------------------------- save / load
def checkpoint_root(out_dir: str | os.PathLike[str]) -> Path:
    return Path(out_dir) / "checkpoints"


def latest_checkpoint(out_dir: str | os.PathLike[str]) -> Path | None:
    root = checkpoint_root(out_dir)
    marker = root / LATEST
    if not marker.exists():
        return None
    folder = root / marker.read_text().strip()
    return folder if (folder / "state.json").exists() else None


@dataclass
class Snapshot:
    """A checkpoint's content copied to host memory: safe to write while training goes on."""

    step: int
    model: dict[str, torch.Tensor]
    tensors: dict[str, torch.Tensor]
    structure: Any


def snapshot(step: int, model_state: dict[str, torch.Tensor], state: TrainState | dict[str, Any]) -> Snapshot:
    """Copy the weights and the training state to host memory (cloned: later steps do not change the copy)."""
    if isinstance(state, TrainState):
        state = state.as_dict()
    model = {k: v.detach().to("cpu").contiguous().clone() for k, v in model_state.items()}
    tensors: dict[str, torch.Tensor] = {}
    structure = flatten_state(state, tensors)
    return Snapshot(step, model, tensors, structure)


def checkpoint_folder(out_dir: str | os.PathLike[str], step: int) -> Path:
    return checkpoint_root(out_dir) / f"step-{step:08d}"


def save_checkpoint(
    out_dir: str | os.PathLike[str], step: int, model_state: dict[str, torch.Tensor], state: TrainState | dict[str, Any],
    keep: int = 1,
) -> Path:
    return write_snapshot(out_dir, snapshot(step, model_state, state), keep)


def write_snapshot(out_dir: str | os.PathLike[str], snap: Snapshot, keep: int = 1) -> Path:
    """Write a snapshot as checkpoint step-NNNNNNNN: into a temporary folder, renamed into place, then LATEST."""
    root = checkpoint_root(out_dir)
    root.mkdir(parents=True, exist_ok=True)
    name = checkpoint_folder(out_dir, snap.step).name
    tmp = root / f".{name}.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    try:
        tmp.mkdir()
        save_file(snap.model, str(tmp / "model.safetensors"))
        save_file(snap.tensors, str(tmp / "state.safetensors"))
        (tmp / "state.json").write_text(json.dumps(snap.structure))
    except Exception as exc:  # noqa: BLE001 - a full disk, a file-size limit, a vanished folder: one line
        shutil.rmtree(tmp, ignore_errors=True)
        previous = latest_checkpoint(out_dir)
        kept = (f"the previous checkpoint {previous} is intact (--resume continues from it)" if previous is not None
                else "there is no earlier checkpoint")  # fmt: skip
        raise write_error(f"checkpoint {name}", root, exc, kept) from None
    final = root / name
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    marker_tmp = root / f".{LATEST}.tmp"
    marker_tmp.write_text(name)
    os.replace(marker_tmp, root / LATEST)
    older = sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith("step-") and p.name != name)
    for old in older[: max(0, len(older) - (keep - 1))]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def load_checkpoint(folder: str | os.PathLike[str]) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """(model state, training state) of a checkpoint; a damaged one (truncated, overwritten) is one clear
    TrainingError naming it, never a traceback: checkpoints are written atomically, so only outside damage does it."""
    from safetensors import SafetensorError

    from bench.runtime.errors import TrainingError

    folder = Path(folder)
    try:
        model_state = load_file(str(folder / "model.safetensors"))
        tensors = load_file(str(folder / "state.safetensors"))
        state = unflatten_state(json.loads((folder / "state.json").read_text()), tensors)
    except (SafetensorError, OSError, ValueError, KeyError, TypeError) as exc:
        raise TrainingError(f"checkpoint {folder} cannot be read ({type(exc).__name__}: {' '.join(str(exc).split())[:160]}); "
                            "move that folder away and run again (--resume then starts this run's training over)") from None  # fmt: skip
    return model_state, state


def load_train_state(folder: str | os.PathLike[str]) -> tuple[dict[str, torch.Tensor], TrainState]:
    """(model state, TrainState) of a checkpoint the trainer wrote (`load_checkpoint`'s errors, plus a missing field)."""
    model_state, state = load_checkpoint(folder)
    return model_state, TrainState.from_dict(state, folder)


# ------------------------------------------------------------------------------- background writes
class CheckpointWriter:
    """Writes checkpoints on a background thread, one at a time (see the module docstring).

    `save` snapshots on the calling thread and returns the folder the checkpoint will have; `wait` blocks until the
    write in flight is on disk and raises its error, if any (so a failed write is reported, and LATEST still names
    the previous checkpoint). `background=False` writes on the calling thread."""

    def __init__(self, out_dir: str | os.PathLike[str], keep: int = 1, background: bool = True):
        self.out_dir, self.keep, self.background = out_dir, keep, background
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def save(self, step: int, model_state: dict[str, torch.Tensor], state: TrainState | dict[str, Any]) -> Path:
        self.wait()
        snap = snapshot(step, model_state, state)
        if not self.background:
            return write_snapshot(self.out_dir, snap, self.keep)

        def write() -> None:
            try:
                write_snapshot(self.out_dir, snap, self.keep)
            except BaseException as exc:  # noqa: BLE001 - handed to the training thread by wait()
                self._error = exc

        self._thread = threading.Thread(target=write, name=f"checkpoint-{step}", daemon=True)
        self._thread.start()
        return checkpoint_folder(self.out_dir, step)

    def wait(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()
        error, self._error = self._error, None
        if error is not None:
            raise error


# ------------------------------------------------------------------------------------- when to save
class CheckpointSchedule:
    """When the trainer saves a checkpoint between steps (it also saves at the stop): every `every_seconds` of
    training (default 10 minutes; 0: no time rule) and every `every_steps` steps when asked (None or 0: no step
    rule), so a kill never loses more than the smaller of the two."""

    def __init__(
        self,
        *,
        start_step: int = 0,
        start_seconds: float = 0.0,
        every_steps: int | None = None,
        every_seconds: float = 600.0,
    ):
        self.every_steps = every_steps or 0
        self.every_seconds = every_seconds if every_seconds and every_seconds > 0 else 0.0
        self.last_step, self.last_seconds = start_step, start_seconds
        self.saved = 0  # checkpoints this schedule has called for

    def due(self, step: int, seconds: float) -> bool:
        """Whether to save now (at `step`, `seconds` of training consumed); if so, counts it as saved."""
        by_steps = self.every_steps > 0 and step - self.last_step >= self.every_steps
        by_time = self.every_seconds > 0 and seconds - self.last_seconds >= self.every_seconds
        if by_steps or by_time:
            self.last_step, self.last_seconds = step, seconds
            self.saved += 1
            return True
        return False
