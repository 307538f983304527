"""Training: the shared trainer every method adapter runs under (SPEC §1), budgets, checkpoints, and the method
protocol and registry (`method.py`, `registry.py`, `hparams.py`).

Owns: turning a backbone, a method adapter, training texts and a budget into a saved encoder folder. Never: reads
evaluation data or scores anything (a learning curve is a callback the caller passes in), never parses CLI options.

Public API:
    from bench.train import Budget, TrainConfig, TrainJob, train, train_method

    budget = Budget.parse("steps=200,seconds=600")           # or Budget(steps=200)
    job = TrainJob(                                           # one training run, carried whole (bench.train.job)
        corpus_texts, budget, TrainConfig(max_len=64, batch_size=16, lr=3e-5, seed=0), "runs/x",
        method="laser3-self", backbone="minilm", db=db, run_id=run_id, resume=False,
        method_overrides={"m_mode": "twice"},
    )
    result = train_method(job)                                # load backbone, build adapter, train, save encoder
    result.encoder_dir, result.consumed.as_dict(), result.stopped_by

    # lower level, with your own model/adapter objects (the job's method and backbone are not needed):
    result = train(adapter, model, tokenizer, TrainJob(texts, budget, TrainConfig(...), out_dir))

An adapter (`bench.train.method.MethodAdapter`) only builds batches and losses; `train` owns AdamW, the linear warm-up/decay schedule,
seeding, clipping, bf16 autocast on CUDA, the progress bar, the DB training log, safetensors checkpoints and
resume, the budget and the non-finite-loss stop. Optional adapter hook: `accepts(text) -> bool` lets the trainer
skip texts the method cannot use (crop: fewer than two chunks) before they take a batch slot.
"""

# The trainer pulls in torch and transformers; importing `bench.train.method` (what a method adapter needs) must
# not, so the names below are resolved on first use.
_LAZY = {
    "BUDGET_KINDS": "bench.train.budget", "Budget": "bench.train.budget", "Consumption": "bench.train.budget",
    "TrainConfig": "bench.train.config", "TrainJob": "bench.train.job", "TrainResult": "bench.train.trainer",
    "load_backbone": "bench.train.backbone", "train": "bench.train.trainer", "train_method": "bench.train.trainer",
}  # fmt: skip

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'bench.train' has no attribute {name!r}")
