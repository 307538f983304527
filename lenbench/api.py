"""The Python API: `evaluate`, `run` and `load`, the same code path as `bench eval`, `bench run` and `bench results`.

Keyword options are the commands' options by their names (`--max-len 32` is `max_len=32`, a flag is `True` or
`False`), given as Python values: a number for a number, and for a list option (`seeds`, `methods`, `suites`, `elong`,
`hp`, `attack`, `report_to`...) a string as on the command line or a list, tuple, set or generator of items
(`seeds=[0, 1, 2]` trains three seeds). They become the commands' own specs directly (`RunSpec.from_options`,
`EvalOptions.from_options`: bench.experiment.command_options types and checks them as the parser would, from the
same declarations and defaults), so the recorded run rows (config, config hash, command) are exactly the command's:
a run made here and the same run made on the command line are the same row (the second one reuses it). Errors are
lenbench's own (`bench.runtime.errors.ConfigError`, `ModelLoadError`, results_db's `ResultsDBError`...), raised with
the command's one-line message, never printed.

Every call records into a results database (`db=`, default the commands' default: $LENBENCH_DB or
./lenbench.sqlite) and returns a `Results`: the run ids by method, `to_pandas()` (one row per score with backbone,
budget, corpus, seed, n, subset and the 95% interval), `report()` (the tables the command prints), `differences()`
(each method minus the reference, with intervals, as numbers) and `curves()`. `quiet=True` prints nothing.
"""

from __future__ import annotations

import contextlib
import numbers
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


# ------------------------------------------------------------------------------------------- options
def _typed(cls: Any, options: Mapping[str, Any]) -> Any:
    """`cls.from_options(options)` (RunSpec, EvalOptions) with the checks the command makes right after parsing
    (ranges, devices, output folders, model names); a bad value is a ConfigError naming the keyword (`limit=0`)."""
    from bench.data.download import download_default
    from bench.experiment.command_options import keyword
    from bench.experiment.option_ranges import check_args
    from bench.runtime.errors import ConfigError

    command = "run" if cls.__name__ == "RunSpec" else "eval"
    given = {k: v for k, v in options.items() if v is not None}
    try:
        typed = cls.from_options({"download": download_default(), **given})  # --download's default: $LENBENCH_DOWNLOAD
    except ConfigError:
        raise
    except ValueError as exc:  # one line naming the keyword, as lenbench's own error
        raise ConfigError(str(exc)) from None
    check_args(typed, keyword, command)
    if typed.nproc is not None and typed.nproc > 1:
        raise ConfigError(f"nproc={typed.nproc}: the Python API runs in this process only; for {typed.nproc} processes "
                          f"run `bench {command} --nproc {typed.nproc} ...` (or torchrun) from a shell")  # fmt: skip
    return typed


def _db_text(db: Any) -> str | None:
    """`db=` as the commands' --db takes it: None (the default database), or a file path or URL as a string or
    path object; anything else is refused (str(123) would create a database file named '123')."""
    from bench.runtime.errors import ConfigError

    if db is None:
        return None
    if isinstance(db, (str, os.PathLike)) and not isinstance(db, bytes) and str(os.fspath(db)).strip():
        return str(os.fspath(db))
    raise ConfigError(f"db={db!r}: give the results database as a file path or an SQLAlchemy URL string "
                      "(e.g. db='results.sqlite'), or leave it out for $LENBENCH_DB / ./lenbench.sqlite")  # fmt: skip


def _model_text(model: Any) -> str:
    """`model` as `bench eval --model` takes it: a non-empty string or path (None or '' would load the working
    folder as a model)."""
    from bench.runtime.errors import ConfigError

    if isinstance(model, (str, os.PathLike)) and not isinstance(model, bytes) and str(os.fspath(model)).strip():
        return str(os.fspath(model))
    raise ConfigError(f"model={model!r}: give a model folder, a hub id, 'minilm' or 'bm25' as a string "
                      "(e.g. lenbench.evaluate('minilm', 'sts')), or a model object: a SentenceTransformer, a "
                      "(transformers model, tokenizer) pair, or an object with encode(list[str])")  # fmt: skip


