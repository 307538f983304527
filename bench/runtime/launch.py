"""Re-launching a command on several local processes: `bench run --nproc N` re-runs the same command under
torch.distributed.run, as torchtune's `tune run --nproc_per_node` does (the re-launched command line loses its
`--nproc`, so it does not re-launch again)."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def relaunch(argv: Sequence[str], nproc: int) -> int:
    """Run `python -m bench ARGV` on `nproc` local processes under torch.distributed.run (torchrun); its exit code.

    torchrun's own errors (a rank that failed, with its exit code or signal) are printed by torchrun itself.
    """
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import get_args_parser, run

    launch = get_args_parser().parse_args(
        ["--standalone", f"--nproc_per_node={nproc}", "--module", "bench", *argv]
    )
    try:
        run(launch)
    except ChildFailedError as exc:
        failures = "; ".join(
            f"rank {f.local_rank}: exit code {f.exitcode}" + (f" ({f.signal_name()})" if f.exitcode < 0 else "")
            for f in exc.failures.values()
        )
        print(f"bench: error: {nproc}-process run failed ({failures}); see the messages above; "
              "continue with --resume", file=sys.stderr)
        return 1
    return 0


def strip_option(argv: Sequence[str], option: str) -> list[str]:
    """argv without `option VALUE` / `option=VALUE` (the re-launched command must not re-launch again)."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg == option:
            skip = True
            continue
        if arg.startswith(option + "="):
            continue
        out.append(arg)
    return out
