"""Caches as stores (bench.runtime.stores): `bench cache info|clear` loops over the stores in one list and knows no
file name, so a new cache is its module and one line in `bench.commands.cache.STORES`."""

from __future__ import annotations

TOY_MODULE = '''
from pathlib import Path

from bench.runtime.stores import Cleared, Kept, Listing, StoreFile, clear_files, describe_files, plain_files

MAGIC = b"toy-cache\\n"


class ToyStore:
    title = "toy file(s)"

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