def _name_text(name: Any) -> str | None:
    """`name=`: a non-empty string (an opaque object's identity; a torch model's label), or None."""
    from bench.runtime.errors import ConfigError

    if name is None or isinstance(name, str) and name.strip():
        return name.strip() if isinstance(name, str) else None
    raise ConfigError(f"name={name!r}: give the model's name as a non-empty string (e.g. name='hash-encoder-v1')")


def _as_typed(typed: Any, given: Mapping[str, Any]) -> dict[str, Any]:
    """The options given, as typed (a generator is read once; its items are in the typed value), for the recorded
    command line."""
    values = typed.option_values()
    return {name: values[name] for name, value in given.items() if value is not None}


@contextlib.contextmanager
def _job(quiet: bool, command: str) -> Iterator[None]:
    """Around one job: progress bars and lines off when quiet (transformers' and the hub's too), and rows recorded
    with the equivalent `bench` command line."""
    from bench.experiment.record import invoked_as
    from bench.runtime import progress

    progress.configure(quiet=quiet)
    try:
        with invoked_as(command):
            yield
    finally:
        progress.restore()


def _say(quiet: bool) -> Any:
    return (lambda *a, **k: None) if quiet else print


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
        variant, metric, value (x100), n, subset (--limit N or empty), subset_label ('sample of N of M', '' for a
        whole dataset), ci_low, ci_high (95% bootstrap), info."""
        from bench.report.results_file import scores_frame

        labels = {i: method for method, ids in self.runs.items() for i in ids}
        return scores_frame(self.db, self.db.runs(), self.run_ids, labels)

    def report(self, reference: str | None = None) -> str:
        """The tables `bench run` / `bench results` print for these runs."""
        from bench.report.tables import comparison_report

        return comparison_report(self.db, self.runs, self._reference(reference), profile=True)

    def differences(self, reference: str | None = None) -> Any:
        """Each method minus the reference on every (suite, dataset, metric, variant), with its 95% interval (paired
        bootstrap for one run per method, over seeds and items for several), as `report()` computes it, in numbers:
        suite, dataset, metric, variant, method, n, diff, ci_low, ci_high, p (floats), significant (the interval
        excludes 0 after Holm's correction over the table, the report's `*`; never where a trained side has fewer
        than 3 seeds) and interval (how it was computed)."""
        from bench.report.tables import difference_numbers, load_scores, with_run_columns

        reference = self._reference(reference)
        scores = load_scores(self.db, self.runs)
        if scores.empty:
            return difference_numbers(self.db, scores, reference, [])
        return difference_numbers(self.db, with_run_columns(self.db, scores), reference, list(self.runs))

    def citations(self) -> str:
        """The BibTeX of exactly what these runs' tables rest on (lenbench, each method, suite, dataset and attack,
        the bootstrap and Holm's correction), each entry once, with a comment saying what it is cited for."""
        from bench.report.citations import for_runs, render

        return render(for_runs(self.db, self.run_ids))

    def curves(self) -> Any:
        """Learning-curve points of these runs (bench run --eval-every), one row per run, step and score."""
        from bench.report.curves import curve_frame, with_final

        return with_final(curve_frame(self.db, self.run_ids), self.db)

    def _reference(self, asked: str | None = None) -> str:
        """The row differences are taken against: `asked` (it must be one of these runs' methods), else the
        comparison's reference, else vanilla, else the first."""
        if asked is not None:
            if asked not in self.runs:
                from bench.runtime.errors import ConfigError

                raise ConfigError(f"reference {asked!r} is not one of the compared methods ({', '.join(self.runs)})")
            return asked
        if self.reference in self.runs:
            return self.reference
        return "vanilla" if "vanilla" in self.runs else next(iter(self.runs))

    def __repr__(self) -> str:
        where = f"comparison {self.comparison[:12]}, " if self.comparison else ""
        return f"<lenbench.Results {where}{', '.join(f'{m}: {ids}' for m, ids in self.runs.items())}>"


