"""What makes a run reproducible from its database row: config hash, code version, packages, data fingerprint."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import asdict, is_dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

TRACKED_PACKAGES = (
    "lenbench",
    "torch",
    "transformers",
    "tokenizers",
    "safetensors",
    "sentence-transformers",
    "mteb",
    "pytrec-eval-terrier",
    "bm25s",
    "numpy",
    "scipy",
    "scikit-learn",
    "pandas",
    "SQLAlchemy",
)


def canonical_json(obj: Any) -> str:
    if is_dataclass(obj) and not isinstance(obj, type):
        obj = asdict(obj)
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def config_hash(config: Any) -> str:
    return hashlib.sha256(canonical_json(config).encode()).hexdigest()[:16]


@lru_cache(maxsize=1)
def code_version() -> str:
    """git commit of the lenbench checkout (with '-dirty' when it has uncommitted changes), else the version."""
    root = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
        return commit + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        try:
            return "lenbench-" + metadata.version("lenbench")
        except metadata.PackageNotFoundError:
            return "unknown"


def module_source(obj: Any) -> dict[str, str]:
    """Where the code defining `obj` (a method's config class, say) comes from: its module, file, the sha256 of the
    file's source, and the installed distribution that ships it with its version. A plug-in method lives outside
    lenbench's checkout, so the checkout's commit (code_version) does not identify it; this does."""
    import inspect

    module = inspect.getmodule(obj)
    out = {"module": getattr(module, "__name__", "") or ""}
    path = getattr(module, "__file__", None)
    if path:
        out["file"] = str(path)
        try:
            out["sha256"] = file_sha256(path)
        except OSError:
            pass
    top = out["module"].split(".")[0]
    dists = metadata.packages_distributions().get(top, []) if top else []
    if dists:
        out["distribution"] = f"{dists[0]} {metadata.version(dists[0])}"
    return out


@lru_cache(maxsize=1)
def package_versions() -> dict[str, str]:
    versions = {"python": sys.version.split()[0]}
    for name in TRACKED_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    cuda = torch_cuda_version()
    if cuda is not None:
        versions["cuda"] = cuda
    return versions


def torch_cuda_version() -> str | None:
    """torch's CUDA version ("cpu" for a CPU build; None without torch), read from torch/version.py when torch is
    not imported yet: importing it costs seconds that a warm `bench eval` over cached texts does not need."""
    if "torch" in sys.modules:
        return sys.modules["torch"].version.cuda or "cpu"
    import ast
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        source = (Path(list(spec.submodule_search_locations)[0]) / "version.py").read_text()
        for node in ast.parse(source).body:
            target = node.target if isinstance(node, ast.AnnAssign) else (node.targets[0] if isinstance(node, ast.Assign) else None)
            if isinstance(target, ast.Name) and target.id == "cuda" and node.value is not None:
                return ast.literal_eval(node.value) or "cpu"
    except (OSError, SyntaxError, ValueError):
        pass
    import torch  # an unusual layout: ask torch itself

    return torch.version.cuda or "cpu"


_FILE_HASHES: dict[tuple[str, int, int], str] = {}


def file_sha256(path: str | os.PathLike[str]) -> str:
    """sha256 of a file's bytes, memoised on (path, size, mtime) so a suite fingerprints each file once."""
    p = Path(path)
    st = p.stat()
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _FILE_HASHES:
        h = hashlib.sha256()
        with open(p, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        _FILE_HASHES[key] = h.hexdigest()
    return _FILE_HASHES[key]


def data_fingerprint(paths: Iterable[str | os.PathLike[str]]) -> dict[str, str]:
    """{file path: sha256[:16]} for every data file a run read."""
    return {str(p): file_sha256(p)[:16] for p in sorted({str(p) for p in paths})}


def text_hash(texts: Iterable[str]) -> str:
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()[:16]
