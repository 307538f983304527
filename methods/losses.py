"""Contrastive losses shared by the adapters (one loss, one function, as sentence-transformers lays them out)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def info_nce(
    anchors: torch.Tensor,
    positives: torch.Tensor,
    temperature: float = 0.05,
    extra_negatives: torch.Tensor | None = None,
) -> torch.Tensor:
    """SPEC §1: l_i = -log(exp(cos(a_i,p_i)/t) / sum_j exp(cos(a_i,p_j)/t)), mean over the batch.

    `extra_negatives` (k, d), e.g. ESimCSE's momentum queue, are appended to every row's candidates.
    """
    a = F.normalize(anchors.float(), dim=-1)
    p = F.normalize(positives.float(), dim=-1)
    logits = a @ p.T
    if extra_negatives is not None and extra_negatives.numel():
        logits = torch.cat([logits, a @ F.normalize(extra_negatives.float(), dim=-1).T], dim=1)
    labels = torch.arange(a.shape[0], device=a.device)
    return F.cross_entropy(logits / temperature, labels)
