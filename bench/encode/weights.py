"""Which weight files a model may be loaded from. safetensors by default: a pickle file (`pytorch_model.bin`) can
run code when it is loaded, so a folder with only pickle weights is refused unless `--allow-pickle` is given, and
even then it is loaded through torch's `weights_only` unpickler (transformers' default), which refuses anything
but tensors - a malicious file becomes one error line, not code run.

`--allow-pickle` sets $LENBENCH_ALLOW_PICKLE for this process and the processes it starts (DDP ranks, sweep
points), so every loader of the run follows the same rule.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

from bench.runtime.errors import ModelLoadError

ALLOW_PICKLE_ENV = "LENBENCH_ALLOW_PICKLE"
SAFETENSORS_FILES = ("model.safetensors", "model.safetensors.index.json")
PICKLE_FILES = ("pytorch_model.bin", "pytorch_model.bin.index.json")
# What a refused or broken pickle raises inside torch.load / transformers.
PICKLE_ERRORS: tuple[type[BaseException], ...] = (pickle.UnpicklingError, EOFError, RuntimeError, AttributeError, ImportError)


def set_allow_pickle(allowed: bool) -> None:
    if allowed:
        os.environ[ALLOW_PICKLE_ENV] = "1"
    else:
        os.environ.pop(ALLOW_PICKLE_ENV, None)


def pickle_allowed() -> bool:
    from bench import environment

    return environment.flag(ALLOW_PICKLE_ENV)


def load_options(name: str, source: str) -> dict[str, Any]:
    """`from_pretrained` keyword arguments for `source`: safetensors only, unless pickle weights are allowed and
    the folder has nothing else. Refuses a pickle-only folder without --allow-pickle."""
    folder = Path(source)
    if not folder.is_dir():  # a hub id: safetensors unless allowed
        return {} if pickle_allowed() else {"use_safetensors": True}
    if any((folder / f).is_file() for f in SAFETENSORS_FILES):
        return {"use_safetensors": True}
    if any((folder / f).is_file() for f in PICKLE_FILES):
        if not pickle_allowed():
            raise ModelLoadError(
                f"cannot load model {name!r}: {folder} has only pickle weights (pytorch_model.bin), and a pickle file "
                "can run code when it is loaded; convert it to safetensors, or pass --allow-pickle if you trust it "
                "(it is then loaded with torch's weights_only unpickler)"
            )
        return {"use_safetensors": False}
    return {"use_safetensors": True}


def refused_pickle(name: str, exc: BaseException) -> ModelLoadError:
    # torch's message opens with advice to pass weights_only=False; what matters is the line naming what it refused.
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    named = [line for line in lines if "GLOBAL" in line or "WeightsUnpickler" in line or "Unsupported" in line]
    cause = (named or lines or [type(exc).__name__])[0][:200]
    return ModelLoadError(
        f"cannot load model {name!r}: its pickle weights were refused by torch's weights_only loader (they hold "
        f"more than tensors, or are broken; do not trust this file). Cause: {type(exc).__name__}: {cause}"
    )
