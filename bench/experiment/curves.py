"""Learning curves of a comparison: --eval-every/--curve-suite/--curve-limit checked and recorded in each trained
row's config, and the trainer's hook that scores them."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from bench.experiment.run_spec import RunConfigs, RunSpec
from bench.runtime.errors import ConfigError


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
