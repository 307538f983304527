"""What a finished row promises is on disk before it is reused: a trained run's encoder (config, weights that
open, tokenizer, model card) and any run's results.json. A reused run is never taken on its row's word alone:

- its results.json or model card missing or damaged: written again from the database (they are made from it);
- its encoder missing or damaged: refused, in one line naming what is missing and what to do (the weights exist
  nowhere else; `--rerun` trains the run again in a new row).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.runtime.errors import ConfigError

WEIGHTS = ("model.safetensors", "pytorch_model.bin")


def encoder_problem(folder: Path) -> str | None:
    """Why `folder` is not a complete saved encoder (None: it is)."""
    if not folder.is_dir():
        return f"its encoder folder {folder} is missing"
    try:
        json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        return f"its encoder folder {folder} has no readable config.json"
    weights = [folder / name for name in WEIGHTS if (folder / name).is_file()]
    weights += sorted(folder.glob("model-*.safetensors"))
    if not weights:
        return f"its encoder folder {folder} has no weights file ({' or '.join(WEIGHTS)})"
    for path in weights:
        if path.suffix == ".safetensors" and not _safetensors_open(path):
            return f"its encoder weights {path} are damaged (they do not open)"
    return None


def _safetensors_open(path: Path) -> bool:
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as fh:
            fh.keys()
        return True
    except Exception:  # noqa: BLE001 - truncated, overwritten, not safetensors: damaged either way
        return False


def results_file_ok(path: Path) -> bool:
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(document, dict) and document.get("format") == "lenbench-results"


def reusable(db: Any, row: dict[str, Any], who: str, say: Callable[..., None]) -> None:
    """Check a finished row's files before it is reused (see the module docstring): ConfigError when it cannot be."""
    from bench.report.results_file import FILE_NAME, write_results

    run_id = int(row["id"])
    if row.get("kind") == "train":
        problem = encoder_problem(Path(str(row.get("model") or "")))
        if problem is not None:
            where = f" (it was trained on {row['host']})" if row.get("host") and row["host"] != _host() else ""
            raise ConfigError(f"{who} run {run_id} finished with these settings, but {problem}{where}: it is not "
                              "reused; put the folder back, or add --rerun to train and score the run again in a new "
                              "row")  # fmt: skip
        card = Path(str(row["model"])) / "README.md"
        if not card.is_file():
            from bench.report.model_card import write_model_card
            from bench.runtime.writes import atomic_file
            from bench.train.registry import get_method

            with atomic_file(card, "the model card") as tmp:
                write_model_card(db, run_id, tmp.parent, paper=get_method(str(row["method"])).paper, name=tmp.name)
            say(f"{who} run {run_id}: its model card was missing; written again ({card})")
    if row.get("output_dir"):
        path = Path(str(row["output_dir"])) / FILE_NAME
        if not results_file_ok(path):
            state = "damaged" if path.exists() else "missing"
            write_results(db, run_id, row["output_dir"])
            say(f"{who} run {run_id}: its {FILE_NAME} was {state}; written again from the database ({path})")


def _host() -> str:
    import socket

    return socket.gethostname()
