"""Token ids on disk (bench.encode.token_ids): keyed by the tokenizer's fingerprint, max_len and each text's digest, so
a second model with the same tokenizer (or a re-run) reads them instead of tokenising, with the same ids and cut
flags as the tokenizer gives."""

import numpy as np
import pytest

from bench.encode.inputs import model_inputs
from bench.encode.token_ids import TokenIdCache, tokenize_parallel

TEXTS = ["a short one", "the cat sat on the mat " * 20, "another sentence about dogs", "a short one"]


def _tokenizer(reference_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(reference_dir))


def test_a_second_tokenizer_of_the_same_kind_reads_the_ids_the_first_wrote(reference_dir, tmp_path):
    first = TokenIdCache(_tokenizer(reference_dir), 16, tmp_path)
    expected = model_inputs(TEXTS, first.tokenizer, 16)
    got = first.model_inputs(TEXTS)
    assert (first.hits, first.tokenized) == (0, 4)
    second = TokenIdCache(_tokenizer(reference_dir), 16, tmp_path)  # another model's copy of the tokenizer
    again = second.model_inputs(TEXTS[::-1] + ["new text"])
    assert (second.hits, second.tokenized) == (4, 1)
    assert got.ids == expected.ids and again.ids[:4] == expected.ids[::-1]
    assert got.truncated.tolist() == [False, True, False, False] == expected.truncated.tolist()
    assert again.truncated[:4].tolist() == expected.truncated[::-1].tolist()
    assert second.path == first.path


def test_max_len_and_the_tokenizer_are_part_of_the_key(reference_dir, tmp_path):
    tok = _tokenizer(reference_dir)
    at16 = TokenIdCache(tok, 16, tmp_path)
    at16.model_inputs(TEXTS)
    at32 = TokenIdCache(tok, 32, tmp_path)
    assert max(map(len, at32.model_inputs(TEXTS).ids)) == 32 and at32.hits == 0
    lower = _tokenizer(reference_dir)
    lower.backend_tokenizer.normalizer = None  # another normalisation: another tokenizer
    other = TokenIdCache(lower, 16, tmp_path)
    other.model_inputs(TEXTS)
    assert other.hits == 0 and other.path != at16.path


def test_an_unwritable_cache_folder_only_costs_the_tokenisation(reference_dir, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    cache = TokenIdCache(_tokenizer(reference_dir), 16, blocker)
    assert cache.model_inputs(TEXTS).ids == model_inputs(TEXTS, cache.tokenizer, 16).ids
    assert not cache.on_disk


def test_the_process_pool_gives_the_tokenizers_ids(reference_dir, monkeypatch):
    import bench.encode.token_ids as token_ids

    monkeypatch.setattr(token_ids, "PROCESS_TEXTS", 4)
    monkeypatch.setattr(token_ids, "PROCESS_CHUNK", 3)
    tok = _tokenizer(reference_dir)
    texts = TEXTS * 3
    try:
        pooled = tokenize_parallel(texts, tok, 16, workers=3)
    finally:
        token_ids._POOLS.shutdown()
    expected = model_inputs(texts, tok, 16)
    assert pooled.ids == expected.ids
    np.testing.assert_array_equal(pooled.truncated, expected.truncated)


def test_token_rows_index_take_and_pad_as_the_list_of_rows_they_stand_for():
    from bench.encode.batching import pad_batch
    from bench.encode.inputs import TokenRows

    lists = [[101, 5, 6, 102], [101, 102], [101, 7, 8, 9, 10, 102], [3]]
    rows = TokenRows.from_lists(lists)
    assert len(rows) == 4 and rows.lengths.tolist() == [4, 2, 6, 1]
    assert rows[2].tolist() == lists[2] and rows[-1].tolist() == [3]
    assert rows.take([3, 0]).tolist() == [[3], [101, 5, 6, 102]]
    assert rows[::-1] == lists[::-1] and rows[1:3] == lists[1:3] and rows != lists[:3]
    assert TokenRows.concat([rows[:1], rows[1:]]) == lists
    for n_rows in (None, 6):  # the flat fast path pads as the row-by-row one does, padding rows included
        for got, want in zip(pad_batch(rows.take([2, 0, 3]), 0, width=8, n_rows=n_rows),
                             pad_batch([lists[2], lists[0], lists[3]], 0, width=8, n_rows=n_rows)):
            np.testing.assert_array_equal(got, want)
    with pytest.raises(IndexError):
        rows[4]  # noqa: B018


def test_ids_read_back_from_disk_are_the_ids_written(reference_dir, tmp_path):
    texts = [f"text number {i} " * (i % 7 + 1) for i in range(300)]
    first = TokenIdCache(_tokenizer(reference_dir), 24, tmp_path)
    written = first.model_inputs(texts[:200])
    second = TokenIdCache(_tokenizer(reference_dir), 24, tmp_path)
    mixed = second.model_inputs(texts[::-1])  # 200 read back in another order, 100 tokenised between them
    assert (second.hits, second.tokenized) == (200, 100)
    expected = model_inputs(texts[::-1], second.tokenizer, 24)
    assert mixed.ids == expected.ids and mixed.ids[100:] == written.ids[::-1]
    np.testing.assert_array_equal(mixed.truncated, expected.truncated)


def test_the_process_pool_is_kept_between_calls_and_replaced_for_another_max_len(reference_dir, monkeypatch):
    import bench.encode.token_ids as token_ids

    monkeypatch.setattr(token_ids, "PROCESS_TEXTS", 4)
    tok = _tokenizer(reference_dir)
    try:
        tokenize_parallel(TEXTS * 2, tok, 16, workers=3)
        pool = token_ids._POOLS._pool
        again = tokenize_parallel(TEXTS[::-1] * 2, tok, 16, workers=3)
        assert token_ids._POOLS._pool is pool  # the workers started once
        assert again.ids == model_inputs(TEXTS[::-1] * 2, tok, 16).ids
        at8 = tokenize_parallel(TEXTS * 2, tok, 8, workers=3)  # another truncation: another pool
        assert token_ids._POOLS._pool is not pool and max(at8.ids.lengths) == 8
    finally:
        token_ids._POOLS.shutdown()


def test_a_write_the_disk_refuses_stores_nothing_partial_and_a_later_call_stores_it(reference_dir, tmp_path,
                                                                                  monkeypatch, caplog):  # fmt: skip
    import errno

    import bench.encode.token_store as token_store

    tok = _tokenizer(reference_dir)
    first = TokenIdCache(tok, 16, tmp_path)
    first.model_inputs(TEXTS[:1])
    sizes = {p: p.stat().st_size for p in (first.path, first._store.index_path)}
    real = token_store.write_all
    calls = []

    def full_on_the_index(fd, data, offset):  # the ids go in, then the disk fills while the index records are written
        calls.append(offset)
        if len(calls) == 2:
            real(fd, data[:10], offset)
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd, data, offset)

    monkeypatch.setattr(token_store, "write_all", full_on_the_index)
    got = first.model_inputs(TEXTS)
    assert got.ids == model_inputs(TEXTS, tok, 16).ids  # the run goes on with the ids it tokenised
    assert "disk is full" in caplog.text
    assert {p: p.stat().st_size for p in sizes} == sizes  # both files cut back to where the chunk began
    first.model_inputs(["never written"])
    assert {p: p.stat().st_size for p in sizes} == sizes  # the store stopped writing for this process
    monkeypatch.setattr(token_store, "write_all", real)
    first.close()
    second = TokenIdCache(tok, 16, tmp_path)
    second.model_inputs(TEXTS)
    assert (second.hits, second.tokenized) == (2, 2)  # "a short one" twice read back; the refused texts tokenised
    third = TokenIdCache(tok, 16, tmp_path)
    assert third.model_inputs(TEXTS).ids == got.ids and (third.hits, third.tokenized) == (4, 0)


