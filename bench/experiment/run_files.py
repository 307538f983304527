"""A run's folder under --out, and what a trained run leaves in it once it succeeded (model card; checkpoints
removed unless kept)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.runtime.paths import child_folder


def run_folder(out_root: Path, method: str, seed: int, per_seed: bool) -> Path:
    """The folder of one method's run under --out: METHOD or METHOD-seedN, one path component (registered names are
    slugs; `child_folder` refuses anything that would leave out_root)."""
    return child_folder(out_root, f"{method}-seed{seed}" if per_seed else method)


def new_run_folder(out_root: Path, method: str, seed: int, per_seed: bool) -> Path:
    """The folder of a new row: `run_folder`, or METHOD-2, METHOD-3... when that one is there already (another row's:
    a re-run, or a run of other code with the same settings started in the same second), so a new row never finds
    another row's encoder and takes it for its own training."""
    folder = run_folder(out_root, method, seed, per_seed)
    n = 2
    while True:
        try:  # made here, atomically: two processes never get one folder, whoever looked first
            folder.mkdir(parents=True)
            return folder
        except FileExistsError:
            folder = child_folder(out_root, f"{run_folder(out_root, method, seed, per_seed).name}-{n}")
            n += 1


def finish_trained(db: Any, run_id: int, method: str, paper: str, encoder_dir: Path, out_dir: Path,
                   keep_checkpoints: bool, say: Callable[..., None] = print) -> None:  # fmt: skip
    """After a successful run: the encoder folder gets its model card; the training checkpoints (only --resume needs
    them, and the encoder is saved) are deleted unless --keep-checkpoints."""
    import shutil

    from bench.report.model_card import write_model_card
    from bench.runtime.writes import atomic_file

    with atomic_file(encoder_dir / "README.md", "the model card") as tmp:
        card = write_model_card(db, run_id, tmp.parent, paper=paper, name=tmp.name)
    card = encoder_dir / "README.md"
    say(f"[{method}] model card {card}")
    checkpoints = out_dir / "checkpoints"
    if checkpoints.is_dir() and not keep_checkpoints:
        size = sum(f.stat().st_size for f in checkpoints.rglob("*") if f.is_file())
        shutil.rmtree(checkpoints)
        say(f"[{method}] removed the training checkpoints ({size / 2**20:.0f} MiB; --keep-checkpoints keeps them)")
