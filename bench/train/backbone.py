"""Choosing a backbone: the checks a backbone option gets before anything runs (a model folder is usable, each
max_len fits its positions, each method can learn on it) and loading it. The names lenbench generates itself are
`bench.encode.names`.

Importing this module and checking options load no torch (`bench run --help`, option checks and `RunSpec`
stay light); `load_backbone` imports the encoder's loaders when it is called.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.encode.names import EMBEDDING_BAG_PREFIX, RANDOM_BACKBONE_PREFIX, is_generated_backbone
from bench.runtime.errors import ConfigError

if TYPE_CHECKING:
    import torch


def check_backbone_methods(backbone: str, methods: Sequence[str]) -> None:
    """Refuse, before anything runs, a method whose task the backbone cannot learn (mlm/paser on the embedding bag)."""
    folder = Path(backbone).expanduser()
    if (folder / "config.json").is_file():  # a model folder: usable (tokenizer, config = weights) before any row
        from bench.encode.model_check import check_model_folder

        check_model_folder(backbone, folder)
    if not (backbone == EMBEDDING_BAG_PREFIX or backbone.startswith(EMBEDDING_BAG_PREFIX + "-")):
        return
    from bench.encode.embedding_bag import parse_backbone
    from bench.train.registry import get_method

    try:
        parse_backbone(backbone)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    bad = [m for m in methods if get_method(m).needs_context]
    if bad:
        raise ConfigError(
            f"method(s) {', '.join(bad)} predict masked tokens from their context, and the embedding bag ({backbone}) has "
            "no context (each token is its own vector): use a contrastive method (crop, simcse, laser3-self, ...) or "
            "a transformer backbone (random-bert-mini)"
        )


def check_backbone_lengths(backbone: str, lengths: dict[str, int]) -> None:
    """Each max_len option (--max-len, --eval-max-len) within the backbone's positions, refused before any row
    rather than failing mid-run when an elongated text reaches it."""
    from bench.encode.loading import REFERENCE_ALIASES, reference_model_dir
    from bench.encode.model_check import check_max_len, read_config

    folder = Path(backbone).expanduser()
    if not (folder / "config.json").is_file() and backbone.lower() in REFERENCE_ALIASES:
        folder = reference_model_dir() or folder
    if (folder / "config.json").is_file():
        config = read_config(backbone, folder)
    elif backbone.startswith(RANDOM_BACKBONE_PREFIX):
        config = {"max_position_embeddings": 512, "model_type": "bert"}  # bench.encode.backbones.make_random_bert's
    else:
        return  # a hub id (checked once loaded) or the embedding bag (no positions)
    for option, value in lengths.items():
        check_max_len(backbone, config, value, option)


def load_backbone(name: str, cache_dir: str | Path | None = None, allow_pickle: bool = False,
                  ) -> tuple["torch.nn.Module", Any, str]:  # fmt: skip
    """(model, tokenizer, resolved source). Names: a folder, 'minilm' (packaged all-MiniLM-L6-v2), a hub id,
    'random-bert-tiny|mini|small' (random BERT on the packaged vocab) or 'embedding-bag[-DIM]' (a random token-
    embedding table on that vocab, no transformer; DIM 256 by default); generated ones are written once under
    cache_dir, seed 0. `allow_pickle`: a folder with pickle weights only loads too (--allow-pickle)."""
    from bench.encode.loading import load_transformer

    source = None
    if is_generated_backbone(name):
        from bench.encode.backbones import make_embedding_bag, make_random_bert
        from bench.encode.embedding_bag import parse_backbone

        root = Path(cache_dir or Path.home() / ".cache" / "lenbench" / "backbones")
        try:
            dim = parse_backbone(name)
            if dim is not None:
                source = str(make_embedding_bag(root / f"{EMBEDDING_BAG_PREFIX}-{dim}", dim=dim, seed=0))
            else:
                source = str(make_random_bert(root / name, size=name[len(RANDOM_BACKBONE_PREFIX) :], seed=0))
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    return load_transformer(name, source, allow_pickle)
