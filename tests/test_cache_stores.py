"""Caches as stores (bench.runtime.stores): `bench cache info|clear` loops over the stores in one list and knows no
file name, so a new cache is its module and one line in `bench.commands.cache.STORES`."""

from __future__ import annotations

import pytest

TOY_MODULE = '''
from pathlib import Path

from bench.runtime.stores import Cleared, Kept, Listing, StoreFile, clear_files, describe_files, plain_files

MAGIC = b"toy-cache\\n"


class ToyStore:
    title = "toy file(s)"
    kind = "toy"

    def files(self, root: Path) -> Listing:
        listing = Listing(root)
        for path in plain_files(root / "toy"):
            if path.suffix == ".toy" and path.read_bytes().startswith(MAGIC):
                listing.ours.append(StoreFile(path, "a toy"))
            else:
                listing.kept.append(Kept(path, "not a toy file", path.suffix == ".toy"))
        return listing

    def describe(self, listing: Listing) -> list[str]:
        return describe_files(self.title, listing)

    def clear(self, listing: Listing) -> Cleared:
        return clear_files(listing, [listing.root / "toy"])


STORE = ToyStore()
'''


def test_a_new_cache_is_one_module_and_one_line_in_the_list_of_stores(tmp_path, monkeypatch, capsys):
    from bench.cli import main
    from bench.commands import cache

    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "toy_store_module.py").write_text(TOY_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path / "code"))
    monkeypatch.setattr(cache, "STORES", (*cache.STORES, "toy_store_module"))  # the one line
    root = tmp_path / "cache"
    (root / "toy").mkdir(parents=True)
    (root / "toy" / "a.toy").write_bytes(b"toy-cache\n" + b"x" * 90)
    (root / "toy" / "b.toy").write_bytes(b"someone else's")
    monkeypatch.setenv("LENBENCH_CACHE", str(root))

    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert "1 toy file(s), 100 B" in out and "  toy/a.toy" in out and "a toy" in out, out
    assert "kept 1 file(s)" in out and "toy/b.toy  (not a toy file" in out, out
    assert main(["cache", "clear"]) == 0
    out = capsys.readouterr().out
    assert "removed 1 file(s), 100 B" in out, out
    assert [p.name for p in (root / "toy").iterdir()] == ["b.toy"]


def test_every_store_lists_and_clears_its_own_files_and_no_other_store_claims_them(tmp_path, monkeypatch, capsys):
    """Each cache module's files, made by the module itself, are its store's alone: counted once in `info`, and
    `clear` leaves the folder empty (sentence splits included, which `bench cache` did not know before)."""
    from bench.cli import main
    from bench.commands.cache import stores
    from bench.data.sentence_cache import prepare
    from bench.encode.cache import EmbeddingCache

    root = tmp_path / "cache"
    monkeypatch.setenv("LENBENCH_CACHE", str(root))
    EmbeddingCache(root, "model-abc|mean|64").close()
    made = prepare(["One sentence here. And a second one.", "Another text."], workers=1)
    assert made.path is not None and made.path.is_file()
    listings = [s.files(root) for s in stores()]
    owned = [f.path for listing in listings for f in listing.ours]
    assert len(owned) == len(set(owned)) == 2 and made.path in owned
    files = sum(len(f.paths) for listing in listings for f in listing.ours)  # with the embedding file's -wal/-shm
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert "1 encoder file(s)" in out and "1 sentence split file(s)" in out and f"sentences/{made.path.name}" in out
    assert main(["cache", "clear"]) == 0
    assert f"removed {files} file(s)" in capsys.readouterr().out
    assert not root.exists()


def _progress_note(root, corpus, who):  # noqa: ANN001, ANN202 - an interrupted evaluation's note, made by its module
    from bench.evaluate.corpus_progress import CorpusProgress

    note = CorpusProgress(corpus, who, root)
    note.read_up_to(corpus.stat().st_size)
    assert note.note.is_file()
    return note.note


