"""Expansion of a sweep spec into points: each point is exactly one `bench run` (a `RunSpec`) and its config hash.

The hash is `RunSpec.configs`'s, the one the run will record. It needs the training corpus's text count and, for a
corpus file, its content digest: the ones an earlier load on this machine noted, else (`expand(count=True)`, what
every reader of a database asks for) counted now (`bench.data.corpus.counted_corpus`), so a point's hash never
depends on what a local cache has seen (a database copied from another machine reads the same here). A corpus that
is not on this machine (wiki1m offline), or not counted yet in a dry run, leaves the hash unknown: the point is then
matched by its sweep name and key, and `bench run --resume` matches the hash itself where the point runs. Points are compared for duplicates with the count left as a stand-in
named by the corpus options, so that check needs no count.
"""

from __future__ import annotations

import itertools
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from bench.experiment.run_spec import RunSpec, option_argv
from bench.runtime.errors import ConfigError
from bench.sweep.spec import SweepSpec


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
    spec: RunSpec = field(default_factory=RunSpec, compare=False)  # the run this point is (without the sweep's own options)
    identity: str = field(default="", compare=False)  # config hash with a stand-in corpus count: equal for duplicates
    config: dict[str, Any] | None = field(default=None, compare=False, repr=False)  # what config_hash hashes

    @property
    def run_args(self) -> dict[str, Any]:
        """The run's budget, batch size, backbone... (what the cost estimate reads)."""
        values = self.spec.option_values()
        return {k: values[k] for k in RUN_ARGS}

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


def _label(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def expand(spec: SweepSpec, compute_hash: bool = True, count: bool = False) -> list[Point]:
    """Every point of the sweep, in grid order (variants outermost, then the grid's keys as the file lists them).
    count: a training corpus no load on this machine has counted is counted now, so each point's hash is known
    wherever its corpus is (what matching points with a database's rows needs; a dry run does without)."""
    axes = list(spec.grid)
    variants = spec.variants or [None]
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
            run = _run_spec(options, spec, key)
            chash, note, identity, config = _hash(run, spec, key, count) if compute_hash else (None, "not computed", "", None)
            points.append(Point(
                sweep=spec.name, key=key, labels={**options, **labels}, argv=tuple(option_argv(options)),
                method=_method(run.method, spec, key), seed=run.seed, config_hash=chash, hash_note=note, options=options,
                spec=run, identity=identity, config=config,
            ))
    seen: dict[str, str] = {}
    for p in points:
        if p.identity and p.identity in seen:
            raise ConfigError(f"{spec.path}: points {seen[p.identity]!r} and {p.key!r} have the same config hash: "
                              "an axis that does not change the result (device, progress...) makes duplicates")
        if p.identity:
            seen[p.identity] = p.key
    return points


RUN_ARGS = ("backbone", "budget", "batch_size", "max_len", "corpus", "suite", "data_dir")


def _method(name: str, spec: SweepSpec, key: str) -> str:
    from bench.train.registry import get_method

    try:
        return get_method(name.strip(",")).name
    except KeyError as exc:
        raise ConfigError(f"{spec.path}: point {key!r}: {exc.args[0]}") from None


def _run_spec(options: dict[str, Any], spec: SweepSpec, key: str) -> RunSpec:
    """The point's run: its options typed and checked as `bench run` would, `bench run`'s defaults for the rest."""
    try:
        run = RunSpec.from_options({**options, "no_baseline": True})
    except ValueError as exc:
        raise ConfigError(f"{spec.path}: point {key!r}: {exc}") from None
    if "," in run.method.strip(","):
        raise ConfigError(f"{spec.path}: point {key!r} names several methods ({run.method}); "
                          "put them in [grid] method = [...] so each point is one method")
    return run


def _hash(run: RunSpec, spec: SweepSpec, key: str, count: bool) -> tuple[str | None, str, str, dict[str, Any] | None]:
    """(config hash or None, why it is unknown, the hash with a stand-in corpus count, the config hashed). count: a
    corpus no load here has counted is counted now (what reading a database needs); else only the noted counts are
    used (a dry run)."""
    from bench.data.corpus import DEFAULT_CORPUS, counted_corpus, known_corpus_digest, known_text_count
    from bench.train.registry import get_method

    try:
        method = run.settings.methods[0]
    except ConfigError as exc:
        raise ConfigError(f"{spec.path}: point {key!r}: {exc}") from None
    trains = get_method(method).trains
    stand_in = f"texts of {run.corpus} (limit {run.corpus_limit}, data {run.data_dir})" if trains else 0
    config, identity = run.configs(stand_in).per_method[method]
    if not trains:
        return identity, "", identity, config
    if count:
        counted = counted_corpus(run.corpus, run.data_dir, run.corpus_limit)  # counted now if no load here has
        if counted is None:
            return None, f"corpus {run.corpus} is not on this machine: its hash is known where the point runs", identity, None
        config, chash = run.configs(*counted).per_method[method]
        return chash, "", identity, config
    texts = known_text_count(run.corpus, run.data_dir, run.corpus_limit)
    digest = None if run.corpus == DEFAULT_CORPUS else known_corpus_digest(run.corpus, run.data_dir)
    if texts is None or (digest is None and run.corpus != DEFAULT_CORPUS):
        return None, f"corpus {run.corpus} not counted on this machine yet: its hash is known when the point runs", identity, None
    config, chash = run.configs(texts, digest).per_method[method]
    return chash, "", identity, config
