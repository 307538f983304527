"""`bench` command line. Each subcommand lives in `bench/commands/<name>.py` with `register(subparsers)`."""

from __future__ import annotations

import argparse
import errno
import importlib
import logging
import sys

# Subcommand modules, in the order `bench --help` lists them.
COMMANDS = ("run", "sweep", "claim", "eval", "results", "export", "import_", "push", "methods", "method", "data",
            "cache", "db", "leaderboard")


# A disk that is full (or a file-size or quota limit): the same for the user, whichever file was being written.
DISK_FULL = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)
# The file system refusing a path (a file where a folder should be, no permission): the user's environment, not a bug.
PLACE_ERRORS = (NotADirectoryError, IsADirectoryError, PermissionError, FileExistsError)


class CLIError(Exception):
    """An error to show the user as one line, without a traceback (exit status 2)."""


def user_errors() -> tuple[type[BaseException], ...]:
    """The exceptions that mean the user's input is at fault: shown as one line (exit 2), not a traceback. Each
    stage defines its own; only the top of the program knows them all."""
    from bench.data.errors import DataError
    from bench.environment import EnvironmentSettingError
    from bench.evaluate.suites.base import SuiteError
    from bench.runtime.errors import ConfigError, ModelLoadError, TrainingError
    from results_db.errors import ResultsDBError

    return (DataError, ModelLoadError, SuiteError, ConfigError, TrainingError, FileNotFoundError, KeyError,
            ResultsDBError, EnvironmentSettingError)  # fmt: skip


def package_version() -> str:
    """The installed distribution's version (pyproject.toml), or 'unknown' for a checkout that is not installed."""
    from importlib import metadata

    try:
        return metadata.version("lenbench")
    except metadata.PackageNotFoundError:
        return "unknown (not installed; pip install -e .)"


