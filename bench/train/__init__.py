"""The shared trainer every method adapter runs under (SPEC §1), budgets and training corpora.

Public API:
    from bench.train import Budget, TrainConfig, train, train_method

    budget = Budget.parse("steps=200,seconds=600")           # or Budget(steps=200)
    result = train_method(                                    # load backbone, build adapter, train, save encoder
        "laser3-self", backbone="minilm", texts=corpus_texts, budget=budget,
        config=TrainConfig(max_len=64, batch_size=16, lr=3e-5, seed=0), out_dir="runs/x",
        db=db, run_id=run_id, resume=False, method_overrides={"m_mode": "twice"},
    )
    result.encoder_dir, result.consumed.as_dict(), result.stopped_by

    # lower level, with your own model/adapter objects:
    result = train(adapter, model, tokenizer, texts, budget, TrainConfig(...), out_dir, db=None, run_id=None)

An adapter (`bench.method.MethodAdapter`) only builds batches and losses; `train` owns AdamW, the linear warm-up/decay schedule,
seeding, clipping, bf16 autocast on CUDA, the progress bar, the DB training log, safetensors checkpoints and
resume, the budget and the non-finite-loss stop. Optional adapter hook: `accepts(text) -> bool` lets the trainer
skip texts the method cannot use (crop: fewer than two chunks) before they take a batch slot.
"""

from bench.train.budget import BUDGET_KINDS, Budget, Consumption
from bench.train.trainer import TrainConfig, TrainResult, load_backbone, train, train_method

__all__ = [
    "BUDGET_KINDS",
    "Budget",
    "Consumption",
    "TrainConfig",
    "TrainResult",
    "load_backbone",
    "train",
    "train_method",
]
