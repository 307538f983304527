"""Which weight files a model may be loaded from. safetensors by default: a pickle file (`pytorch_model.bin`) can
run code when it is loaded, so a folder with only pickle weights is refused unless `--allow-pickle` is given, and
even then it is loaded through torch's `weights_only` unpickler (transformers' default), which refuses anything
but tensors - a malicious file becomes one error line, not code run.

Whether pickles are allowed travels with the encoder's options (`EncoderOptions.allow_pickle`: `--allow-pickle`, or
the Python API's `allow_pickle=True`) to every loader that reads weights; the processes a command starts (DDP ranks,
sweep points) get `--allow-pickle` on their command line. $LENBENCH_ALLOW_PICKLE=1 is the command line's default for
`--allow-pickle` (as $LENBENCH_DOWNLOAD is `--download`'s); nothing else reads it.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

from bench.runtime.errors import ModelLoadError

ALLOW_PICKLE_ENV = "LENBENCH_ALLOW_PICKLE"
SAFETENSORS_FILES = ("model.safetensors", "model.safetensors.index.json")
PICKLE_FILES = ("pytorch_model.bin", "pytorch_model.bin.index.json")
# What a refused or broken pickle raises inside torch.load / transformers.
PICKLE_ERRORS: tuple[type[BaseException], ...] = (pickle.UnpicklingError, EOFError, RuntimeError, AttributeError, ImportError)


def allow_pickle_default() -> bool:
    """--allow-pickle's default on the command line: $LENBENCH_ALLOW_PICKLE."""
    from bench import environment

    return environment.flag(ALLOW_PICKLE_ENV)


def load_options(name: str, source: str, allow_pickle: bool = False) -> dict[str, Any]:
    """`from_pretrained` keyword arguments for `source`: safetensors only, unless pickle weights are allowed and
    the folder has nothing else. Refuses a pickle-only folder without --allow-pickle."""
    folder = Path(source)
    if not folder.is_dir():  # a hub id: safetensors unless allowed
        return {} if allow_pickle else {"use_safetensors": True}
    if any((folder / f).is_file() for f in SAFETENSORS_FILES):
        return {"use_safetensors": True}
    if any((folder / f).is_file() for f in PICKLE_FILES):
        if not allow_pickle:
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