def freeze_registries() -> None:
    """Registration is complete when a command starts: the method, attack-family and suite registries refuse any
    later `register` (so nothing imported during a run can add or shadow a name the command already checked).
    Installed entry points are still read on first use; a test or notebook registers before calling `main`."""
    from bench.evaluate.attacks import registry as attacks
    from bench.evaluate.suites import metadata as suites
    from bench.train import registry as methods

    for registry in (methods.METHODS, attacks.FAMILIES, suites.SUITES):
        registry.freeze()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bench",
        description="lenbench: train embedding methods under a shared budget, evaluate clean and elongation-attacked.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging and full tracebacks")
    parser.add_argument("--debug", action="store_true",
                        help="full tracebacks instead of one-line errors (a broken method file's own frames included; "
                        "also $LENBENCH_DEBUG=1)")  # fmt: skip
    parser.add_argument("--version", action="version", version=f"lenbench {package_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"bench.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"bench.commands.{name}":
                continue  # a subcommand not built yet
            raise
        module.register(sub)
    from bench.commands.common import add_option
    from bench.experiment.options import declared

    no_progress = declared("run", "no_progress")
    for command in sub.choices.values():  # every command may show bars: one switch for all (bench.runtime.progress)
        if not any(no_progress.flag in action.option_strings for action in command._actions):
            add_option(command, no_progress)
    return parser


def cli_reference() -> str:
    """The CLI reference as Markdown (every command, option, default, allowed values, identity and help), from the
    parsers `bench` builds (bench.commands.reference): docs/reference/cli.md is this text."""
    from bench.commands.reference import cli_reference as render

    return render(build_parser())


def main(argv: list[str] | None = None) -> int:
    given = None if argv is None else list(argv)  # called in-process (a script, a test): rows record this, not sys.argv
    argv = list(sys.argv[1:] if argv is None else argv)
    # `bench` alone is the README's main job: `bench run` with its defaults.
    if not argv or argv[0] in ("-v", "--verbose", "--debug") and len(argv) == 1:
        argv = argv + ["run"]
    from bench import environment
    from bench.commands.common import tracebacks
    from bench.runtime.terminal import safe

    try:
        environment.check_all()  # a bad $LENBENCH_* value: one line naming it, before anything (the parser) reads it
    except environment.EnvironmentSettingError as exc:
        print(f"bench: error: {safe(exc)}", file=sys.stderr)
        return 2
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = argv  # the command as given: `--nproc N` re-launches it under torchrun
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    from bench.runtime.terminal import SafeFormatter, SafeStream, safe

    for handler in [h for h in logging.getLogger().handlers if type(h) is logging.StreamHandler]:  # names in warnings: shown, not interpreted
        handler.setFormatter(SafeFormatter(handler.formatter._fmt if handler.formatter else None))
    # TOKENIZERS_PARALLELISM is left alone: the fast tokenizer's batch call runs on all cores (bench.encode.inputs).
    # Setting it to "false" here made every tokenisation one-threaded; setting it to "true" would be unsafe, because
    # only an unset variable lets the tokenizer switch itself to one thread in a forked child (its fork handler),
    # where its thread pool does not exist. The processes lenbench starts (sweep workers, torchrun ranks) exec a new
    # interpreter, so they start with a fresh pool.
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from bench.runtime import progress

    # bars on a terminal, a few lines in a log, nothing with --no-progress; inherited by the processes it starts
    progress.configure(quiet=bool(getattr(args, "no_progress", False)))
    from bench.experiment.option_ranges import check_args
    from bench.runtime.signals import StopRequested, graceful_stop

    freeze_registries()

    try:
        check_args(args)  # out-of-range numbers and unusable devices: one line, before anything runs
    except Exception as exc:  # noqa: BLE001 - a ConfigError; anything else is a bug shown with -v
        if tracebacks(args) or not isinstance(exc, user_errors()):
            raise
        print(f"bench: error: {safe(exc)}", file=sys.stderr)
        return 2

    clean = False
    stdout = sys.stdout
    sys.stdout = SafeStream(stdout)  # stored names (an imported model's, a sweep point's) are shown, not executed
    from contextlib import nullcontext

    from bench.experiment.record import command_line, invoked_as

    invoked = invoked_as(command_line(given)) if given is not None else nullcontext()
    try:
        with graceful_stop(), invoked:  # SIGTERM / SIGINT: checkpoint, run marked interrupted (bench.runtime.signals)
            code = int(args.func(args) or 0)
            stdout.flush()  # a reader that closed the pipe early (`| head`) is met here, not at exit
        clean = True
        return code
    except BrokenPipeError:  # the reader of stdout is gone: nothing more can be shown, and nothing is wrong
        _silence_stdout()
        return 128 + 13  # as a process killed by SIGPIPE (what `set -o pipefail` expects)
    except StopRequested as exc:
        print(f"bench: {exc.message(args.command)}", file=sys.stderr)
        if given is None:  # this process is the command, and it ends now: within seconds of the signal
            import gc

            gc.freeze()  # the interpreter's last collections skip everything (seconds with a model loaded)
        return exc.exit_code
    except KeyboardInterrupt:
        print("bench: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - one clear line for expected errors, traceback with -v / --debug
        debug = tracebacks(args)
        if not debug and isinstance(exc, OSError) and exc.errno in DISK_FULL:
            where = f" writing {exc.filename}" if exc.filename else ""
            print(f"bench: error: no space left{where} ({exc.strerror}); free space (or point the output elsewhere) "
                  "and run the command again", file=sys.stderr)  # fmt: skip
            return 2
        if not debug and isinstance(exc, PLACE_ERRORS) and exc.filename:  # a path the machine refuses
            print(f"bench: error: cannot use {safe(exc.filename)}: {exc.strerror}; give another path (or fix its "
                  "folder's permissions)", file=sys.stderr)  # fmt: skip
            return 2
        if debug or not isinstance(exc, user_errors()):
            raise
        for line in getattr(exc, "faults", None) or [exc]:  # a file with several faults: one line each
            print(f"bench: error: {safe(line)}", file=sys.stderr)
        return 2
    finally:
        sys.stdout = stdout
        progress.restore()
        if "torch.distributed" in sys.modules:  # a command that ran under torchrun
            from bench.runtime import distributed

            distributed.release(clean)


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush at exit finds no closed pipe to complain about."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.__stdout__.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


if __name__ == "__main__":
    sys.exit(main())
