"""What every run of one comparison shares (`ComparisonJob`), and how one run's row is found or made under its lease
and its method trained: the steps `bench.experiment.comparison.run_comparison` takes for each (method, seed)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.experiment.progress_lines import stop_reason
from bench.experiment.record import RESUMABLE, command_line, resume_row
from bench.experiment.run_files import finish_trained, new_run_folder
from bench.experiment.run_spec import RunConfigs, RunSpec
from bench.runtime import distributed


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
            finish_trained(self.db, run_id, method, method_spec.paper, model_dir, out_dir,
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
