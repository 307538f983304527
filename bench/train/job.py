"""`TrainJob`: one training run as one value, carried whole from the caller (`bench run`'s comparison, the estimate's
calibration, a benchmark or a test) to `train_method`, `train` and the `TrainingRecipe` that runs it.

What to train (`method` on `backbone`, for `train_method`; `train` is handed the adapter, model and tokenizer built),
on what and for how long (`texts`, `budget`, `config`), where it goes (`out_dir`, the encoder folder in it) and what
records it (`db`/`run_id`, `tracker`, `eval_hook`). Importing this module loads neither torch nor transformers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the trainer's types; their modules are imported where training runs
    from bench.train.budget import Budget
    from bench.train.config import TrainConfig
    from bench.train.eval_hook import EvalHook
    from bench.train.method import MethodSpec


@dataclass(frozen=True)
class TrainJob:
    """One training run (see the module docstring): the corpus, budget, shared settings and output folder by
    position or name, everything else by name, with the defaults of a plain run."""

    texts: Sequence[str]
    budget: Budget
    config: TrainConfig
    out_dir: str | Path
    _: KW_ONLY
    # what `train_method` builds: a registered method name or the MethodSpec already looked up, and the backbone
    method: str | MethodSpec | None = None
    backbone: str | None = None
    # the method's config (else the paper defaults with `method_overrides`, names checked by the method)
    method_config: Any = None
    method_overrides: dict[str, Any] | None = None
    backbone_cache_dir: str | Path | None = None  # where a generated (random) backbone is written
    allow_pickle: bool = False  # also load a backbone's pickle-only weights
    db: Any = None  # results_db.ResultsDB: the training log's rows go to run `run_id`
    run_id: int | None = None
    resume: bool = False  # continue from the newest checkpoint in out_dir (without it, one there is refused)
    # the trained encoder's folder (relative to out_dir, or absolute; None: not saved)
    save_encoder_dir: str | Path | None = "encoder"
    eval_hook: EvalHook | None = None  # scores the encoder during training (learning curves)
    tracker: Any = None  # bench.runtime.trackers.Trackers (rank 0): each logged step's loss, lr and rate
    scoring_max_len: int | None = None  # the max_len the saved folder declares for scoring; None: the training max_len
    # the batch one process trains on, as the caller already checked it (`per_rank_batch`); None: checked by train
    rank_batch: int | None = None
