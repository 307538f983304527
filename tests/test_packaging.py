"""Packaging and messages: SPDX licence metadata without a setuptools banner, `bench --version`, a side-effect-free
`bench methods` that cites papers, and `bench cache info|clear`."""

from __future__ import annotations

import logging
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


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


def test_version_flag_prints_the_installed_version(capsys):
    from importlib import metadata

    from bench.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.strip() == f"lenbench {metadata.version('lenbench')}"


def test_methods_listing_has_no_side_effect_warnings_and_cites_papers(tmp_path, monkeypatch, capsys, caplog):
    from bench.cli import main

    monkeypatch.setenv("LENBENCH_WORDNET", str(tmp_path / "no-wordnet"))  # a fresh path: paser would warn if checked
    assert main(["methods"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    papers = re.findall(r"^(\S+).*\n.*\n    paper: (.*)$", out, flags=re.M)
    names = {name for name, _ in papers}
    assert {"simcse", "laser3-self", "paser", "crop", "mlm", "esimcse", "cocodr-pt"} <= names
    for name, paper in papers:
        assert "shared/" not in paper and "papers/" not in paper and ".txt" not in paper, (name, paper)
        if name not in ("vanilla", "crop"):  # crop's paper is an anonymous submission under review
            assert re.search(r"\b(19|20)\d\d\b", paper), (name, paper)
    assert "synonyms_source='auto'" in out  # declared default, not resolved against this machine


def test_cache_info_shows_location_and_clear_removes_only_cache_files(tmp_path, monkeypatch, capsys):
    from bench.encode.cache import EmbeddingCache
    from bench.cli import main

    cache_dir = tmp_path / "emb"
    cache = EmbeddingCache(cache_dir, "model-abc|mean|64")
    cache.close()
    (cache_dir / "notes.txt").write_text("not ours")
    (cache_dir / "onnx").mkdir()
    (cache_dir / "onnx" / "abc0abc0-mean-v2.onnx").write_bytes(b"\x0a\x08lenbench")  # exports of --backend onnx
    (cache_dir / "onnx" / ".abc0abc0-cls-v2.onnx.123.tmp").write_bytes(b"x")  # an interrupted export
    monkeypatch.setenv("LENBENCH_CACHE", str(cache_dir))

    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert f"embedding cache: {cache_dir}\n" in out and "1 encoder file(s)" in out and "model-abc|mean|64" in out
    assert "2 ONNX export(s), 11 B" in out and "onnx/abc0abc0-mean-v2.onnx" in out

    assert main(["cache", "clear"]) == 0
    out = capsys.readouterr().out
    assert f"from {cache_dir}" in out
    assert sorted(p.name for p in cache_dir.iterdir()) == ["notes.txt"]
    assert main(["cache", "info", "--cache-dir", str(tmp_path / "nowhere")]) == 0
    out = capsys.readouterr().out
    assert "(not created yet)" in out and "0 encoder file(s)" in out
