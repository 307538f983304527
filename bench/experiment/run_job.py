"""`bench run` from a RunSpec, written once for the command line (bench/commands/run.py) and the Python API
(`lenbench.run`): the preset filled in, the spec checked once before any process starts or row is written
(`prepare_run`), then, in each process, the device and precision resolved and recorded and the comparison job run
(`run_prepared`).

    prepared = prepare_run(RunSpec.from_options({"method": "simcse", "budget": "steps=5"}))
    result = run_prepared(prepared, say=print)
    print(result.report())
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from bench.experiment.run_spec import RunSpec
from bench.runtime import distributed


@dataclass
class PreparedRun:
    """A checked `bench run`: the spec with its preset filled in, and what the checks found."""

    spec: RunSpec
    preset_options: list[str]  # the options the preset set (they were at their defaults)
    checked: tuple[Any, list[Any], str | None]  # (suites, located datasets, reference) from `check_spec`
    per_rank_batch: int  # --batch-size over the processes that will train

    def preset_line(self) -> str | None:
        """'preset scratch: --method crop,simcse, ...' when a preset filled options in, else None."""
        if not self.preset_options:
            return None
        values = self.spec.option_values()
        shown = ((k, values[k]) for k in self.preset_options)
        return f"preset {self.spec.preset}: " + ", ".join(
            f"--{k.replace('_', '-')} {'+'.join(v) if isinstance(v, list) else v}" for k, v in shown)


def with_preset(spec: RunSpec) -> tuple[RunSpec, list[str]]:
    """A copy of `spec` with its preset's values where an option is at its default, and the options it set."""
    from bench.experiment.presets import apply_preset

    values = spec.option_values()
    set_here = apply_preset(values, RunSpec().option_values())
    return (spec.from_values(values) if set_here else spec), set_here


def prepare_run(spec: RunSpec, world: int | None = None) -> PreparedRun:
    """The preset applied and every check of `bench run` made, once, before any process starts or row is written:
    the settings, reference, evaluation data and trackers (`check_spec`) and the per-process batch (`world`
    processes; default: this launch's)."""
    from bench.experiment.comparison import check_spec
    from bench.train.backbone_object import with_backbone_folder
    from bench.train.trainer import per_rank_batch

    spec, preset_options = with_preset(spec)
    spec = with_backbone_folder(spec)  # --backbone file.py:NAME: the object's folder, saved once
    checked = check_spec(spec)
    rank_batch = per_rank_batch(spec.train.batch_size, world or distributed.env_world_size())
    return PreparedRun(spec, preset_options, checked, rank_batch)


def run_record(prepared: PreparedRun) -> dict[str, Any]:
    """Run.runtime of this process: world size, per-process batch, and the device, precision and attention kernels
    as they run here, `auto` resolved from the options as given (bench.encode.auto.resolve_auto: the training
    precision is the autocast's, bf16 on CUDA, not the evaluation's fp16)."""
    from bench.encode.auto import resolve_auto

    encoder = prepared.spec.encoder
    auto = resolve_auto(encoder.device, encoder.precision, encoder.backend)
    return {**distributed.describe(per_rank_batch=prepared.per_rank_batch), **auto.runtime()}


def run_prepared(prepared: PreparedRun, db: Any = None, *, say: Callable[..., None] = print,
                 device: str | None = None) -> Any:  # fmt: skip
    """The comparison job (bench.experiment.comparison.run_comparison) of a prepared run in this process: `device`
    is this process's (a torchrun rank's), `say` where every message goes. Returns its ComparisonResult."""
    from bench.experiment.comparison import run_comparison

    if device is not None:
        prepared = replace(prepared, spec=prepared.spec.with_options(device=device))
    line = prepared.preset_line()
    if line:
        say(line)
    return run_comparison(prepared.spec, db, say=say, runtime=run_record(prepared), checked=prepared.checked)