def test_every_kind_is_listed_with_its_age_and_cleared_by_kind_and_age(tmp_path, monkeypatch, capsys):
    """`info` lists the corpus progress notes too, each file with its age; `clear --kind K --older-than AGE`
    deletes only that kind's files untouched for that long."""
    import os
    import time

    from bench.cli import main
    from bench.commands.cache import KINDS, stores
    from bench.data.sentence_cache import prepare

    assert KINDS == tuple(s.kind for s in stores())  # the --kind words are the stores' own, in their order
    root = tmp_path / "cache"
    monkeypatch.setenv("LENBENCH_CACHE", str(root))
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"_id": "d1", "text": "one"}\n')
    old, new = _progress_note(root, corpus, "model-a"), _progress_note(root, corpus, "model-b")
    split = prepare(["One sentence here. And a second one."], workers=1).path
    week_ago = time.time() - 8 * 86_400
    os.utime(old, (week_ago, week_ago))
    os.utime(split, (week_ago, week_ago))

    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert "2 corpus progress note(s)" in out and f"progress/{old.name}" in out, out
    assert "8 d ago" in out and "0 s ago" in out, out
    assert main(["cache", "clear", "--kind", "progress", "--older-than", "7d"]) == 0
    assert "removed 1 file(s)" in capsys.readouterr().out
    assert not old.exists() and new.exists() and split.exists()  # the new note, and another kind's old file, stay
    assert main(["cache", "info", "--kind", "progress"]) == 0
    out = capsys.readouterr().out
    assert "1 corpus progress note(s)" in out and "sentence split" not in out, out
    assert main(["cache", "clear", "--kind", "nosuch"]) == 2
    assert "--kind nosuch: no such cache; the kinds are embeddings, onnx" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # refused by the parser, with its usage
        main(["cache", "clear", "--older-than", "soon"])
    assert "give an age like 7d" in capsys.readouterr().err
    assert new.exists() and split.exists()


def test_onnx_exports_are_kept_under_their_bound_least_recently_used_first(tmp_path, monkeypatch):
    """Past the bound, a new export removes the exports used longest ago; the one just made and the recently
    loaded stay; a file that is no export of lenbench's is never counted or removed."""
    import os
    import time

    from bench.encode.backends.onnx_bound import bound_bytes, keep_within_bound
    from bench.encode.backends.onnx_export import META_BYTES, is_lenbench_export
    from bench.environment import EnvironmentSettingError

    folder = tmp_path / "onnx"
    folder.mkdir()
    now = time.time()
    made = {}
    for i, age_h in enumerate((30, 20, 10, 0)):  # a 1,000-byte export each, the last one just made
        path = folder / f"{i:024x}-mean-v4-plain.onnx"
        path.write_bytes(META_BYTES + bytes(1000 - len(META_BYTES)))
        os.utime(path, (now - age_h * 3600, now - age_h * 3600))
        made[age_h] = path
    stranger = folder / "notes.onnx"
    stranger.write_bytes(bytes(5000))
    removed = keep_within_bound(folder, keep=made[0], ours=is_lenbench_export, bound=2500)
    assert [p for p, _ in removed] == [made[30], made[20]]  # oldest first, until 2,000 bytes are left
    assert sorted(p.name for p in folder.iterdir()) == sorted([made[10].name, made[0].name, "notes.onnx"])
    assert keep_within_bound(folder, keep=made[0], ours=is_lenbench_export, bound=10) == [(made[10], 1000)]  # never the one just made
    assert made[0].exists()

    monkeypatch.setenv("LENBENCH_ONNX_CACHE_GIB", "0.5")
    assert bound_bytes() == 2**29
    monkeypatch.setenv("LENBENCH_ONNX_CACHE_GIB", "lots")
    with pytest.raises(EnvironmentSettingError, match="LENBENCH_ONNX_CACHE_GIB='lots'"):
        bound_bytes()
