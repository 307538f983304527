"""`EvalSpec`: one `bench eval` as data: the model, its suites and the evaluation settings, and from them (with what
the loaded model says of itself) the run's config and config hash."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bench.experiment.settings import EvalSettings, attack_settings


@dataclass
class EvalSpec:
    model: str  # folder, hub id, 'minilm' or 'bm25'
    suite_args: list[str]
    settings: EvalSettings = field(default_factory=EvalSettings)
    rerun: bool = False  # score again in a new row even when a finished row of this evaluation exists

    @classmethod
    def from_args(cls, args: Any) -> "EvalSpec":
        """From `bench eval`'s parsed arguments; suite strings split and elongation variants checked here."""
        from bench.evaluate.suites.registry import split_suite_args

        suite_args = split_suite_args(args.suite)
        elong, attack_params = attack_settings(args.elong, getattr(args, "attack", None), suite_args)
        needle_lengths = getattr(args, "needle_lengths", None)
        if needle_lengths:
            from bench.evaluate.suites.needle import parse_lengths

            parse_lengths(needle_lengths)  # a bad list: one clear error before anything is recorded
        settings = EvalSettings(
            max_len=args.max_len, pooling=args.pooling, batch_size=args.batch_size, elong=elong, limit=args.limit,
            seed=args.seed, data_dir=args.data_dir, fetch=args.download, device=args.device, use_cache=not args.no_cache,
            backend=args.backend, emb_dtype=args.emb_dtype, precision=getattr(args, "precision", "auto"),
            attack_params=attack_params,
            options={"needle_lengths": needle_lengths} if needle_lengths else {},
        )
        return cls(args.model, suite_args, settings, rerun=bool(getattr(args, "rerun", False)))

    @property
    def method(self) -> str:
        """The Run.method of an evaluation: the untrained model ('vanilla'), or 'bm25'."""
        return "bm25" if self.model.lower() == "bm25" else "vanilla"

    @property
    def label(self) -> str:
        """The row's label in bench eval's table, bench results and the leaderboard: the model's name or folder."""
        from bench.report.pooling import evaluated_label

        return evaluated_label(self.method, self.model)

    def config(self, describe: dict[str, Any]) -> dict[str, Any]:
        """Run.config, given the loaded model's `describe()` (its pooling, weights fingerprint, BM25 settings)."""
        s = self.settings
        config = {
            "model": self.model,
            "suite": self.suite_args,
            "pooling": describe.get("pooling"),
            "max_len": s.max_len,
            "batch_size": s.batch_size,
            "elong": s.elong,
            **({"attacks": s.attack_params} if s.attack_params else {}),  # only when asked: older configs hash as they did
            **({"needle_lengths": s.options["needle_lengths"]} if s.options.get("needle_lengths") else {}),
            "limit": s.limit,
            "seed": s.seed,
            "model_fingerprint": describe.get("fingerprint"),
            **({"bm25": describe["bm25"]} if "bm25" in describe else {}),  # BM25's settings (stemmer, k1, b...)
        }
        if s.emb_dtype != "fp32":  # fp16 matrices can move scores in the last digits: part of what was run
            config["emb_dtype"] = s.emb_dtype
        if describe.get("precision", "fp32") != "fp32":  # the precision the model ran at (auto resolved); fp32 as before
            config["precision"] = describe["precision"]
        return config

    def config_hash(self, describe: dict[str, Any]) -> str:
        from bench.runtime.provenance import config_hash

        return config_hash(self.config(describe))
