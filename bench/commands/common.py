"""Options several subcommands share."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from results_db.location import default_db_url

if TYPE_CHECKING:  # the database layer (SQLAlchemy, pandas) loads only in the commands that open one
    from results_db import ResultsDB


def registry_names(text: str) -> str:
    """`{suites}` and `{attacks}` in a help text, filled from the suite and attack registries (a plug-in's appear)."""
    if "{suites}" in text:
        from bench.evaluate.suites.metadata import suite_usages

        text = text.replace("{suites}", ", ".join(suite_usages()))
    if "{attacks}" in text:
        from bench.evaluate.attacks.registry import families

        text = text.replace("{attacks}", ", ".join(f"@{f.name}" for f in families() if f.selectable))
    return text


class RegistryHelp(argparse.HelpFormatter):
    """Fills `{suites}` / `{attacks}` (`registry_names`) in a parser's description and its options' help when the
    help is shown, so building the parser (every command, `bench --help`, an argument error) reads no registry."""

    def _format_text(self, text: str) -> str:
        return super()._format_text(registry_names(text))

    def _expand_help(self, action: argparse.Action) -> str:
        return registry_names(super()._expand_help(action))


class RawRegistryHelp(RegistryHelp, argparse.RawDescriptionHelpFormatter):
    """`RegistryHelp` for a description written with its own line breaks."""


def launch_settings(args: argparse.Namespace) -> tuple[str, str]:
    """For a command that starts runs in other processes (`bench sweep`, `bench claim`): checks --jobs and --retries
    and gives (--db as given, else the default; the database those processes open: a file path made absolute,
    since they may run in another folder)."""
    from bench.runtime.errors import ConfigError

    if args.jobs < 1 or args.retries < 0:
        raise ConfigError("--jobs must be >= 1 and --retries >= 0")
    db_arg = args.db or default_db_url()
    return db_arg, db_arg if "://" in db_arg else str(Path(db_arg).expanduser().resolve())


def add_db(p: argparse.ArgumentParser, writes: bool = False) -> None:
    p.add_argument(
        "--db",
        default=None,
        help=f"results database: a file path or an SQLAlchemy URL (default $LENBENCH_DB or {default_db_url()})",
    )
    if writes:
        p.add_argument(
            "--db-init-foreign",
            action="store_true",
            help="add lenbench's tables to a database that already holds another application's tables (refused otherwise)",
        )


def add_data_dir(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", default=None, help="folder with sts/, beir/, knn/ (default $LENBENCH_DATA, ./data, ../shared/data)")
    from bench.data.download import download_default

    p.add_argument("--download", action="store_true", default=download_default(),
                   help="download missing BEIR datasets (and --corpus wiki1m/msmarco) from their source, md5-checked "
                   "(needs network; default on when LENBENCH_DOWNLOAD=1)")  # fmt: skip


def add_encoder_options(p: argparse.ArgumentParser) -> None:
    """The encoder's options (bench.encode.options.EncoderOptions), with its defaults."""
    from bench.encode.options import ACCELERATOR_ROWS, BACKENDS, CPU_ROWS, EMB_DTYPES, ENCODER_DEFAULTS as E, POOLINGS

    p.add_argument("--pooling", choices=POOLINGS, default=E.pooling, help="default: the model folder's, else mean")
    p.add_argument("--max-len", type=int, default=E.max_len,
                   help=f"max tokens per text, special tokens included (default {E.max_len})")  # fmt: skip
    p.add_argument("--batch-size", type=int, default=E.batch_size,
                   help=f"texts per encoding batch; default: the device's ({CPU_ROWS} on the CPU, up to {ACCELERATOR_ROWS:,} "
                   "within --batch-tokens on a GPU)")  # fmt: skip
    p.add_argument("--batch-tokens", type=int, default=E.batch_tokens,
                   help="token slots (texts x longest) per encoding batch; default: the device's (on the CPU 2048 torch / "
                   "256 onnx; on a GPU 16,384-65,536 by its memory, over length-sorted texts; --batch-size still caps the texts)")  # fmt: skip
    p.add_argument("--device", default=E.device, help="cpu, cuda, cuda:1 ... (default: cuda if available)")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the embedding cache")
    p.add_argument("--backend", choices=BACKENDS, default=E.backend,
                   help="inference backend: onnx (ONNX Runtime, CPU; exported once per model), torch, or flash (flash-attn's "
                   "varlen attention on unpadded tokens; CUDA, bf16/fp16); auto = flash on CUDA when flash-attn is "
                   f"installed, onnx on CPU when onnxruntime is, else torch (default {E.backend})")  # fmt: skip
    p.add_argument("--emb-dtype", choices=EMB_DTYPES, default=E.emb_dtype,
                   help=f"embedding matrix precision; fp16 halves the memory of large corpora (default {E.emb_dtype})")  # fmt: skip
    add_precision(p)
    add_allow_pickle(p)


def add_precision(p: argparse.ArgumentParser) -> None:
    from bench.encode.options import ENCODER_DEFAULTS
    from bench.runtime.device import PRECISIONS

    p.add_argument("--precision", choices=PRECISIONS, default=ENCODER_DEFAULTS.precision,
                   help="model precision: fp32, bf16 or fp16 (evaluation casts the weights; training runs bf16 autocast and refuses fp16), or auto = the fastest that keeps the fp32 scores: bf16 on CUDA, fp32 on the CPU (bench.runtime.device); "
                   f"recorded in the run and in the embedding cache key (default {ENCODER_DEFAULTS.precision})")  # fmt: skip


def add_allow_pickle(p: argparse.ArgumentParser) -> None:
    from bench.encode.weights import allow_pickle_default

    p.add_argument(
        "--allow-pickle",
        action="store_true",
        default=allow_pickle_default(),
        help="also load models whose only weights are pickle files (pytorch_model.bin), with torch's weights_only "
        "loader; by default only safetensors are loaded (a pickle can run code); default on when "
        "LENBENCH_ALLOW_PICKLE=1",
    )


def add_limit(p: argparse.ArgumentParser) -> None:
    from bench.experiment.run_spec import positive_int

    p.add_argument("--limit", type=positive_int, default=None,
                   help="only the first N items of each dataset (quick checks; flagged as DATASET[N] in every table "
                        "and recorded in each score's info)")  # fmt: skip


def add_attack_options(p: argparse.ArgumentParser) -> None:
    """Which variants the attacked suites (`SUITE@FAMILY[,FAMILY]`) run: `--attack FAMILY=PARAMS` for any family
    (bench.evaluate.attacks.registry), `--elong PARAMS` kept as the elong family's own spelling. One definition and
    one default (`bench.evaluate.attacks.elong.DEFAULT_ELONG`) for every command that takes them."""
    from bench.evaluate.attacks.elong import DEFAULT_ELONG

    p.add_argument("--elong", default=DEFAULT_ELONG,
                   help=f"elongation variants of @elong suites (default {DEFAULT_ELONG}; 2,4,8,rand is the full set, "
                   "about twice the evaluation time)")  # fmt: skip
    p.add_argument("--attack", action="append", default=None, metavar="FAMILY=PARAM[,PARAM]",
                   help="variants of an attack family for SUITE@FAMILY suites, repeatable: e.g. --attack pad=start-2,end-2 "
                   "(default each family's set: pad = start, middle, end x m 2, 4; shuffle = one variant); "
                   "--attack elong=2,rand is --elong 2,rand")  # fmt: skip


def add_eval_options(p: argparse.ArgumentParser) -> None:
    add_attack_options(p)
    p.add_argument("--needle-lengths", default=None, metavar="N,N,...",
                   help="context lengths (tokens) of the needle suite (default 64,128,256,512,1024)")  # fmt: skip
    add_limit(p)
    p.add_argument("--seed", type=int, default=0, help="seed of random elongation, kNN splits, diagnostics (default 0)")


def add_nproc(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--nproc", type=int, default=None, metavar="N",
        help="run on N local processes: re-launches this command under torchrun (torch.distributed.run); "
        "for several nodes call `torchrun ... -m bench` yourself (README: Scaling out)",
    )


def start_processes(args: Any) -> int | None:
    """`--nproc N` outside torchrun: re-launch under torchrun and return its exit code. Inside torchrun: join
    the process group (None: go on in this process)."""
    from bench.runtime import distributed, launch
    from bench.runtime.errors import ConfigError

    nproc = getattr(args, "nproc", None)
    if nproc is not None and nproc < 1:
        raise ConfigError(f"--nproc must be at least 1, got {nproc}")
    if nproc and nproc > 1 and distributed.env_world_size() == 1 and "LOCAL_RANK" not in os.environ:
        argv = launch.strip_option(getattr(args, "argv", None) or sys.argv[1:], "--nproc")
        return launch.relaunch(hide_db_password(argv, getattr(args, "db", None)), nproc)
    distributed.init_from_env(getattr(args, "device", None))
    if getattr(args, "device", None) and str(args.device).startswith("cuda") and distributed.active():
        args.device = distributed.local_device(args.device)
    return None


def hide_db_password(argv: list[str], db: str | None) -> list[str]:
    """argv for a child process: a --db URL holding a password leaves the command line (every user's process list
    shows it) and reaches the child in $LENBENCH_DB, which --db defaults to."""
    from bench.runtime import launch
    from results_db.redact import redact

    if not db or redact(str(db)) == str(db):
        return list(argv)
    os.environ["LENBENCH_DB"] = str(db)
    return launch.strip_option(argv, "--db")


@contextmanager
def existing_db(args: Any) -> Iterator["ResultsDB | None"]:
    """The database --db names when it already exists (None when it does not: nothing is created), closed after."""
    from results_db import ResultsDB

    target = args.db or default_db_url()
    if "://" not in target and not Path(target).expanduser().is_file():
        yield None
        return
    db = ResultsDB(target)
    try:
        yield db
    finally:
        close = getattr(db, "close", None)
        if callable(close):
            close()


def open_db(args: Any) -> "ResultsDB":
    """The database a writing command records into (created when new; see `add_db(writes=True)`)."""
    from results_db import ResultsDB

    return ResultsDB(args.db, init_foreign=args.db_init_foreign)
