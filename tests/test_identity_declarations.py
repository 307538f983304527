"""Identity is enforced, not documented: every option of `bench run` and `bench eval` is changed in turn from a base
command, and the result's identity (the config hashes of the rows it would write) must change exactly when the
option is declared `identity=True` (bench.experiment.options). A declaration that says an option changes results
when it does not, or one that leaves out an option that does, fails here, naming the option."""

from __future__ import annotations

from typing import Any

import pytest

from bench.experiment.command_options import options_of
from bench.experiment.eval_spec import EvalOptions, EvalSpec
from bench.experiment.identity import resolved_precisions
from bench.experiment.option_types import FLAG
from bench.experiment.run_spec import RunSpec

BASE: dict[str, dict[str, Any]] = {
    "run": {"method": "simcse", "suite": ["sts:stsb@elong,pad"]},
    "eval": {"model": "minilm", "suite": ["sts:stsb@elong,pad"]},
}
# A valid value other than the default, where the option's type, choices or default alone do not give one.
OTHER: dict[str, Any] = {
    "method": "esimcse", "suite": ["sts:sickr@elong,pad"], "model": "bm25", "backbone": "bert", "budget": "steps=61",
    "corpus": "other.jsonl", "hp": ["simcse.temperature=0.1"], "seeds": "0,1", "elong": "4", "attack": ["pad=start-2"],
    "needle_lengths": "64,128", "data_dir": "/tmp/elsewhere", "device": "cpu", "reference": "vanilla",
    "curve_suite": "sts:stsb", "out": "elsewhere", "report_to": "csv", "sweep": "s", "sweep_point": "p",
    "db": "other.sqlite", "precision": "bf16", "pooling": "cls",
}


def other_value(option: Any) -> Any:
    if option.name in OTHER:
        return OTHER[option.name]
    if option.type is FLAG:
        return not option.default
    if option.choices:
        return next(c for c in option.choices if c != option.default)
    if isinstance(option.default, float):
        return option.default * 2
    if isinstance(option.default, int):
        return option.default + 8 if option.default else 2
    return 32  # a count whose default is None (limit, corpus_limit, batch sizes, eval_every...)


def run_identities(values: dict[str, Any]) -> set[str]:
    """The config hashes of every row `bench run` would write with these options."""
    return {h for _, h in RunSpec.from_options(values).configs(100).per_run.values()}


def eval_identity(values: dict[str, Any]) -> str:
    """The config hash of the row `bench eval` would write, the model describing itself as it would load."""
    options = EvalOptions.from_options(values)
    precision, _ = resolved_precisions(options.encoder)
    describe = {"pooling": options.encoder.pooling or "mean", "precision": precision, "fingerprint": "weights"}
    return EvalSpec.from_options(options).config_hash(describe)


def changes_identity(command: str, name: str) -> bool:
    option = options_of(command)[name]
    changed = {**BASE[command], name: other_value(option)}
    if command == "run":  # a new result is a row whose hash no row of the base command has (--no-baseline only drops one)
        return bool(run_identities(changed) - run_identities(BASE[command]))
    return eval_identity(changed) != eval_identity(BASE[command])


CASES = [(command, name) for command in ("run", "eval") for name in options_of(command)]


@pytest.mark.parametrize("command, name", CASES, ids=[f"{c}-{n}" for c, n in CASES])
def test_an_option_changes_the_identity_exactly_when_declared(command, name):
    declared = options_of(command)[name].identity
    assert changes_identity(command, name) == declared, (
        f"bench {command} --{name.replace('_', '-')} is declared identity={declared}, but changing it "
        f"{'changes' if not declared else 'does not change'} the config hash"
    )


def test_a_wrong_declaration_is_caught(monkeypatch):
    """The check sees both kinds of mistake: an option that changes results declared as not doing so, and the reverse."""
    import copy

    import bench.experiment.command_options as command_options

    real = command_options.options_of

    def flipped(command: str) -> dict[str, Any]:
        known = dict(real(command))
        for name in ("lr", "out"):
            if name in known:
                wrong = copy.copy(known[name])
                object.__setattr__(wrong, "identity", not wrong.identity)  # frozen: a copy declared the other way
                known[name] = wrong
        return known

    monkeypatch.setattr(f"{__name__}.options_of", flipped)
    for name in ("lr", "out"):
        with pytest.raises(AssertionError, match=f"--{name} is declared identity"):
            test_an_option_changes_the_identity_exactly_when_declared("run", name)
