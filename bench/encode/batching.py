"""Batch plans for inference: which model inputs run together in one forward pass.

An encoder pads every input of a batch to the batch's longest, and the padded slots cost as much arithmetic as real
tokens (the mask only hides them from attention and pooling). Cutting length-sorted inputs into runs of
`max_batch` (what sentence-transformers does, by character length) pads short sentences by ~7-30%. `plan_batches`
instead cuts the sorted inputs where the padding they would add costs more than one more batch: it minimises

    padded token slots + `batch_cost` x number of batches,

exactly, by dynamic programming over the length-sorted inputs (each batch is a contiguous run of that order, at
most `max_batch` inputs). Inputs of equal length fill whole batches with no padding; a leftover few join the next
shorter run only when that pads less than a batch costs. The embeddings do not change: padding is masked, so an
input's vector is the same in any batch (to float rounding).

On an accelerator the plan is `plan_shapes`: batches of at most `max_tokens` token slots (and `max_batch` rows) over
the length-sorted inputs, each padded to a width from a small set (`bucket_width`: multiples of 8 up to 64, of 16 up
to 256, of 32 up to 512, of 64 beyond) and a row count that is either the batch's full size for its width or a
power of two (the last, short batch gets rows of padding). Kernels that specialise on shapes (cuDNN attention,
torch.compile, CUDA graphs) then meet a bounded set of (rows, width) shapes however many texts and chunks a corpus
has: on the order of the number of widths, twice. Padding costs little there: a GPU runs a batch of 1,024 short
rows in about the time of one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bench.encode.inputs import TokenRows
from bench.encode.options import ACCELERATOR_ROWS, CPU_ROWS  # rows per batch when none is asked

# What one more forward pass costs, in token slots: the fixed per-call work (framework dispatch, small-matrix
# inefficiency). Measured on all-MiniLM-L6-v2 on one CPU thread: a batch's time is ~a + b x slots with a/b of
# ~20-60 slots (torch and ONNX Runtime); see benchmarks/encode.py. Larger only trades padding for fewer calls.
BATCH_COST_TOKENS = 48
# The CPU budgets above are MiniLM's (384 wide). A narrower model's activations per token are smaller, and so is its
# arithmetic per token, so the same cache-sized batch holds proportionally more tokens and a call's fixed cost is
# worth more of them: both scale by REFERENCE_WIDTH / width (a random 32-wide BERT ran 2 texts a call at 256 slots,
# and the per-call cost, not the model, was the time).
REFERENCE_WIDTH = 384
MAX_CPU_BATCH_TOKENS = 16_384


def plan_batches(lengths: Sequence[int] | np.ndarray, max_batch: int, max_tokens: int | None = None,
                 batch_cost: int = BATCH_COST_TOKENS) -> list[np.ndarray]:  # fmt: skip
    """Index arrays into `lengths`, one per batch, longest inputs first (each batch longest first); every index once.

    Minimises sum(batch size x longest in batch) + batch_cost x batches over contiguous runs of the length-sorted
    order with at most `max_batch` inputs and at most `max_tokens` token slots (inputs x longest) per batch; an input
    longer than `max_tokens` runs alone."""
    if max_batch < 1:
        raise ValueError(f"max_batch must be at least 1, got {max_batch}")
    if max_tokens is not None and max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
    lengths = np.asarray(lengths, dtype=np.int64)
    n = len(lengths)
    if n == 0:
        return []
    order = np.argsort(-lengths, kind="stable")
    cut = _cheapest_cuts(lengths[order].tolist(), max_batch, max_tokens, batch_cost)
    bounds = []
    i = n
    while i > 0:
        bounds.append((cut[i], i))
        i = cut[i]
    return [order[a:b] for a, b in reversed(bounds)]


def _cheapest_cuts(width: list[int], max_batch: int, max_tokens: int | None, batch_cost: int) -> list[int]:
    """cut[i]: where the last batch of the cheapest plan for the first i inputs starts (`width` descending).

    The dynamic programme looks only at one start per run of equal widths: the smallest one its limits allow. Within
    a run of width w, starting one input earlier moves that input out of the previous batch (which is at least w
    wide) into this one (w), so it never costs more: best[j - 1] + w <= best[j]. The cheapest start, and the first
    of equally cheap ones (the longest batch, as a scan over every start finds), is therefore among these, and the
    plan is the one every start would give, in a few steps an input instead of one numpy pass over `max_batch`
    starts (the CPU's batch planning was about a tenth of the cold evaluation's main thread). Earlier runs are
    skipped once they cannot be cheaper: starting at s' in an earlier run of width w' instead of at this run's s
    costs best[s'] + (i - s') w' >= best[s] - (s - s') w' - c + (i - s') w' (one batch [s', s) is a plan for s), at
    least (i - s)(w' - w) - c more, so none is cheaper when (i - s)(v - w) > c for the next run's width v <= w'."""
    n = len(width)
    run_start = [0] * n  # the first index of the run of equal widths that holds each index
    for j in range(1, n):
        run_start[j] = run_start[j - 1] if width[j] == width[j - 1] else j
    best = [0] * (n + 1)  # best[i]: the cheapest plan for the first i inputs
    cut = [0] * (n + 1)
    for i in range(1, n + 1):
        low = max(0, i - max_batch)  # the earliest start `max_batch` allows
        chosen, cost = i - 1, best[i - 1] + width[i - 1] + batch_cost  # one input alone: always allowed
        end = i  # the current run's candidates lie in [its start, end)
        while end > low:
            w = width[end - 1]
            first = max(run_start[end - 1], low)
            if max_tokens is not None:
                first = max(first, i - max_tokens // w)  # at most max_tokens slots: (i - j) * w <= max_tokens
            if first < end:
                c = best[first] + (i - first) * w + batch_cost
                if c <= cost:  # the earlier start among equally cheap ones (they are visited latest first)
                    chosen, cost = first, c
            if first > run_start[end - 1]:  # a limit cut this run: the earlier, wider runs are cut off too
                break
            # An earlier run (width >= v, the next one's) pads the inputs from `first` on by at least v - w more
            # than starting here, and saves at most one batch: once that exceeds a batch's cost, stop.
            if first and (i - first) * (width[first - 1] - w) > batch_cost:
                break
            end = run_start[end - 1]
        best[i], cut[i] = cost, chosen
    return cut


def padded_slots(lengths: Sequence[int] | np.ndarray, batches: Sequence[np.ndarray]) -> int:
    """Token slots a plan runs: sum over batches of (inputs x longest input)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    return int(sum(len(b) * int(lengths[b].max()) for b in batches if len(b)))


def sorted_runs(lengths: Sequence[int] | np.ndarray, max_batch: int) -> list[np.ndarray]:
    """The plain plan: length-sorted inputs cut into runs of `max_batch` (the reference for `plan_batches`)."""
    order = np.argsort(-np.asarray(lengths, dtype=np.int64), kind="stable")
    return [order[s : s + max_batch] for s in range(0, len(order), max_batch)]


def pad_batch(rows: Sequence[Sequence[int]] | Sequence[np.ndarray], pad_id: int, width: int | None = None,
              dtype: type = np.int64, n_rows: int | None = None) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """(ids, attention mask), both (n_rows, width) arrays of `dtype`: each row's ids left-aligned, then `pad_id`;
    the mask is 1 on real tokens. `width` defaults to the longest row, `n_rows` to len(rows); rows beyond len(rows)
    are padding whose mask keeps one slot (a row with no key to attend to is NaN in some attention kernels). The
    one padding function of lenbench (the encoder's batches, token-level diagnostics, the ONNX path and the training
    methods' pair batches all call it): the rows are concatenated once and scattered through a boolean mask, with no
    Python loop over the rows."""
    import itertools

    n = len(rows)
    ragged = isinstance(rows, TokenRows)  # the encoder's rows: already one flat array, no Python loop over tokens
    lengths = rows.lengths if ragged else np.fromiter(map(len, rows), dtype=np.int64, count=n)
    longest = int(lengths.max()) if n else 0
    width = longest if width is None else int(width)
    if width < longest:
        raise ValueError(f"pad_batch: width {width} is shorter than the longest row ({longest})")
    total = n if n_rows is None else int(n_rows)
    if total < n:
        raise ValueError(f"pad_batch: n_rows {total} is fewer than the rows given ({n})")
    extra = min(1, width) * (total - n)  # one pad token each padding row keeps unmasked
    if total > n:
        lengths = np.concatenate([lengths, np.full(total - n, min(1, width), dtype=np.int64)])
    if ragged:
        flat = np.concatenate([rows.flat.astype(dtype), np.full(extra, pad_id, dtype=dtype)])
    else:
        flat = np.fromiter(itertools.chain(itertools.chain.from_iterable(rows), [pad_id] * extra), dtype=dtype,
                           count=int(lengths.sum()))  # fmt: skip
    real = np.arange(width)[None, :] < lengths[:, None]
    ids = np.full((total, width), pad_id, dtype=dtype)
    ids[real] = flat  # row-major order of the mask = the rows' tokens in order
    return ids, real.astype(dtype)


# ------------------------------------------------------------------------------ shape-bounded plans (accelerators)
# Token slots per forward pass on an accelerator, by its memory: tens of thousands of slots keep a GPU's matrix units
# busy (the issue-36 ceiling on an H200: 5.3-6.0k texts/s fp32 and 21.6-28.6k bf16 from batch 64 to 1,024 at max_len
# 256), while inference activations stay a few hundred MB even for a base-size model.
ACCELERATOR_BATCH_TOKENS = ((40 << 30, 65536), (16 << 30, 32768), (0, 16384))  # (memory at least, slots)


def accelerator_batch_tokens(memory_bytes: int | None) -> int:
    """The default token budget of one forward pass on an accelerator with `memory_bytes` (None: unknown)."""
    memory = memory_bytes if memory_bytes is not None else 0
    return next(slots for least, slots in ACCELERATOR_BATCH_TOKENS if memory >= least)


def width_scale(width: int | None) -> int:
    """How many times narrower than MiniLM a model of hidden size `width` is (1 when it is not, or not known)."""
    return max(1, REFERENCE_WIDTH // int(width)) if width else 1


def device_batching(device: str, rows: int | None, tokens: int | None, cpu_tokens: int | None,
                    width: int | None = None) -> tuple[int, int | None]:  # fmt: skip
    """(rows, token slots) per batch on `device`, the ones asked where given: on the CPU 64 rows and the backend's
    cache-sized budget, both scaled up for a model narrower than MiniLM (`width`, its hidden size); on an
    accelerator up to 1,024 rows within tens of thousands of slots (by its memory)."""
    from bench.runtime.device import device_memory, is_accelerator

    if not is_accelerator(device):
        scale = width_scale(width)
        if tokens is None and cpu_tokens is not None:
            tokens = min(MAX_CPU_BATCH_TOKENS, cpu_tokens * scale)
        return rows or min(ACCELERATOR_ROWS, CPU_ROWS * scale), tokens
    return rows or ACCELERATOR_ROWS, tokens if tokens is not None else accelerator_batch_tokens(device_memory(device))


def at_own_shapes(plan: Sequence[np.ndarray], lengths: np.ndarray) -> list[ShapedBatch]:
    """A plain plan's batches, each run at its own shape (its rows, its longest input)."""
    return [ShapedBatch(m, len(m), int(lengths[m].max())) for m in plan]


def bucket_width(width: int, limit: int | None = None) -> int:
    """`width` rounded up to the next multiple of 8 (up to 64), 16 (up to 256), 32 (up to 512) or 64; never above
    `limit` (the encoder's max_len) when the width itself is not."""
    step = 8 if width <= 64 else 16 if width <= 256 else 32 if width <= 512 else 64
    rounded = -(-int(width) // step) * step
    return min(rounded, limit) if limit is not None and width <= limit else rounded


def bucket_rows(rows: int, full: int) -> int:
    """The row count a batch of `rows` inputs runs at: `full` (its width's full batch), else the next power of two
    (at most `full`)."""
    if rows >= full:
        return full
    return min(full, 1 << max(0, int(rows) - 1).bit_length())


@dataclass(frozen=True)
class ShapedBatch:
    """One batch of an accelerator plan: indices into the lengths (longest first) and the padded shape it runs at."""

    members: np.ndarray
    rows: int  # >= len(members): the extra rows are padding
    width: int  # >= the longest member


def plan_shapes(lengths: Sequence[int] | np.ndarray, max_batch: int, max_tokens: int | None = None,
                limit: int | None = None) -> list[ShapedBatch]:  # fmt: skip
    """Batches of the length-sorted inputs (longest first) with bucketed shapes (see the module docstring): each
    batch starts at the longest input left, is padded to `bucket_width` of it and takes as many inputs as
    `max_tokens` slots allow at that width (at most `max_batch`, at least one); the last batch's rows are rounded up
    to a power of two."""
    if max_batch < 1:
        raise ValueError(f"max_batch must be at least 1, got {max_batch}")
    if max_tokens is not None and max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
    lengths = np.asarray(lengths, dtype=np.int64)
    order = np.argsort(-lengths, kind="stable")
    out, i, n = [], 0, len(order)
    while i < n:
        width = bucket_width(max(1, int(lengths[order[i]])), limit)
        full = min(max_batch, max(1, max_tokens // width)) if max_tokens else max_batch
        members = order[i : i + full]
        out.append(ShapedBatch(members, bucket_rows(len(members), full), width))
        i += len(members)
    return out


def distinct_shapes(batches: Sequence[ShapedBatch]) -> set[tuple[int, int]]:
    """The (rows, width) shapes a plan runs."""
    return {(b.rows, b.width) for b in batches}
