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


TOKEN_TEXTS = ["a short one", "the cat sat on the mat " * 20, "another sentence about dogs"]


def _token_folder_with_strangers(folder: Path) -> dict[Path, bytes]:
    """Files in tokens/ that look like lenbench's but are not (another schema under lenbench's name, an archive of
    other arrays under a training file's name), and a plain note: `clear` must leave each byte for byte."""
    import sqlite3

    import numpy as np

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "notes.txt").write_text("not ours")
    other = sqlite3.connect(folder / f"ids-{'0' * 24}.sqlite")
    other.execute("CREATE TABLE ids (text TEXT, owner TEXT)")
    other.commit()
    other.close()
    with open(folder / f"{'a' * 64}.npz", "wb") as fh:
        np.savez(fh, weights=np.ones(3))
    made = [folder / "notes.txt", folder / f"ids-{'0' * 24}.sqlite", folder / f"{'a' * 64}.npz"]
    return {p: p.read_bytes() for p in made}


def test_cache_info_lists_token_id_files_and_clear_removes_only_lenbench_ones(reference_dir, tmp_path, monkeypatch,
                                                                              capsys):  # fmt: skip
    from transformers import AutoTokenizer

    from bench.cli import main
    from bench.data.token_cache import bodies
    from bench.encode.inputs import model_inputs
    from bench.encode.token_ids import TokenIdCache

    cache_dir = tmp_path / "cache"
    monkeypatch.setenv("LENBENCH_CACHE", str(cache_dir))
    tok = AutoTokenizer.from_pretrained(str(reference_dir))
    held = TokenIdCache(tok, 16, cache_dir)  # stays open (its index beside it) through info and clear
    held.model_inputs(TOKEN_TEXTS)
    ids_file = held.path
    assert ids_file is not None and Path(f"{ids_file}-index").is_file()
    (cache_dir / "tokens" / f"ids-{'1' * 24}.tok-index").write_bytes(b"an index without its file, not ours")
    assert bodies(TOKEN_TEXTS, tok, 8, workers=1)[1] is False  # the training side's file, written now
    training = list((cache_dir / "tokens").glob("*.npz"))
    assert len(training) == 1
    strangers = _token_folder_with_strangers(cache_dir / "tokens")

    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert "1 token-id file(s)" in out and "1 training token table(s)" in out, out
    assert f"tokens/{ids_file.name}" in out and f"tokens/{training[0].name}" in out
    assert "kept 4 file(s)" in out and f"tokens/ids-{'0' * 24}.sqlite  (not a token-id file" in out

    assert main(["cache", "clear"]) == 0
    out = capsys.readouterr().out
    assert "removed 3 file(s)" in out, out  # the ids file, its index, the training file
    left = sorted(p.name for p in (cache_dir / "tokens").iterdir())
    assert left == sorted([p.name for p in strangers] + [f"ids-{'1' * 24}.tok-index"])
    assert {p: p.read_bytes() for p in strangers} == strangers
    # The process that held the file open goes on: its ids are still the tokenizer's.
    assert held.model_inputs(["new text"]).ids == model_inputs(["new text"], tok, 16).ids
    held.close()
    fresh = TokenIdCache(tok, 16, cache_dir)
    fresh.model_inputs(TOKEN_TEXTS)
    assert (fresh.hits, fresh.tokenized) == (0, 3)  # nothing was left to read back
    fresh.close()


def test_cache_clear_names_a_token_id_file_it_cannot_delete_and_clears_the_rest(reference_dir, tmp_path, monkeypatch,
                                                                               capsys):  # fmt: skip
    from transformers import AutoTokenizer

    from bench.cli import main
    from bench.encode.cache import EmbeddingCache
    from bench.encode.token_ids import TokenIdCache

    cache_dir = tmp_path / "cache"
    embeddings = EmbeddingCache(cache_dir, "model-abc|mean|64")
    embeddings.close()
    tok = AutoTokenizer.from_pretrained(str(reference_dir))
    held = TokenIdCache(tok, 16, cache_dir)
    held.model_inputs(TOKEN_TEXTS)
    ids_file = held.path
    assert ids_file is not None
    real_unlink = type(ids_file).unlink

    def refuse_open_file(path, missing_ok=False):  # what Windows does to a file another process holds open
        if path == ids_file:
            raise PermissionError(13, "The process cannot access the file because it is being used by another process")
        real_unlink(path, missing_ok=missing_ok)

    monkeypatch.setattr(type(ids_file), "unlink", refuse_open_file)
    assert main(["cache", "clear", "--cache-dir", str(cache_dir)]) == 0
    out = capsys.readouterr().out
    assert "could not remove 2 file(s)" in out, out  # the ids file with its index
    assert f"tokens/{ids_file.name}\n" in out and f"tokens/{ids_file.name}-index\n" in out
    assert not embeddings.path.exists()
    # The file and its index are left whole: once its holder closes, its ids read back.
    assert ids_file.is_file() and Path(f"{ids_file}-index").is_file()
    held.close()
    again = TokenIdCache(tok, 16, cache_dir)
    again.model_inputs(TOKEN_TEXTS)
    assert (again.hits, again.tokenized) == (3, 0)
    again.close()
