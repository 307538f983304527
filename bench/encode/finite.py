"""The reduced-precision guard: a text whose vector came out of the model not finite runs again at fp32.

fp16 keeps 11 bits of mantissa (the scores of fp32 to 0.1, where bf16's 8 bits moved SciFact by 0.19) but only
values up to 65,504: an activation past that becomes inf, and the pooled vector inf or nan. Such a vector would rank
nothing and poison a mean, so the encoder hands each chunk's vectors here before normalising them; the texts whose
vector is not finite are padded again as a batch of their own and run through the backend at fp32
(`Backend.pooled_fp32`), and their vectors replaced. Checked on the host, once per chunk, where the vectors arrive
anyway: no extra device sync per batch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.encode.batching import pad_batch
from bench.encode.inputs import TokenRows

RERUN_ROWS = 64  # texts per fp32 batch (a rerun is rare; small batches keep its memory small)


def rerun_non_finite(vectors: np.ndarray, inputs: TokenRows, pad_id: int, engine: Any) -> int:
    """Replace, in place, each row of `vectors` (pooled, one per row of `inputs`) that is not finite by the fp32
    vector of its text; returns how many rows ran again."""
    bad = np.flatnonzero(~np.isfinite(vectors).all(axis=1))
    for start in range(0, len(bad), RERUN_ROWS):
        rows = bad[start : start + RERUN_ROWS]
        input_ids, mask = pad_batch(inputs.take(rows), pad_id)
        vectors[rows] = engine.to_host([engine.pooled_fp32({"input_ids": input_ids, "attention_mask": mask})])
    return len(bad)
