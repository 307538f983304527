"""Backbone names lenbench generates itself (no download, no folder given): read without importing torch, so a
command can tell a hub id from them before anything heavy loads."""

from __future__ import annotations

RANDOM_BACKBONE_PREFIX = "random-bert-"
EMBEDDING_BAG_PREFIX = "embedding-bag"


def is_generated_backbone(name: str) -> bool:
    """Backbones lenbench writes itself (seed 0, once under a cache folder): random-bert-SIZE, embedding-bag[-DIM]."""
    return name.startswith(RANDOM_BACKBONE_PREFIX) or name == EMBEDDING_BAG_PREFIX or name.startswith(EMBEDDING_BAG_PREFIX + "-")
