"""Options several subcommands share."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from results_db import ResultsDB, default_db_url


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
    p.add_argument("--download", action="store_true", help="download missing BEIR datasets from their source (needs network)")


def add_encoder_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pooling", choices=["mean", "cls"], default=None, help="default: the model folder's, else mean")
    p.add_argument("--max-len", type=int, default=256, help="max tokens per text, special tokens included (default 256)")
    p.add_argument("--batch-size", type=int, default=64, help="encoding batch size (default 64)")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:1 ... (default: cuda if available)")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the embedding cache")


def add_eval_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--elong", default="2,4,8,rand", help="elongation variants of @elong suites (default 2,4,8,rand)")
    p.add_argument("--limit", type=int, default=None, help="only the first N items of each dataset (quick checks)")
    p.add_argument("--seed", type=int, default=0, help="seed of random elongation, kNN splits, diagnostics (default 0)")


def open_db(args: Any) -> ResultsDB:
    """The database a writing command records into (created when new; see `add_db(writes=True)`)."""
    return ResultsDB(args.db, init_foreign=args.db_init_foreign)


def fingerprint_files(files: Any) -> dict:
    """Data fingerprint of the files a run read; {} when one cannot be read any more (the run's error says why)."""
    from bench.provenance import data_fingerprint

    try:
        return data_fingerprint(set(files))
    except OSError:
        return {}


def command_line() -> str:
    return " ".join(["bench"] + [_quote(a) for a in sys.argv[1:]])


def _quote(arg: str) -> str:
    import shlex

    return shlex.quote(arg)


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").lower() in ("1", "true", "yes")