def test_a_torn_last_index_record_is_ignored_and_written_over(reference_dir, tmp_path):
    tok = _tokenizer(reference_dir)
    first = TokenIdCache(tok, 16, tmp_path)
    first.model_inputs(TEXTS[:2])
    index = first._store.index_path
    first.close()
    with open(index, "ab") as fh:  # a process killed in the middle of a record
        fh.write(b"\x07" * 11)
    second = TokenIdCache(tok, 16, tmp_path)
    assert second.model_inputs(TEXTS[2:3] + TEXTS[:2]).ids == model_inputs(TEXTS[2:3] + TEXTS[:2], tok, 16).ids
    assert (second.hits, second.tokenized) == (2, 1)
    second.close()
    third = TokenIdCache(tok, 16, tmp_path)
    assert third.model_inputs(TEXTS[:3]).ids == model_inputs(TEXTS[:3], tok, 16).ids and third.hits == 3


def test_only_files_with_lenbench_s_header_are_token_id_files(reference_dir, tmp_path):
    from bench.encode.token_ids import is_token_id_file, token_id_companions

    cache = TokenIdCache(_tokenizer(reference_dir), 16, tmp_path)
    cache.model_inputs(TEXTS)
    cache.close()
    assert is_token_id_file(cache.path) and token_id_companions(cache.path)[0].name == f"{cache.path.name}-index"
    fake = cache.path.with_name(f"ids-{'0' * 24}.tok")
    fake.write_bytes(b"\x00" * 200)
    assert not is_token_id_file(fake)
    other = TokenIdCache(_tokenizer(reference_dir), 16, tmp_path)
    other.path = fake  # a file under lenbench's name that is not lenbench's: never read; set aside whole, rebuilt
    assert other.model_inputs(TEXTS).ids == model_inputs(TEXTS, other.tokenizer, 16).ids and other.on_disk
    other.close()
    assert [p.read_bytes() for p in (tmp_path / "corrupt").glob(f"{fake.name}.*")] == [b"\x00" * 200]
    assert is_token_id_file(fake)


def test_many_chunks_read_back_in_the_order_written_and_after_the_sorted_index_is_written(reference_dir, tmp_path,
                                                                                          monkeypatch):  # fmt: skip
    import bench.encode.token_store as token_store

    monkeypatch.setattr(token_store, "SORT_AFTER", 50)
    tok = _tokenizer(reference_dir)
    texts = [f"document {i} about {'cats' if i % 3 else 'dogs'} " * (i % 5 + 1) for i in range(400)]
    first = TokenIdCache(tok, 24, tmp_path)
    for s in range(0, 400, 64):
        first.model_inputs(texts[s : s + 64])
    first.close()
    assert (tmp_path / "tokens" / f"{first.path.name}-sorted").is_file()
    second = TokenIdCache(tok, 24, tmp_path)
    expected = model_inputs(texts, tok, 24)
    for part in (texts, texts[::-1], texts[100:300:3]):
        got = second.model_inputs(part)
        assert got.ids == model_inputs(part, tok, 24).ids
    assert second.tokenized == 0 and second.model_inputs(texts).truncated.tolist() == expected.truncated.tolist()
