"""The Python API: `evaluate`, `run` and `load`, the same code path as `bench eval`, `bench run` and `bench results`.

Keyword options are the commands' options by their names (`--max-len 32` is `max_len=32`, a flag is `True`, a
repeatable option takes a list, `suites=` and `methods=` take a string or a list). They go through the command's own
parser and checks, so defaults, validation and the recorded run rows (config, config hash, command) are exactly the
command's: a run made here and the same run made on the command line are the same row (the second one reuses it).
Errors are the commands' (`bench.runtime.errors.ConfigError` and the like), raised, not printed.

Every call records into a results database (`db=`, default the commands' default: $LENBENCH_DB or
./lenbench.sqlite) and returns a `Results`: the run ids by method, `to_pandas()` (one row per score with backbone,
budget, corpus, seed, n, subset and the 95% interval), `report()` (the tables the command prints), `differences()`
(each method minus the reference, with intervals) and `curves()`.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


# ------------------------------------------------------------------------------------------- options
def _argv(command: str, options: Mapping[str, Any]) -> list[str]:
    """`bench COMMAND` arguments for keyword options: None left out, True a flag, False left out, a list repeats."""
    argv = [command]
    for name, value in options.items():
        if value is None or value is False:
            continue
        flag = "--" + name.replace("_", "-")
        if value is True:
            argv.append(flag)
            continue
        for item in value if isinstance(value, (list, tuple)) else [value]:
            argv += [flag, str(item)]
    return argv


def _parse(command: str, options: Mapping[str, Any]) -> argparse.Namespace:
    """The command's own parser and option checks; a bad option raises ConfigError (argparse's exits become one)."""
    from bench.cli import build_parser
    from bench.experiment.option_ranges import check_args
    from bench.runtime.errors import ConfigError

    argv = _argv(command, options)
    parser = build_parser()
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = parser.parse_args(argv)
    except SystemExit:
        lines = [line for line in err.getvalue().splitlines() if line.strip()]
        raise ConfigError(lines[-1].split("error: ", 1)[-1] if lines else f"bad options for {command}") from None
    args.argv = argv
    check_args(args)
    return args


def _joined(value: str | Sequence[str] | None) -> str | list[str] | None:
    if value is None or isinstance(value, str):
        return value
    return list(value)


# ------------------------------------------------------------------------------------------- results
@dataclass
class Results:
    """Runs in a results database, by method label (several seeds: several ids), as one comparison reads them."""

    db: Any  # results_db.ResultsDB
    runs: dict[str, list[int]]  # method label -> run ids
    comparison: str | None = None  # the comparison key (hash of the shared settings), when there is one
    reference: str | None = None  # the row differences are taken against (default: vanilla, else the first)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def run_ids(self) -> list[int]:
        return sorted(i for ids in self.runs.values() for i in ids)

    def to_pandas(self) -> Any:
        """One row per score: run_id, kind, method, model, backbone, budget, corpus, seed, status, suite, dataset,
        variant, metric, value (x100), n, subset (--limit N or empty), ci_low, ci_high (95% bootstrap), info."""
        from bench.report.results_file import scores_frame

        labels = {i: method for method, ids in self.runs.items() for i in ids}
        return scores_frame(self.db, self.db.runs(), self.run_ids, labels)

    def report(self, reference: str | None = None) -> str:
        """The tables `bench run` / `bench results` print for these runs."""
        from bench.report.tables import comparison_report

        return comparison_report(self.db, self.runs, reference or self._reference(), profile=True)

    def differences(self, reference: str | None = None) -> Any:
        """Each method minus the reference on every (suite, dataset, metric, variant), with its 95% interval (paired
        bootstrap for one run per method, t-interval over seeds for several), as `report()` shows it."""
        from bench.report.tables import differences_table, load_scores

        scores = load_scores(self.db, self.runs)
        seeds = self.db.runs().set_index("id")["seed"]
        scores["run_seed"] = scores["run_id"].map(seeds)
        return differences_table(self.db, scores, reference or self._reference(), list(self.runs))

    def curves(self) -> Any:
        """Learning-curve points of these runs (bench run --eval-every), one row per run, step and score."""
        from bench.report.curves import curve_frame, with_final

        return with_final(curve_frame(self.db, self.run_ids), self.db)

    def _reference(self) -> str:
        if self.reference in self.runs:
            return self.reference
        return "vanilla" if "vanilla" in self.runs else next(iter(self.runs))

    def __repr__(self) -> str:
        where = f"comparison {self.comparison[:12]}, " if self.comparison else ""
        return f"<lenbench.Results {where}{', '.join(f'{m}: {ids}' for m, ids in self.runs.items())}>"


# ------------------------------------------------------------------------------------------- jobs
def evaluate(model: str, suites: str | Sequence[str], *, db: str | os.PathLike[str] | None = None,
             quiet: bool = False, **options: Any) -> Results:  # fmt: skip
    """Score `model` (a folder, a hub id, 'minilm' or 'bm25') on `suites` and record it: `bench eval`.

    options: `bench eval`'s options by name (limit=300, max_len=256, pooling="mean", elong="2,rand", attack=[...],
    seed=0, data_dir=..., download=True, device="cpu", backend="onnx", no_cache=True, ...)."""
    from bench.experiment.eval_spec import EvalSpec
    from bench.experiment.evaluation import run_evaluation
    from results_db import ResultsDB

    args = _parse("eval", {"model": model, "suite": _joined(suites), "db": None if db is None else str(db),
                           "no_progress": quiet or None, **options})  # fmt: skip
    spec = EvalSpec.from_args(args)
    with _command_line(args.argv):
        result = run_evaluation(spec, open_db=lambda: ResultsDB(args.db, init_foreign=args.db_init_foreign),
                                say=(lambda *a, **k: None) if quiet else print)  # fmt: skip
    return Results(result.db, {result.method: [result.run_id]})


def run(methods: str | Sequence[str] | None = None, suites: str | Sequence[str] | None = None,
        budget: str | None = None, *, db: str | os.PathLike[str] | None = None, quiet: bool = False,
        **options: Any) -> Results:  # fmt: skip
    """Train each method under the same settings and budget, evaluate it with the untrained backbone, record every
    run: `bench run` (None: the command's default, e.g. the README's main job with no arguments).

    options: `bench run`'s options by name (backbone="minilm", corpus="wiki-offline", seeds="0,1,2", limit=300,
    max_len=64, batch_size=16, lr=3e-5, hp=["simcse.temperature=0.1"], eval_every=50, preset="scratch", out="runs",
    report_to="tensorboard", reference="vanilla", ...)."""
    from dataclasses import replace

    from bench.commands.run import D
    from bench.experiment.comparison import check_spec, run_comparison
    from bench.experiment.presets import apply_preset
    from bench.experiment.run_spec import RunSpec
    from bench.runtime import distributed
    from bench.runtime.device import resolve_device, runtime_fields
    from results_db import ResultsDB

    args = _parse("run", {"method": _joined(methods) if not isinstance(methods, (list, tuple)) else ",".join(methods),
                          "suite": _joined(suites), "budget": budget, "db": None if db is None else str(db),
                          "no_progress": quiet or None, **options})  # fmt: skip
    apply_preset(args, D)
    spec = RunSpec.from_args(args)
    check_spec(spec)  # settings, reference and evaluation data, before any row
    device = resolve_device(args.device)
    spec = replace(spec, device=args.device)
    runtime = {**distributed.describe(per_rank_batch=args.batch_size), **runtime_fields(device, args.precision)}
    database = ResultsDB(args.db, init_foreign=args.db_init_foreign)
    say = (lambda *a, **k: None) if quiet else print
    with _command_line(args.argv):
        result = run_comparison(spec, database, say=say, runtime=runtime)
    return Results(database, result.runs, result.comparison, result.reference)


def load(db: str | os.PathLike[str] | None = None) -> "Store":
    """The runs stored in a results database (read-only; nothing is created): `bench results` as objects."""
    return Store(db)


class Store:
    """A results database, read: its runs, their scores, and any comparison in it as `Results`."""

    def __init__(self, db: str | os.PathLike[str] | None = None):
        from results_db import ResultsDB

        self.db = ResultsDB(None if db is None else str(db), create=False)

    def runs(self) -> Any:
        """Every run row (a 'running' row whose process is gone shows as 'stale')."""
        from results_db.liveness import with_liveness

        return with_liveness(self.db.runs())

    def scores(self, run_ids: Sequence[int] | None = None) -> Any:
        """One row per score of these runs (all when None), as `Results.to_pandas()`."""
        from bench.report.results_file import scores_frame

        runs = self.db.runs()
        return scores_frame(self.db, runs, runs["id"].tolist() if run_ids is None else run_ids)

    def comparisons(self) -> Any:
        """One row per comparison: its key, methods, finished runs and newest run id."""
        import pandas as pd

        from bench.report.pooling import comparison_of, row_label

        rows: dict[str, dict[str, Any]] = {}
        for row in self.db.runs().sort_values("id").to_dict("records"):
            key = comparison_of(row)
            entry = rows.setdefault(key, {"comparison": key, "methods": [], "runs": 0, "newest_run": 0})
            label = row_label(row)  # a `bench eval` row by the model it scored, as the tables name it
            if label not in entry["methods"]:
                entry["methods"].append(label)
            entry["runs"] += row["status"] == "finished"
            entry["newest_run"] = int(row["id"])
        return pd.DataFrame(list(rows.values()), columns=["comparison", "methods", "runs", "newest_run"])

    def comparison(self, key: str | int | None = None, reference: str | None = None) -> Results:
        """The finished runs of one comparison, pooled over every command that made them: the newest (None), the one
        a run id belongs to (an int), or a comparison key or its prefix (a str)."""
        from bench.report.pooling import comparison_of, comparison_runs
        from bench.runtime.errors import ConfigError

        runs = self.db.runs()
        if runs.empty:
            raise ConfigError(f"no runs in {self.db.location.shown}")
        rows = runs.sort_values("id").to_dict("records")
        if key is None:
            found = comparison_of(rows[-1])
        elif isinstance(key, int):
            match = [r for r in rows if int(r["id"]) == key]
            if not match:
                raise ConfigError(f"no run {key} in {self.db.location.shown}")
            found = comparison_of(match[0])
        else:
            keys = sorted({comparison_of(r) for r in rows if comparison_of(r).startswith(key)})
            if len(keys) != 1:
                raise ConfigError(f"comparison {key!r}: {'no' if not keys else len(keys)} comparisons match in "
                                  f"{self.db.location.shown}; Store.comparisons() lists them")  # fmt: skip
            found = keys[0]
        if found.startswith("run-"):  # a run outside any comparison (bench eval): itself
            run_id = int(found[4:])
            row = next(r for r in rows if int(r["id"]) == run_id)
            return Results(self.db, {row["method"]: [run_id]})
        return Results(self.db, comparison_runs(runs, found), found, reference)


# ------------------------------------------------------------------------------------------- helpers
@contextlib.contextmanager
def _command_line(argv: list[str]):  # noqa: ANN202 - a context manager
    """Run.command of rows made here: the equivalent `bench` command line, not the notebook's interpreter."""
    import sys

    saved = sys.argv
    sys.argv = ["bench", *argv]
    try:
        yield
    finally:
        sys.argv = saved
