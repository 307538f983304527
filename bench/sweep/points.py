"""Expansion of a sweep spec into points: each point is exactly one `bench run` command and its config hash.

The hash is computed by `bench run`'s own parser and `run_configs`, so it is the hash the run will record. It
needs the training corpus's text count; a corpus that is not on this machine yet (wiki1m offline) leaves the
hash unknown (the point is still matched by its sweep name and key, and `bench run --resume` matches the hash
itself when the point runs).
"""

from __future__ import annotations

import itertools
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from bench.runtime.errors import ConfigError
from bench.sweep.spec import SweepSpec, run_option_names, run_parser


@dataclass(frozen=True)
class Point:
    sweep: str
    key: str  # "method=simcse seed=0": the grid values (and variant) that make this point; stored in Run.sweep_point
    labels: dict[str, Any]  # the same as a dict (what a [[published]] cell matches, with every option)
    argv: tuple[str, ...]  # `bench run` options of this point (without the ones the sweep adds when it runs it)
    method: str
    seed: int
    config_hash: str | None
    hash_note: str = ""  # why config_hash is None
    options: dict[str, Any] = field(default_factory=dict, compare=False)
    run_args: dict[str, Any] = field(default_factory=dict, compare=False)  # the parsed budget, batch size, backbone...

    @property
    def command(self) -> str:
        return "bench run " + shlex.join(self.argv)

    @property
    def cell(self) -> str:
        """The point's key without its seed: the points of one cell differ only in seed."""
        return " ".join(part for part in self.key.split(" ") if not part.startswith("seed=")) or "all"

    @property
    def slug(self) -> str:
        return re.sub(r"[^A-Za-z0-9_.=-]+", "_", self.key.replace(" ", "__"))


def _argv(options: dict[str, Any], known: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for dest, value in options.items():
        flag = max(known[dest].option_strings, key=len)
        if isinstance(value, bool):
            if value:
                out.append(flag)
            continue
        for v in value if isinstance(value, list) else [value]:
            out += [flag, str(v)]
    return out


def _label(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def expand(spec: SweepSpec, compute_hash: bool = True) -> list[Point]:
    """Every point of the sweep, in grid order (variants outermost, then the grid's keys as the file lists them)."""
    known = run_option_names()
    axes = list(spec.grid)
    variants = spec.variants or [None]
    corpora: dict[tuple, tuple[int | None, str]] = {}
    points: list[Point] = []
    for variant in variants:
        for combo in itertools.product(*(spec.grid[a] for a in axes)):
            options = {**spec.fixed, **dict(zip(axes, combo))}
            labels: dict[str, Any] = {}
            if variant is not None:
                options.update(variant.options)
                labels["variant"] = variant.name
            labels.update({a: v for a, v in zip(axes, combo)})
            key = " ".join(f"{k}={_label(v)}" for k, v in labels.items()) or "all"
            argv = _argv(options, known)
            args = _parse(argv, spec, key)
            chash, note = _hash(args, spec, key, corpora) if compute_hash else (None, "not computed")
            points.append(Point(
                sweep=spec.name, key=key, labels={**options, **labels}, argv=tuple(argv), method=_method(args.method, spec, key),
                seed=int(args.seed), config_hash=chash, hash_note=note, options=options,
                run_args={k: getattr(args, k) for k in RUN_ARGS},
            ))
    seen: dict[str, str] = {}
    for p in points:
        if p.config_hash and p.config_hash in seen:
            raise ConfigError(f"{spec.path}: points {seen[p.config_hash]!r} and {p.key!r} have the same config hash: "
                              "an axis that does not change the result (device, progress...) makes duplicates")
        if p.config_hash:
            seen[p.config_hash] = p.key
    return points


RUN_ARGS = ("backbone", "budget", "batch_size", "max_len", "corpus", "suite", "data_dir")


def _method(name: str, spec: SweepSpec, key: str) -> str:
    from bench.train.registry import get_method

    try:
        return get_method(name.strip(",")).name
    except KeyError as exc:
        raise ConfigError(f"{spec.path}: point {key!r}: {exc.args[0]}") from None


def _parse(argv: list[str], spec: SweepSpec, key: str):  # noqa: ANN202
    """The point's options through `bench run`'s own parser (its defaults, its validation)."""

    class _Refused(Exception):
        pass

    def _error(message: str):  # noqa: ANN202 - argparse would print usage and exit; say which point instead
        raise _Refused(message)

    parser = run_parser()
    parser.error = _error  # type: ignore[method-assign]
    try:
        args = parser.parse_args([*argv, "--no-baseline"])
    except _Refused as exc:
        raise ConfigError(f"{spec.path}: point {key!r}: {exc}") from None
    if "," in args.method.strip(","):
        raise ConfigError(f"{spec.path}: point {key!r} names several methods ({args.method}); "
                          "put them in [grid] method = [...] so each point is one method")
    return args


def _hash(args, spec: SweepSpec, key: str, corpora: dict) -> tuple[str | None, str]:  # noqa: ANN001
    from bench.commands.run import parse_settings, run_configs
    from bench.data.errors import DataError
    from bench.train.registry import get_method

    try:
        settings = parse_settings(args)
    except ConfigError as exc:
        raise ConfigError(f"{spec.path}: point {key!r}: {exc}") from None
    method = settings.methods[0]
    texts = 0
    if get_method(method).trains:
        ck = (args.corpus, args.corpus_limit, args.data_dir)
        if ck not in corpora:
            from bench.data.corpus import load_corpus

            try:
                corpora[ck] = (len(load_corpus(args.corpus, data_dir=args.data_dir, limit=args.corpus_limit).texts), "")
            except (DataError, OSError):
                corpora[ck] = (None, f"corpus {args.corpus} is not on this machine: its hash is known when the point runs")
        texts, note = corpora[ck]
        if texts is None:
            return None, note
    return run_configs(args, settings, texts).per_method[method][1], ""
