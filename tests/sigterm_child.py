"""`python tests/sigterm_child.py BENCH-ARGS...`: `bench BENCH-ARGS` with one phase of the job made to wait there
(HANG_PHASE), after touching the file HANG_READY, so a test can send a signal in that phase. Not a test module.

loading: the backbone's weights; tokenising: the corpus preparation, its pool workers stuck; training: every step
(slowed so the run is still training); encoding: the evaluation's encoder; searching: the retrieval search;
writing: the scores' commit. Any other phase (none): the command as it is."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _arrive() -> None:
    Path(os.environ["HANG_READY"]).touch()


def _pause_then(original):
    def paused(*args, **kwargs):
        _arrive()
        time.sleep(600)  # the signal arrives here
        return original(*args, **kwargs)

    return paused


def sleep_chunk(chunk):
    """A pool worker that never comes back (a deadlocked tokenizer, as far as the parent can tell)."""
    _arrive()
    time.sleep(3600)
    return chunk


def install(phase: str) -> None:
    if phase == "loading":
        from bench.encode import loading

        loading.load_transformer = _pause_then(loading.load_transformer)
    elif phase == "tokenising":
        from bench.runtime import pools
        from tests.sigterm_child import sleep_chunk as importable  # workers import it by this name (not __main__)

        original = pools.WorkerPool.map

        def stuck(self, fn, chunks, local=None, stall=None):
            return original(self, importable, chunks, local=local, stall=stall)

        pools.WorkerPool.map = stuck
    elif phase == "training":
        from bench.train import trainer

        original_step = trainer.TrainingRecipe.step

        def slow_step(self, *args, **kwargs):
            original_step(self, *args, **kwargs)
            _arrive()
            time.sleep(0.2)

        trainer.TrainingRecipe.step = slow_step
    elif phase == "encoding":
        from bench.encode.encoder import Encoder

        Encoder.encode = _pause_then(Encoder.encode)
    elif phase == "searching":
        from bench.evaluate.suites import retrieval

        retrieval.exact_search = _pause_then(retrieval.exact_search)
    elif phase == "writing":
        from results_db.store import ResultsDB

        ResultsDB.add_scores = _pause_then(ResultsDB.add_scores)


if __name__ == "__main__":
    import faulthandler
    import signal

    dump = open(os.environ.get("HANG_STACKS", os.devnull), "w")  # noqa: SIM115 - open until the process ends
    faulthandler.register(signal.SIGUSR1, file=dump, all_threads=True)  # a test that finds it still there asks where
    sys.path.insert(0, str(REPO))
    install(os.environ.get("HANG_PHASE", "none"))
    from bench.cli import main

    sys.argv = ["bench", *sys.argv[1:]]
    sys.exit(main())  # as the `bench` command, not a call from a script