# ------------------------------------------------------------------------------------------- jobs
def evaluate(model: Any, suites: str | Sequence[str], *, db: str | os.PathLike[str] | None = None,
             quiet: bool = False, name: str | None = None, tokenizer: Any = None, **options: Any) -> Results:  # fmt: skip
    """Score `model` on `suites` and record it: `bench eval`. `model`: a folder, a hub id, 'minilm', 'bm25' or
    'path/to/file.py:NAME' (a string or path); or an object: a SentenceTransformer, a transformers model with its
    tokenizer (a `(model, tokenizer)` pair, or `tokenizer=`), or anything with `encode(list[str])` returning an
    (n, dim) array or tensor (bench.encode.objects). A torch model is known by its weights, class and tokenizer; any
    other object by `name=` (required for it; the row is marked "identity declared, not derived" and reused only
    with reuse_declared=True). `name=` also labels a torch model's row.

    options: `bench eval`'s options by name (limit=300, max_len=256, pooling="mean", elong="2,rand" or ["2", "rand"],
    attack=[...], seed=0, data_dir=..., download=True, device="cpu", backend="onnx", no_cache=True,
    allow_pickle=True, ...); estimate=True returns what it will cost (bench.experiment.estimate.evaluation.Estimate: .seconds,
    .lines()) and scores nothing."""
    from bench.evaluate.suites import parse_suites
    from bench.experiment.command_options import command_text
    from bench.experiment.eval_spec import EvalOptions, EvalSpec
    from bench.experiment.evaluation import run_evaluation
    from results_db import ResultsDB

    from bench.encode.objects import OBJECT_MODEL, is_model_object, model_object

    # a string or path is loaded by name (_model_text refuses anything else that is not a model object, in one line)
    source = model_object(model, name=_name_text(name), tokenizer=tokenizer) if is_model_object(model) else None
    if source is None and (name is not None or tokenizer is not None):
        from bench.runtime.errors import ConfigError

        raise ConfigError(f"{'name' if name is not None else 'tokenizer'}= is for a model given as an object; "
                          f"model={model!r} is loaded by its name or folder")  # fmt: skip
    given = {"model": OBJECT_MODEL if source is not None else _model_text(model), "suite": suites,
             "db": _db_text(db), "no_progress": quiet or None, **options}  # fmt: skip
    opts = _typed(EvalOptions, given)
    spec = EvalSpec.from_options(opts)
    if source is not None:
        from dataclasses import replace

        spec = replace(spec, source=source)  # `model` becomes its name once its encoder is built
    parse_suites(spec.suite_args)  # an unknown suite: refused before anything is written
    if opts.estimate:  # what it will cost, nothing scored or recorded: bench.experiment.estimate.evaluation.Estimate
        from bench.experiment.estimate.evaluation import estimate_evaluation

        return estimate_evaluation(spec, calibration_seconds=opts.calibration_seconds)  # type: ignore[return-value]
    with _job(quiet or opts.no_progress, command_text("eval", _as_typed(opts, given))):
        result = run_evaluation(spec, open_db=lambda: ResultsDB(opts.db, init_foreign=opts.db_init_foreign),
                                say=_say(quiet))  # fmt: skip
    return Results(result.db, {result.method: [result.run_id]})


def run(methods: str | Sequence[str] | None = None, suites: str | Sequence[str] | None = None,
        budget: str | None = None, *, db: str | os.PathLike[str] | None = None, quiet: bool = False,
        tokenizer: Any = None, **options: Any) -> Results:  # fmt: skip
    """Train each method under the same settings and budget, evaluate it with the untrained backbone, record every
    run: `bench run` (None: the command's default, e.g. the README's main job with no arguments).

    options: `bench run`'s options by name (backbone="minilm", corpus="wiki-offline", seeds=[0, 1, 2], limit=300,
    max_len=64, batch_size=16, lr=3e-5, hp=["simcse.temperature=0.1"], eval_every=50, preset="scratch", out="runs",
    report_to=["tensorboard"], reference="vanilla", ...); estimate=True returns what it will cost
    (bench.experiment.estimate.run.RunEstimate) and runs nothing. backbone= may be an object too: a
    SentenceTransformer, or a transformers model with `tokenizer=` (or a `(model, tokenizer)` pair), saved once as
    the folder <out>/backbones/object-<hash of its weights> that names it in the rows (bench.train.backbone_object)."""
    from bench.experiment.run_job import prepare_run, run_prepared
    from bench.experiment.command_options import command_text
    from bench.experiment.options import declared
    from bench.experiment.run_spec import RunSpec
    from bench.train.backbone_object import backbone_folder
    from results_db import ResultsDB

    if "backbone" in options or tokenizer is not None:  # an object: its folder, which the options then name
        out = options.get("out") or declared("run", "out").default
        options["backbone"] = backbone_folder(options.get("backbone"), out, tokenizer=tokenizer)
    given = {"method": methods, "suite": suites, "budget": budget, "db": _db_text(db),
             "no_progress": quiet or None, **options}  # fmt: skip
    typed = _typed(RunSpec, given)
    if typed.estimate:  # what it will cost, nothing trained or recorded: bench.experiment.estimate.run.RunEstimate
        from bench.experiment.estimate.run import estimate_run

        return estimate_run(typed)  # type: ignore[return-value]
    prepared = prepare_run(typed, world=1)
    spec = prepared.spec
    with _job(quiet or spec.no_progress, command_text("run", _as_typed(typed, given))):
        database = ResultsDB(spec.db, init_foreign=spec.db_init_foreign)
        result = run_prepared(prepared, database, say=_say(quiet))
    return Results(database, result.runs, result.comparison, result.reference)


