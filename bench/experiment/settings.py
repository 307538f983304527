"""How encoders are loaded and scored: the evaluation settings `bench run` and `bench eval` share."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from bench.encode.options import EncoderOptions


@dataclass
class EvalSettings:
    encoder: EncoderOptions = field(default_factory=EncoderOptions)  # how the model is loaded and run, carried whole
    elong: list[str] = field(default_factory=lambda: _default_elong())  # variants of @elong suites (--elong's default)
    limit: int | None = None  # N items of each dataset (bench.evaluate.subsets)
    limit_mode: str = "sample"  # which N: a seeded sample, or the first N ("first")
    limit_seed: int = 0  # the sample's seed
    seed: int = 0  # random elongation, kNN splits, diagnostics
    data_dir: str | None = None
    fetch: bool = False  # download missing datasets
    attack_params: dict[str, list[str]] = field(default_factory=dict)  # --attack FAMILY=PARAMS (elong excepted)
    options: dict[str, Any] = field(default_factory=dict)  # suite options (needle_lengths)

    def for_trained(self) -> "EvalSettings":
        """The settings a freshly trained encoder is scored with: these, except that `auto` never picks onnx for it.
        Its weights are new, so onnx would first export them (10-20 s for MiniLM on 2 cores, 86 MiB kept) to run
        about 1.06x torch's speed on STS-B's sentences and 1.12x on SciFact's documents (docs/reference/benchmarks.md):
        for one evaluation, torch is as fast. Scores do not depend on the backend (it is in no identity)."""
        if self.encoder.backend != "auto":
            return self
        from bench.encode.auto import resolve_auto

        if resolve_auto(self.encoder.device, self.encoder.precision, "auto").backend != "onnx":
            return self
        return replace(self, encoder=replace(self.encoder, backend="torch"))

    def context(self) -> Any:
        """A fresh `EvalContext` for one evaluation (it collects the files read and where datasets came from)."""
        from bench.evaluate.suites import EvalContext

        return EvalContext(data_dir=self.data_dir, seed=self.seed, elong=self.elong,
                           attack_params=self.attack_params, options=dict(self.options), limit=self.limit,
                           limit_mode=self.limit_mode, limit_seed=self.limit_seed, fetch=self.fetch, batch_size=self.encoder.batch_size)  # fmt: skip

    def load(self, model: str) -> Any:
        """The model as these settings score it: BM25 for 'bm25', else a (lazy) encoder."""
        from bench.evaluate.models import load_model

        return load_model(model, self.encoder)


def _default_elong() -> list[str]:
    from bench.evaluate.attacks.elong import parse_elong_variants

    return parse_elong_variants(None)


def attack_settings(elong: str | None, attack: list[str] | None,
                    suite_args: list[str]) -> tuple[list[str], dict[str, list[str]]]:  # fmt: skip
    """(elong parameters, other families' parameters) from `--elong` / `--attack FAMILY=PARAMS` (`--attack elong=...`
    is `--elong ...`); a bad one, or one no suite of `suite_args` attacks with, is a ConfigError."""
    from bench.evaluate.attacks import parse_attack_options, parse_elong_variants
    from bench.evaluate.attacks.elong import DEFAULT_ELONG

    params = parse_attack_options(attack)
    variants = parse_elong_variants(params.pop("elong", None) or elong)  # a bad value is named before an unused one
    given = [f"--attack {option}" for option in attack or []]
    if elong is not None and elong != DEFAULT_ELONG:
        given.insert(0, f"--elong {elong}")
    check_attacks_used(given, suite_args)
    return variants, params


def check_attacks_used(given: list[str], suite_args: list[str]) -> None:
    """Refuse attack parameters that no suite uses (`--attack pad=start-2` beside `sts:stsb`, `--elong 4` without
    `@elong`): they would change nothing, and a typo'd suffix would go unnoticed."""
    from bench.evaluate.suites.registry import attacked_families
    from bench.runtime.errors import ConfigError

    used = attacked_families(suite_args)
    for option in given:
        family = "elong" if option.startswith("--elong") else option.split(maxsplit=1)[1].partition("=")[0].strip()
        if family not in used:
            example = f"{suite_args[0].partition('@')[0]}@{family}" if suite_args else f"sts:stsb@{family}"
            raise ConfigError(f"{option} affects nothing: no suite is attacked with @{family} (suites: "
                              f"{'+'.join(suite_args) or 'none'}); add @{family} to a suite (e.g. {example}) or drop "
                              f"{option.split()[0]}")  # fmt: skip
