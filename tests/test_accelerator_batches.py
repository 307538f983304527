"""Accelerator batch plans (bench.encode.batching.plan_shapes): token-budget batches over length-sorted inputs, padded
to a bounded set of (rows, width) shapes, so kernels that specialise on shapes meet few of them."""

import numpy as np
import pytest

from bench.encode.batching import bucket_rows, bucket_width, distinct_shapes, pad_batch, plan_shapes


def test_widths_round_up_to_multiples_of_8_then_16_and_never_past_max_len():
    assert [bucket_width(w) for w in (1, 8, 9, 64, 65, 80, 81, 256, 257, 300)] == [8, 8, 16, 64, 80, 80, 96, 256, 288, 320]
    assert bucket_width(250, limit=250) == 250  # a full-length batch is not padded past max_len
    assert bucket_width(241, limit=250) == 250
    assert bucket_rows(5, 64) == 8 and bucket_rows(64, 64) == 64 and bucket_rows(40, 48) == 48 and bucket_rows(1, 64) == 1


def test_the_plan_covers_every_input_once_within_the_budget_and_the_row_cap():
    rng = np.random.default_rng(0)
    lengths = rng.integers(3, 257, size=3000)
    plan = plan_shapes(lengths, max_batch=256, max_tokens=16384, limit=256)
    members = np.concatenate([b.members for b in plan])
    assert sorted(members.tolist()) == list(range(3000))
    for b in plan:
        assert len(b.members) <= b.rows <= 256
        assert int(lengths[b.members].max()) <= b.width <= 256
        assert b.rows * b.width <= 16384
    # longest first: a later batch never needs a wider shape than an earlier one
    widths = [b.width for b in plan]
    assert widths == sorted(widths, reverse=True)


def test_the_number_of_shapes_stays_bounded_however_many_texts():
    rng = np.random.default_rng(1)
    seen: set[tuple[int, int]] = set()
    for chunk in range(40):  # forty chunks of an encoder's pipeline, each planned alone
        lengths = rng.integers(3, 257, size=int(rng.integers(50, 2048)))
        seen |= distinct_shapes(plan_shapes(lengths, max_batch=1024, max_tokens=32768, limit=256))
    widths = {w for _, w in seen}
    assert len(widths) <= 8 + 12  # multiples of 8 up to 64, of 16 up to 256
    # per width: the full batch, or a power-of-two number of rows
    assert all(r in (min(1024, 32768 // w), *(1 << k for k in range(11))) for r, w in seen)
    assert len(seen) < 200  # against thousands of (rows, width) pairs with cuts at any width


def test_padding_rows_keep_one_visible_slot_and_widths_pad_to_the_bucket():
    ids, mask = pad_batch([[5, 6, 7], [8]], pad_id=0, width=8, n_rows=4)
    assert ids.shape == mask.shape == (4, 8)
    assert ids[0, :3].tolist() == [5, 6, 7] and ids[1, 0] == 8 and ids[2:].sum() == 0
    assert mask.sum(axis=1).tolist() == [3, 1, 1, 1]
    with pytest.raises(ValueError, match="n_rows"):
        pad_batch([[1], [2]], pad_id=0, n_rows=1)


def test_chunks_cover_the_texts_once_starting_short_and_growing_to_the_chunk_size():
    from bench.encode.chunks import chunk_bounds

    bounds = chunk_bounds(40_000, 256, 16_384, ramp=4)
    sizes = [b - a for a, b in bounds]
    assert bounds[0][0] == 0 and bounds[-1][1] == 40_000 and all(b == c for (_, b), (c, _) in zip(bounds, bounds[1:]))
    assert sizes[:4] == [256, 1024, 4096, 16_384] and max(sizes) == 16_384
    assert chunk_bounds(5, 256, 2048) == [(0, 5)] and chunk_bounds(0, 256, 2048) == []
    assert [b - a for a, b in chunk_bounds(5000, 256, 2048)] == [256, 2048, 2048, 648]  # no ramp: the CPU's
