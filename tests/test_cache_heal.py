"""Caches heal (issue 43): a damaged or foreign-looking file under a name lenbench gives its cache files is rebuilt
when a run meets it, or removed by `bench cache clear --damaged`; -wal/-shm files go with their database, and
those left without one are cleared; a cache folder that is a file is named as such."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

TEXTS = ["a short one", "the cat sat on the mat " * 20, "another sentence about dogs"]


@pytest.fixture
def tok(reference_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(reference_dir))


def test_companions_left_without_their_token_id_file_are_cleared(tok, tmp_path, capsys):
    """A clear during an evaluation can leave a token-id file's companions without it (format 1's
    `ids-*.sqlite-wal/-shm`, the index of the flat files): they are lenbench's (its names, and the file they belong
    to is gone), so `clear` removes them instead of keeping them as another program's."""
    from bench.cli import main
    from bench.encode.token_ids import TokenIdCache

    cache = TokenIdCache(tok, 16, tmp_path)
    cache.model_inputs(TEXTS)
    path = cache.path
    assert path is not None
    cache.close()
    path.unlink()  # its -index stays
    old = tmp_path / "tokens" / f"ids-{'7' * 24}.sqlite"  # format 1's -wal/-shm, their database gone
    for suffix in ("-wal", "-shm"):
        Path(f"{old}{suffix}").write_bytes(b"\0" * 64)
    (tmp_path / "tokens" / "notes.txt").write_text("not ours")

    assert main(["cache", "info", "--cache-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "kept 1 file(s)" in out and "tokens/notes.txt" in out, out
    assert main(["cache", "clear", "--cache-dir", str(tmp_path)]) == 0
    assert "removed 3 file(s)" in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "tokens").iterdir()) == ["notes.txt"]


def test_a_token_id_file_of_random_bytes_is_replaced_by_the_next_run(tok, tmp_path):
    from bench.encode.token_ids import TokenIdCache

    first = TokenIdCache(tok, 16, tmp_path)
    assert first.path is not None
    first.path.parent.mkdir(parents=True)
    first.path.write_bytes(os.urandom(8192))
    want = first.model_inputs(TEXTS)
    first.close()
    assert first.on_disk, "the damaged file was given up instead of rebuilt"
    again = TokenIdCache(tok, 16, tmp_path)
    assert again.model_inputs(TEXTS).ids == want.ids
    assert (again.hits, again.tokenized) == (3, 0)  # read back from the rebuilt file
    again.close()
    aside = list((tmp_path / "corrupt").iterdir())
    assert aside and all(p.name.startswith(first.path.name) for p in aside)  # kept for inspection


def test_clear_with_a_word_removes_damaged_files_under_lenbench_names_and_what_was_set_aside(tok, tmp_path, capsys):
    import sqlite3

    import numpy as np

    from bench.cli import main
    from bench.encode.token_ids import TokenIdCache

    tokens = tmp_path / "tokens"
    tokens.mkdir(parents=True)
    noise = TokenIdCache(tok, 16, tmp_path).path
    assert noise is not None
    noise.write_bytes(os.urandom(4096))  # a token-id file of random bytes
    other = sqlite3.connect(tokens / f"ids-{'0' * 24}.sqlite")  # another schema under lenbench's name
    other.execute("CREATE TABLE ids (text TEXT, owner TEXT)")
    other.commit()
    other.close()
    with open(tokens / f"{'a' * 64}.npz", "wb") as fh:  # other arrays under a training table's name
        np.savez(fh, weights=np.ones(3))
    (tokens / "notes.txt").write_text("not ours")
    (tmp_path / "results.sqlite").write_bytes(b"SQLite format 3\0" + b"\0" * 84)  # not a cache name: never removed
    (tmp_path / "corrupt").mkdir()
    (tmp_path / "corrupt" / "0123abcd0123abcd0123abcd.sqlite.20260101T000000-1").write_bytes(b"set aside")

    assert main(["cache", "clear", "--cache-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "kept 5 file(s)" in out and "`bench cache clear --damaged`" in out, out
    assert len(list(tokens.iterdir())) == 4
    assert main(["cache", "clear", "--damaged", "--cache-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "removed 4 file(s)" in out, out  # three under lenbench's names, one set aside
    assert [p.name for p in tokens.iterdir()] == ["notes.txt"]
    assert (tmp_path / "results.sqlite").is_file() and not (tmp_path / "corrupt").exists()


def test_a_truncated_training_token_table_is_rebuilt_and_clearable(tok, tmp_path, monkeypatch, capsys):
    from bench.cli import main
    from bench.data.token_cache import bodies

    monkeypatch.setenv("LENBENCH_CACHE", str(tmp_path))
    table, cached = bodies(TEXTS, tok, 8, workers=1)
    assert cached is False
    (path,) = (tmp_path / "tokens").glob("*.npz")
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])  # cut short: zipfile.BadZipFile
    rebuilt, cached = bodies(TEXTS, tok, 8, workers=1)
    assert cached is False and [rebuilt[t] for t in TEXTS] == [table[t] for t in TEXTS]
    assert bodies(TEXTS, tok, 8, workers=1)[1] is True  # the file was written whole again

    path.write_bytes(path.read_bytes()[:100])
    assert main(["cache", "clear", "--damaged"]) == 0
    assert "removed 1 file(s)" in capsys.readouterr().out
    assert not path.exists()


def test_cache_commands_name_a_cache_folder_that_is_a_file(tmp_path, monkeypatch, capsys):
    from bench.cli import main

    a_file = tmp_path / "cache.txt"
    a_file.write_text("not a folder")
    monkeypatch.setenv("LENBENCH_CACHE", str(a_file))
    for action in ("info", "clear"):
        assert main(["cache", action]) == 2
        captured = capsys.readouterr()
        assert "not created yet" not in captured.out
        assert f"{a_file} is a file, not a folder" in captured.err, captured
    assert a_file.read_text() == "not a folder"
