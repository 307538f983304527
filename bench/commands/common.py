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


def tracebacks(args: argparse.Namespace) -> bool:
    """Whether an error is shown as its traceback rather than one line: `bench -v`, `bench --debug` or
    $LENBENCH_DEBUG (bench.cli's handler, and `bench method check`'s problems)."""
    from bench import environment

    return bool(getattr(args, "verbose", False) or getattr(args, "debug", False) or environment.flag("LENBENCH_DEBUG"))


def launch_settings(args: argparse.Namespace) -> tuple[str, str]:
    """For a command that starts runs in other processes (`bench sweep`, `bench claim`): checks --jobs and --retries
    and gives (--db as given, else the default; the database those processes open: a file path made absolute,
    since they may run in another folder)."""
    from bench.runtime.errors import ConfigError

    if args.jobs < 1 or args.retries < 0:
        raise ConfigError("--jobs must be >= 1 and --retries >= 0")
    db_arg = args.db or default_db_url()
    return db_arg, db_arg if "://" in db_arg else str(Path(db_arg).expanduser().resolve())


def declared_command(sub: argparse._SubParsersAction, command: str, handler: Any, *, help: str, description: str,
                     formatter_class: type = argparse.RawDescriptionHelpFormatter) -> argparse.ArgumentParser:
    """`bench COMMAND`'s parser, every option as declared in bench.experiment.options (add_options), `handler` its
    function: the whole registration of a command that declares all its options there."""
    p = sub.add_parser(command, help=help, description=description, formatter_class=formatter_class)
    add_options(p, command)
    p.set_defaults(func=handler)
    return p


def add_options(p: argparse.ArgumentParser, command: str) -> None:
    """Every option of `bench COMMAND` as declared (bench.experiment.options): flag, type, default, choices,
    repetition, help, in declaration order (an option with a `group` in that --help section)."""
    from bench.experiment.options import options_of

    groups: dict[str, Any] = {}
    for option in options_of(command).values():
        target = p if option.group is None else groups.setdefault(option.group, p.add_argument_group(
            f"{option.group} (--executor {option.group})" if command == "sweep" else option.group))  # fmt: skip
        add_option(target, option)


def add_option(p: Any, option: Any) -> None:
    """One declared option (bench.experiment.options.Option) on a parser or an argument group."""
    help_text = argparse.SUPPRESS if option.hidden else option.shown_help()
    if option.positional:
        p.add_argument(option.name, help=help_text)
        return
    kwargs: dict[str, Any] = {"help": help_text, "default": option.default_value()}
    if option.type is None:  # a flag
        kwargs["action"] = "store_true"
    else:
        kwargs["action"] = "append" if option.many else "store"
        if option.type is not str:
            kwargs["type"] = option.type
        if option.choices:
            kwargs["choices"] = option.choices
        if option.metavar:
            kwargs["metavar"] = option.metavar
    if option.required:
        kwargs["required"] = True
        kwargs.pop("default")
    p.add_argument(option.flag, **kwargs)


def add_db(p: argparse.ArgumentParser, writes: bool = False) -> None:
    """--db (and, for a command that writes, --db-init-foreign) as `bench run` declares them, for the commands whose
    other options are their own (results, export, import, push, leaderboard)."""
    from bench.experiment.options import declared

    add_option(p, declared("run", "db"))
    if writes:
        add_option(p, declared("run", "db_init_foreign"))


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
