"""Packaging and messages: SPDX licence metadata without a setuptools banner, `bench --version`, a side-effect-free
`bench methods` that cites papers, and `bench cache info|clear`."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BENCH = [sys.executable, "-m", "bench"]


def _bench(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*BENCH, *args], capture_output=True, text=True, timeout=300, cwd=cwd,
                          env={**os.environ, **(env or {})})


def test_project_metadata_has_an_spdx_licence_and_builds_without_deprecation_warnings(tmp_path):
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"
    src = tmp_path / "src"
    src.mkdir()
    (tmp_path / "meta").mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    code = ("import warnings, sys; warnings.simplefilter('always');"
            "from setuptools import build_meta; print(build_meta.prepare_metadata_for_build_wheel(sys.argv[1]))")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "meta")], cwd=src, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Deprecat" not in proc.stdout + proc.stderr
    metadata = (tmp_path / "meta" / proc.stdout.strip().splitlines()[-1] / "METADATA").read_text()
    assert "License-Expression: Apache-2.0" in metadata


def test_version_flag_prints_the_installed_version():
    from importlib import metadata

    proc = _bench("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"lenbench {metadata.version('lenbench')}"


def test_methods_listing_has_no_side_effect_warnings_and_cites_papers(tmp_path):
    proc = _bench("methods", env={"LENBENCH_WORDNET": str(tmp_path / "no-wordnet")})  # paser would warn if checked
    assert proc.returncode == 0 and proc.stderr == ""
    papers = re.findall(r"^(\S+).*\n.*\n    paper: (.*)$", proc.stdout, flags=re.M)
    names = {name for name, _ in papers}
    assert {"simcse", "laser3-self", "paser", "crop", "mlm", "esimcse", "cocodr-pt"} <= names
    for name, paper in papers:
        assert "shared/" not in paper and "papers/" not in paper and ".txt" not in paper, (name, paper)
        if name not in ("vanilla", "crop"):  # crop's paper is an anonymous submission under review
            assert re.search(r"\b(19|20)\d\d\b", paper), (name, paper)
    assert "synonyms_source='auto'" in proc.stdout  # declared default, not resolved against this machine


def test_cache_info_shows_location_and_clear_removes_only_cache_files(tmp_path):
    from bench.cache import EmbeddingCache

    cache_dir = tmp_path / "emb"
    cache = EmbeddingCache(cache_dir, "model-abc|mean|64")
    cache.close()
    (cache_dir / "notes.txt").write_text("not ours")
    env = {"LENBENCH_CACHE": str(cache_dir)}

    info = _bench("cache", "info", env=env)
    assert info.returncode == 0, info.stderr
    assert f"embedding cache: {cache_dir}\n" in info.stdout and "1 encoder file(s)" in info.stdout
    assert "model-abc|mean|64" in info.stdout

    cleared = _bench("cache", "clear", env=env)
    assert cleared.returncode == 0 and f"from {cache_dir}" in cleared.stdout
    assert sorted(p.name for p in cache_dir.iterdir()) == ["notes.txt"]
    empty = _bench("cache", "info", "--cache-dir", str(tmp_path / "nowhere"))
    assert "(not created yet)" in empty.stdout and "0 encoder file(s)" in empty.stdout
