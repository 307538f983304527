"""`EvalSpec`: one `bench eval` as data: the model, its suites and the evaluation settings, and from them (with what
the loaded model says of itself) the run's config and config hash.

`EvalOptions` is `bench eval`'s options as a dataclass (the parser of bench/commands/eval.py takes its defaults
from it): the command builds its EvalSpec from the parsed arguments, the Python API (`lenbench.evaluate`) from
`EvalOptions.from_options`, Python values typed and checked as the parser would; both go through `EvalSpec.from_args`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bench.encode.opaque import DECLARED
from bench.encode.options import EncoderOptions
from bench.experiment.identity import scoring_identity
from bench.experiment.command_options import declared_fields, nested_default, spec_kwargs, spec_values, typed_options
from bench.experiment.options import options_of
from bench.experiment.settings import EvalSettings, attack_settings


@declared_fields("eval")
class EvalOptions:
    """Every option of `bench eval`, with the declared defaults: the evaluation's own, one field each, made from the
    declarations (`declared_fields`: the model, suites, limit, seed...), and how the model is loaded and run
    (`encoder`, an EncoderOptions carried whole to the encoder)."""

    encoder: EncoderOptions = field(default_factory=lambda: nested_default("eval", "encoder", EncoderOptions))
    suite_options: dict[str, Any] = field(default_factory=dict)  # options the suites read (needle_lengths), as given

    @classmethod
    def from_args(cls, args: Any) -> "EvalOptions":
        """From `bench eval`'s parsed arguments (an argparse Namespace)."""
        return cls(**spec_kwargs(cls, "eval", {n: getattr(args, n) for n in options_of("eval") if hasattr(args, n)}))

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> "EvalOptions":
        """From option name -> Python value, typed and checked as `bench eval`'s parser would (a ValueError names
        the keyword; bench.experiment.command_options)."""
        return cls(**spec_kwargs(cls, "eval", typed_options("eval", options)))

    def option_values(self) -> dict[str, Any]:
        """Option name -> value, every `bench eval` option (bench.experiment.command_options.spec_values)."""
        return spec_values(self, "eval")


@dataclass
class EvalSpec:
    model: str  # folder, hub id, 'minilm', 'bm25', or the name of a model object (file.py:NAME, the API's name=)
    suite_args: list[str]
    settings: EvalSettings = field(default_factory=EvalSettings)
    rerun: bool = False  # score again in a new row even when a finished row of this evaluation exists
    source: Any = None  # the model as an object (bench.encode.objects.ModelObject); `model` is then its name
    reuse_declared: bool = False  # a model of declared identity reuses a finished row of its name (else: a new row)

    @classmethod
    def from_args(cls, args: Any) -> "EvalSpec":
        """From `bench eval`'s parsed arguments (an argparse Namespace)."""
        return cls.from_options(EvalOptions.from_args(args))

    @classmethod
    def from_options(cls, args: EvalOptions) -> "EvalSpec":
        """From `bench eval`'s options (parsed, or a Python caller's: EvalOptions.from_options); suite strings split
        and elongation variants checked here."""
        from bench.evaluate.suites.registry import split_suite_args

        suite_args = split_suite_args(args.suite)
        elong, attack_params = attack_settings(args.elong, getattr(args, "attack", None), suite_args)
        if args.suite_options.get("needle_lengths"):
            from bench.evaluate.suites.needle import parse_lengths

            parse_lengths(args.suite_options["needle_lengths"])  # a bad list: one clear error before anything is recorded
        settings = EvalSettings(
            encoder=args.encoder, elong=elong, limit=args.limit, seed=args.seed,
            data_dir=args.data_dir, fetch=args.download, attack_params=attack_params,
            options={k: v for k, v in args.suite_options.items() if v},
        )
        from bench.encode.objects import model_from_file

        source = model_from_file(args.model)  # --model path/to/file.py:NAME: the object it names, loaded now
        return cls(args.model if source is None else source.origin, suite_args, settings, rerun=args.rerun,
                   source=source, reuse_declared=args.reuse_declared)  # fmt: skip

    def load(self, cache_dir: Any = None) -> tuple["EvalSpec", Any]:
        """(this spec with `model` the name the model is recorded by, the model as these settings score it): a
        model object's encoder (bench.encode.objects), else BM25 or an encoder of the folder or hub id (`cache_dir`:
        its embedding cache, default the usual one)."""
        from dataclasses import replace

        if self.source is None:
            from bench.evaluate.models import load_model

            return self, load_model(self.model, self.settings.encoder, cache_dir=cache_dir)
        from bench.encode.objects import object_encoder

        encoder = object_encoder(self.source, self.settings.encoder, cache_dir=cache_dir)
        return replace(self, model=encoder.name), encoder

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
            # the pooling and precision the model ran at (auto resolved by the encoder; BM25 has none: fp32)
            **scoring_identity(s, describe.get("pooling"), describe.get("precision", "fp32")),
            "seed": s.seed,
            "model_fingerprint": describe.get("fingerprint"),
            # a model known by the name its caller declared, not by its weights: its rows say so (bench.encode.objects)
            **({"identity": describe["identity"]} if describe.get("identity") == DECLARED else {}),
            **({"bm25": describe["bm25"]} if "bm25" in describe else {}),  # BM25's settings (stemmer, k1, b...)
        }
        if s.encoder.emb_dtype != "fp32":  # fp16 matrices can move scores in the last digits: part of what was run
            config["emb_dtype"] = s.encoder.emb_dtype
        return config

    def config_hash(self, describe: dict[str, Any]) -> str:
        from bench.runtime.provenance import config_hash

        return config_hash(self.config(describe))
