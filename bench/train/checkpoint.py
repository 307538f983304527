"""Checkpoints in safetensors: everything `--resume` needs to continue a run exactly where it stopped.

Layout under <out>/checkpoints/:
    step-00000120/model.safetensors    encoder weights (what the saved encoder will hold)
    step-00000120/state.safetensors    every other tensor: adapter's extra modules, AdamW moments, RNG states,
                                       adapter state (momentum encoder, queue ...)
    step-00000120/state.json           the structure around those tensors + plain values (step, consumption,
                                       data position, python RNG state, config fingerprint)
    LATEST                             name of the newest complete checkpoint

`CheckpointSchedule` decides when: every N steps when asked, else every tenth of the run, and at least every 10
minutes of training (or tenth of a wall-clock budget), so a kill never loses more than that.

A checkpoint is written to a temporary folder and renamed into place, and LATEST is replaced atomically, so a
process killed while saving leaves the previous checkpoint intact. Only the newest `keep` checkpoints stay.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

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


def save_checkpoint(
    out_dir: str | os.PathLike[str], step: int, model_state: dict[str, torch.Tensor], state: TrainState | dict[str, Any],
    keep: int = 1,
) -> Path:
    if isinstance(state, TrainState):
        state = state.as_dict()
    root = checkpoint_root(out_dir)
    root.mkdir(parents=True, exist_ok=True)
    name = f"step-{step:08d}"
    tmp = root / f".{name}.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    save_file({k: v.detach().to("cpu").contiguous().clone() for k, v in model_state.items()}, str(tmp / "model.safetensors"))
    tensors: dict[str, torch.Tensor] = {}
    structure = flatten_state(state, tensors)
    save_file(tensors, str(tmp / "state.safetensors"))
    (tmp / "state.json").write_text(json.dumps(structure))
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


# ------------------------------------------------------------------------------------- when to save
class CheckpointSchedule:
    """When the trainer saves a checkpoint, so that a kill never loses more than the smallest of:

    - `every_steps` steps (an explicit --checkpoint-every; 0: no step rule), else one tenth (`fraction`) of the
      run's planned steps;
    - `every_seconds` of training (default 10 minutes);
    - one tenth of a wall-clock budget (`--budget seconds=N`).
    """

    def __init__(
        self,
        *,
        horizon: int,
        start_step: int = 0,
        start_seconds: float = 0.0,
        every_steps: int | None = None,
        every_seconds: float = 600.0,
        fraction: float = 0.1,
        budget_seconds: float | None = None,
    ):
        if every_steps is None:
            every_steps = max(1, math.ceil(fraction * horizon)) if fraction > 0 else 0
        self.every_steps = every_steps
        seconds = [s for s in (every_seconds, fraction * budget_seconds if budget_seconds else 0.0) if s and s > 0]
        self.every_seconds = min(seconds) if seconds else 0.0
        self.last_step, self.last_seconds = start_step, start_seconds

    def due(self, step: int, seconds: float) -> bool:
        """Whether to save now (at `step`, `seconds` of training consumed); if so, counts it as saved."""
        by_steps = self.every_steps > 0 and step - self.last_step >= self.every_steps
        by_time = self.every_seconds > 0 and seconds - self.last_seconds >= self.every_seconds
        if by_steps or by_time:
            self.last_step, self.last_seconds = step, seconds
            return True
        return False
