"""Which datasets a resumed evaluation must score again: those whose files changed since its earlier attempt read
them. A resumed row keeps the scores of the datasets it finished; a score is kept only while the files it was
computed from are still the files on disk (the row's data fingerprint names them, path -> sha256 prefix).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def dataset_paths(suite: Any, dataset: str, ctx: Any) -> list[Path]:
    """Where the dataset's data is (a file, or a BEIR folder); [] for a suite that finds its own data (mteb)."""
    from bench.data import find
    from bench.data.catalog import CQADUPSTACK_FORUMS
    from bench.data.errors import DatasetMissingError

    kind = getattr(suite, "data_kind", None)
    if kind is None:
        return []
    names = [f"cqadupstack-{f}" for f in CQADUPSTACK_FORUMS] if dataset == "cqadupstack" else [dataset]
    paths = []
    for name in names:
        try:
            paths.append(Path(find(name, ctx.data_dir, kind=kind).path))
        except DatasetMissingError:
            continue
    return paths


def changed_files(paths: list[Path], earlier: dict[str, str]) -> list[str]:
    """The files of `earlier` (a run's data fingerprint) under `paths` whose content is not what it was (or that
    are gone), sorted."""
    from bench.runtime.provenance import file_sha256

    out = []
    for name, digest in earlier.items():
        f = Path(name)
        if not any(f == p or p in f.parents for p in paths):
            continue
        try:
            now = file_sha256(f)[: len(str(digest))]
        except OSError:
            now = None
        if now != digest:
            out.append(name)
    return sorted(out)