def load(db: str | os.PathLike[str] | None = None) -> "Store":
    """The runs stored in a results database (read-only; nothing is created): `bench results` as objects."""
    return Store(db)


class Store:
    """A results database, read: its runs, their scores, and any comparison in it as `Results`."""

    def __init__(self, db: str | os.PathLike[str] | None = None):
        from results_db import ResultsDB

        self.db = ResultsDB(_db_text(db), read_only=True)  # a read never changes the file

    def runs(self) -> Any:
        """Every run row (a 'running' row whose process is gone shows as 'stale')."""
        from results_db.liveness import with_liveness

        return with_liveness(self.db.runs())

    def scores(self, run_ids: int | Iterable[int] | None = None) -> Any:
        """One row per score of these runs (a run id, or any list, tuple, set or array of them; all when None), as
        `Results.to_pandas()`. A run id not in the database is a ConfigError."""
        from bench.report.results_file import scores_frame

        runs = self.db.runs()
        if run_ids is None:
            return scores_frame(self.db, runs, runs["id"].tolist())
        several = not isinstance(run_ids, (str, bytes, numbers.Number)) and isinstance(run_ids, Iterable)
        ids = [self._run_id(i) for i in (run_ids if several else [run_ids])]
        missing = sorted(set(ids) - set(int(i) for i in runs["id"]))
        if missing:
            from bench.runtime.errors import ConfigError

            raise ConfigError(f"no run {', '.join(map(str, missing))} in {self.db.location.shown}; Store.runs() lists "
                              "the runs it holds")  # fmt: skip
        return scores_frame(self.db, runs, ids)

    def citations(self, run_ids: int | Iterable[int] | None = None) -> str:
        """The BibTeX of what the tables of these runs (all when None) rest on, as `bench results --cite` prints it."""
        from bench.report.citations import for_runs, render

        ids = self.scores(run_ids)["run_id"].unique().tolist() if run_ids is not None else self.db.runs()["id"].tolist()
        return render(for_runs(self.db, ids))

    @staticmethod
    def _run_id(value: Any) -> int:
        """A run id: any whole number (numpy's too), never a bool (True is not run 1)."""
        if isinstance(value, numbers.Integral) and not isinstance(value, bool) and type(value).__name__ != "bool_":
            return int(value)
        from bench.runtime.errors import ConfigError

        raise ConfigError(f"run id {value!r} ({type(value).__name__}): give a whole number, e.g. 3")

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
        a run id belongs to (a whole number, numpy's too), or a comparison key or its prefix (a str)."""
        from bench.report.pooling import comparison_of, comparison_runs
        from bench.runtime.errors import ConfigError

        runs = self.db.runs()
        if runs.empty:
            raise ConfigError(f"no runs in {self.db.location.shown}")
        rows = runs.sort_values("id").to_dict("records")
        if key is None:
            found = comparison_of(rows[-1])
        elif not isinstance(key, str):
            key = self._run_id(key)  # a bool or anything but a whole number: refused
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
