"""Contrastive losses shared by the adapters (one loss, one function, as sentence-transformers lays them out)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from bench.runtime import distributed


def info_nce(
    anchors: torch.Tensor,
    positives: torch.Tensor,
    temperature: float = 0.05,
    extra_negatives: torch.Tensor | None = None,
) -> torch.Tensor:
    """SPEC §1: l_i = -log(exp(cos(a_i,p_i)/t) / sum_j exp(cos(a_i,p_j)/t)), mean over the batch.

    `extra_negatives` (k, d), e.g. ESimCSE's momentum queue, are appended to every row's candidates; under
    several processes they must be the same on every rank (the whole queue).

    Several processes (bench.runtime.distributed): this rank's anchors are scored against the positives of *every*
    rank (gathered with gradient), so the in-batch negatives are the global batch, and the value returned is
    this rank's sum of l_i times world_size / global batch size: its mean over ranks is the global mean and,
    with gradients averaged over ranks, the update equals the one-device update on the whole batch.
    """
    a = F.normalize(anchors.float(), dim=-1)
    p = F.normalize(positives.float(), dim=-1)
    p_all, offset = distributed.all_gather_with_grad(p)
    logits = a @ p_all.T
    if extra_negatives is not None and extra_negatives.numel():
        logits = torch.cat([logits, a @ F.normalize(extra_negatives.float(), dim=-1).T], dim=1)
    labels = torch.arange(offset, offset + a.shape[0], device=a.device)
    if p_all is p:  # one process
        return F.cross_entropy(logits / temperature, labels)
    local_sum = F.cross_entropy(logits / temperature, labels, reduction="sum")
    return local_sum * (distributed.world_size() / p_all.shape[0])


def token_mean(per_token_sum: torch.Tensor, n_tokens: torch.Tensor | int) -> torch.Tensor:
    """A loss averaged over tokens (MLM, phrase reconstruction) so that several processes equal one device.

    One process: sum / count. Several: sum * world_size / (count summed over ranks), whose mean over ranks is
    the global per-token mean (each rank's shard holds a different number of masked tokens).
    """
    count = torch.as_tensor(n_tokens, dtype=torch.float64, device=per_token_sum.device)
    if not distributed.active():
        return per_token_sum / count.clamp(min=1).to(per_token_sum.dtype)
    total = distributed.sum_over_ranks(count).clamp(min=1)
    return per_token_sum * (distributed.world_size() / total).to(per_token_sum.dtype)
