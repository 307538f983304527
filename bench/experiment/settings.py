"""How encoders are loaded and scored: the evaluation settings `bench run` and `bench eval` share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class EvalSettings:
    max_len: int = 256  # tokens an encoder reads of each text, special tokens included
    pooling: str | None = None  # None: the model folder's own, else mean
    batch_size: int = 64
    elong: list[str] = field(default_factory=lambda: _default_elong())  # variants of @elong suites (--elong's default)
    limit: int | None = None  # first N items of each dataset
    seed: int = 0  # random elongation, kNN splits, diagnostics
    data_dir: str | None = None
    fetch: bool = False  # download missing datasets
    device: str | None = None
    use_cache: bool = True
    backend: str = "auto"
    emb_dtype: str = "fp32"
    precision: str = "auto"  # fp32, bf16 or auto (bench.runtime.device)
    attack_params: dict[str, list[str]] = field(default_factory=dict)  # --attack FAMILY=PARAMS (elong excepted)
    options: dict[str, Any] = field(default_factory=dict)  # suite options (needle_lengths)

    def context(self) -> Any:
        """A fresh `EvalContext` for one evaluation (it collects the files read and where datasets came from)."""
        from bench.evaluate.suites import EvalContext

        return EvalContext(data_dir=self.data_dir, seed=self.seed, elong=self.elong,
                           attack_params=self.attack_params, options=dict(self.options), limit=self.limit,
                           fetch=self.fetch, batch_size=self.batch_size)  # fmt: skip

    def load(self, model: str) -> Any:
        """The model as these settings score it: BM25 for 'bm25', else a (lazy) encoder."""
        from bench.evaluate.models import load_model

        return load_model(model, pooling=self.pooling, max_len=self.max_len, batch_size=self.batch_size,
                          device=self.device, use_cache=self.use_cache, backend=self.backend,
                          emb_dtype=self.emb_dtype, precision=self.precision)  # fmt: skip


def _default_elong() -> list[str]:
    from bench.evaluate.attacks.elong import parse_elong_variants

    return parse_elong_variants(None)


def attack_settings(elong: str, attack: list[str] | None) -> tuple[list[str], dict[str, list[str]]]:
    """(elong parameters, other families' parameters) from `--elong` / `--attack FAMILY=PARAMS` (`--attack elong=...`
    is `--elong ...`); a bad one is a ConfigError."""
    from bench.evaluate.attacks import parse_attack_options, parse_elong_variants

    params = parse_attack_options(attack)
    return parse_elong_variants(params.pop("elong", None) or elong), params
