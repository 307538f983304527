"""The attention mask a padded batch hands the model, prepared on the host's knowledge of the padding so that
transformers never has to look at the mask on the device.

transformers (5.x, `masking_utils.create_bidirectional_mask`) turns a 2D padding mask into the attention kernel's
mask inside every forward, and first asks the device whether the batch has any padding at all
(`_ignore_bidirectional_mask_sdpa`: `padding_mask.all()`, to pass no mask and let SDPA pick its flash kernel): a
device-to-host read, which on CUDA waits for every kernel queued before it, so the GPU drains and idles once per
batch while the host launches the next. The host already knows the answer (the numpy mask it padded), so:

    no padding   the model gets attention_mask=None: what transformers makes of an all-ones mask (no bias)
    padding      the model gets transformers' own 4D mask for the batch, made by the same function with the
                 all-ones skip switched off (so without the read); a 4D mask is taken as prepared and used as is

Both are exactly what the model built for itself before, so the outputs are the same to the bit
(tests/test_masks.py compares them on the CPU). Only where it is known to hold: a model whose module builds its
masks with `create_bidirectional_mask` (BERT, RoBERTa, XLM-R, MPNet... in transformers 5), an encoder (not a
decoder), SDPA or eager attention, and a transformers whose function takes `allow_is_bidirectional_skip`. Any other
model gets its 2D mask as before.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any

import numpy as np

PREPARED_IMPLEMENTATIONS = ("sdpa", "eager")
_SUPPORTED: dict[type, Any] = {}  # model class -> its module's create_bidirectional_mask, or None


def mask_builder(model: Any) -> Any:
    """transformers' `create_bidirectional_mask` when `model` builds its masks with it (see the module docstring),
    else None."""
    config = getattr(model, "config", None)
    if config is None or getattr(config, "is_decoder", False):
        return None
    if getattr(config, "_attn_implementation", None) not in PREPARED_IMPLEMENTATIONS:
        return None
    kind = type(model)
    if kind not in _SUPPORTED:
        build = getattr(sys.modules.get(kind.__module__), "create_bidirectional_mask", None)
        try:
            takes_skip = build is not None and "allow_is_bidirectional_skip" in inspect.signature(build).parameters
        except (TypeError, ValueError):
            takes_skip = False
        _SUPPORTED[kind] = build if takes_skip else None
    return _SUPPORTED[kind]


def model_mask(model: Any, mask: Any, host_mask: np.ndarray) -> Any:
    """What to pass the model as `attention_mask` for a batch whose padding mask is `mask` (a tensor on the model's
    device) and `host_mask` (the same, in numpy): None, a prepared 4D mask, or `mask` itself."""
    build = mask_builder(model)
    if build is None:
        return mask
    if host_mask.all():
        return None
    import torch

    rows, width = host_mask.shape
    dtype = next(model.parameters()).dtype
    shape_only = torch.empty((rows, width, 1), dtype=dtype, device=mask.device)  # read for its shape, dtype, device
    return build(config=model.config, inputs_embeds=shape_only, attention_mask=mask, allow_is_bidirectional_skip=False)
