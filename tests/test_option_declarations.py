"""Each option of `bench run`, `bench eval`, `bench claim` and `bench sweep` is declared once
(bench.experiment.options), and everything that knows an option comes from that declaration: the parsers, the
Python API's keywords and their checks, the range check, the line that redoes a row, the README's option table."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("bench", "methods", "leaderboard", "results_db", "lenbench")
# the modules that build the parsers of the commands whose options are declared (bench data's --data-dir and
# bench results' --reference are those commands' own options)
DECLARED_PARSERS = {f"bench/commands/{name}.py" for name in ("run", "eval", "claim", "sweep", "common")} | {"bench/cli.py"}


@pytest.fixture
def one_more_option(monkeypatch):
    """One new option, declared in one place: a setting the suites read, for `bench run` and `bench eval`, in the
    config hash and in the redo line, with a range."""
    from bench.experiment import options
    from bench.experiment.option_types import Range

    added = options.Option("probe_depth", "how deep the probe reads (a test's option)", (options.RUN, options.EVAL), None,
                           int, range=Range(1, 9, "3"), field="suite_options", identity=True, redo=options.CHANGED)  # fmt: skip
    monkeypatch.setattr(options, "OPTIONS", (*options.OPTIONS, added))
    return added


def _help(command: str, capsys) -> str:
    from bench.cli import main

    with pytest.raises(SystemExit):
        main([command, "--help"])
    return capsys.readouterr().out


def test_an_option_declared_once_reaches_both_parsers_the_api_the_range_check_the_hash_and_the_redo_line(
        one_more_option, monkeypatch, tmp_path, capsys):  # fmt: skip
    import lenbench
    from bench.cli import main
    from bench.experiment import comparison
    from bench.experiment.eval_spec import EvalOptions, EvalSpec
    from bench.experiment.run_spec import RunSpec
    from bench.runtime.errors import ConfigError

    for command in ("run", "eval"):  # the parsers
        shown = _help(command, capsys)
        assert "--probe-depth PROBE_DEPTH" in shown and "how deep the probe reads" in shown
    # the range check, on the command line (the flag) and in the API (the keyword)
    assert main(["run", "--suite", "heldout", "--probe-depth", "0", "--db", str(tmp_path / "r.sqlite")]) == 2
    assert "--probe-depth 0: must be >= 1 and <= 9" in capsys.readouterr().err
    for call in (lambda: lenbench.run(methods="simcse", suites="heldout", probe_depth=0, db=tmp_path / "r.sqlite"),
                 lambda: lenbench.evaluate("bm25", "heldout", probe_depth=10, db=tmp_path / "r.sqlite")):
        with pytest.raises(ConfigError, match=r"probe_depth=(0|10): must be >= 1 and <= 9; e\.g\. probe_depth=3"):
            call()
    assert not (tmp_path / "r.sqlite").exists()
    # a keyword of lenbench.run: it reaches the spec the job is given, its hash and its redo line
    seen = {}
    monkeypatch.setattr(comparison, "run_comparison", lambda spec, db=None, **kw: seen.setdefault("spec", spec) and
                        comparison.ComparisonResult("c", {}, {}, db=db))  # fmt: skip
    lenbench.run(methods="simcse", suites="heldout", probe_depth=4, db=tmp_path / "r.sqlite", quiet=True)
    spec = seen["spec"]
    assert spec.suite_options == {"probe_depth": 4} and spec.eval_settings().options == {"probe_depth": 4}
    assert "--probe-depth 4" in spec.reproduce_command("simcse", True)
    plain = RunSpec.from_options({"method": "simcse", "suite": ["heldout"]})
    assert "--probe-depth" not in plain.reproduce_command("simcse", True)
    assert spec.configs(100).per_method["simcse"][1] != plain.configs(100).per_method["simcse"][1]
    # a keyword of lenbench.evaluate: in the evaluation's settings and its config
    evaluation = EvalSpec.from_options(EvalOptions.from_options({"model": "bm25", "suite": ["heldout"], "probe_depth": 2}))
    assert evaluation.settings.options == {"probe_depth": 2} and evaluation.config({})["probe_depth"] == 2


def test_api_errors_name_the_keyword_never_a_flag(tmp_path):
    import lenbench
    from bench.runtime.errors import ConfigError

    for options, said in (({"limit": 0}, "limit=0"), ({"batch_size": 0}, "batch_size=0"), ({"lr": float("nan")}, "lr=nan"),
                          ({"device": "cpu:1"}, "device='cpu:1'"), ({"pooling": "max"}, "pooling='max'"),
                          ({"max_length": 32}, "'max_length' is not a `bench run` option; did you mean 'max_len'")):  # fmt: skip
        with pytest.raises(ConfigError) as exc:
            lenbench.run(methods="simcse", suites="heldout", db=tmp_path / "r.sqlite", quiet=True, **options)
        message = str(exc.value)
        assert message.startswith(said) and "argument" not in message and f"--{said.split('=')[0]}" not in message
    with pytest.raises(ConfigError, match=r"^limit=0: 0 is not positive") as exc:
        lenbench.evaluate("bm25", "heldout", limit=0, db=tmp_path / "r.sqlite")
    assert "--limit" not in str(exc.value)


def test_every_declared_option_fills_a_field_of_its_spec_and_the_settings_are_nested_whole():
    """Each option's field exists on its command's spec (its own attribute, a field of the TrainConfig or the
    EncoderOptions it holds, or a suite option), every own field is an option, and a value set through the option
    reads back the same; no flat copy of the encoder's or the trainer's settings, no rebuild method."""
    from dataclasses import fields

    from bench.encode.options import EncoderOptions
    from bench.experiment.eval_spec import EvalOptions
    from bench.experiment.options import options_of
    from bench.experiment.run_spec import RunSpec
    from bench.train.config import TrainConfig

    nested = {"train": TrainConfig, "encoder": EncoderOptions}
    for command, spec in (("run", RunSpec), ("eval", EvalOptions)):
        own = {f.name for f in fields(spec)}
        for name, option in options_of(command).items():
            head, _, rest = option.paths()[0].lstrip("!").partition(".")
            assert head in own, (command, name)
            if rest:
                assert rest in {f.name for f in fields(nested[head])}, (command, name)
        declared = {o.paths()[0].lstrip("!").partition(".")[0] for o in options_of(command).values()}
        assert own - declared <= {"train", "encoder", "suite_options"} and "encoder" in own
        assert not hasattr(spec, "encoder_options") and not any(n.startswith("eval_") and n != "eval_every" for n in own)
    spec = RunSpec.from_options({"max_len": 32, "eval_max_len": 96, "precision": "bf16", "no_cache": True, "device": "cpu"})
    assert (spec.train.max_len, spec.encoder.max_len, spec.train.precision, spec.encoder.precision) == (32, 96, "bf16", "bf16")
    assert spec.encoder.use_cache is False and spec.train.device == spec.encoder.device == "cpu"
    values = spec.option_values()
    assert (values["max_len"], values["eval_max_len"], values["no_cache"]) == (32, 96, True)
    assert RunSpec.from_values(values) == spec


# ------------------------------------------------------------------------------ written once (ast)
def _sources():
    for top in PACKAGES:
        for path in sorted((REPO / top).rglob("*.py")):
            yield str(path.relative_to(REPO)), ast.parse(path.read_text())


def _name(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def test_each_default_and_range_is_written_once_in_the_source():
    """A declared option's range is built only in its declaration; no parser argument, spec field or other
    declaration writes a declared option's default again: the command modules call no add_argument for a declared
    flag, the specs' fields are `_opt(name)`, and a default owned by EncoderOptions or TrainConfig is read there
    (the declaration names it, `E.max_len`), not written as a literal a second time."""
    from bench.experiment.options import OPTIONS

    flags = {o.flag for o in OPTIONS}
    names = {o.name for o in OPTIONS}
    offences, literal_defaults = [], {}
    for where, tree in _sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _name(node.func) == "Range" and where not in (
                    "bench/experiment/options.py", "bench/experiment/option_ranges.py"):  # fmt: skip
                offences.append(f"{where}:{node.lineno}: a Range outside the declarations")
            if isinstance(node, ast.Call) and _name(node.func) == "add_argument" and node.args and where in DECLARED_PARSERS:
                first = node.args[0]
                if isinstance(first, ast.Constant) and first.value in flags:
                    offences.append(f"{where}:{node.lineno}: {first.value} added by hand, not from its declaration")
            if isinstance(node, ast.Call) and _name(node.func) == "Option" and len(node.args) >= 4:
                default = node.args[3]
                if isinstance(default, ast.Constant) and default.value not in (None, False, "", 0, 1):
                    literal_defaults.setdefault((node.args[0].value, default.value), []).append(where)
            if isinstance(node, ast.ClassDef) and node.name in ("RunSpec", "EvalOptions", "EncoderOptions", "TrainConfig"):
                for item in node.body:
                    if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.value is not None:
                        value = item.value
                        if node.name in ("RunSpec", "EvalOptions") and item.target.id in names:
                            if not (isinstance(value, ast.Call) and _name(value.func) == "_opt"):
                                offences.append(f"{where}:{item.lineno}: {node.name}.{item.target.id} written, not declared")
                        elif isinstance(value, ast.Constant) and value.value not in (None, False, "", 0, 1):
                            literal_defaults.setdefault((item.target.id, value.value), []).append(where)
    offences += [f"{name}={value!r} written in {places}" for (name, value), places in literal_defaults.items()
                 if len(places) > 1]  # fmt: skip
    assert offences == []


def test_the_check_sees_a_restated_default_and_a_hand_written_flag(tmp_path, monkeypatch):
    """The ast check above can fail: an extra add_argument for a declared flag, or a range built elsewhere."""
    import tests.test_option_declarations as me

    planted = ast.parse('p.add_argument("--max-len", type=int, default=64)\nR = Range(1, 2, "1")\n')
    monkeypatch.setattr(me, "_sources", lambda: iter([("bench/commands/planted.py", planted)]))
    with pytest.raises(AssertionError, match="added by hand.*a Range outside|a Range outside"):
        me.test_each_default_and_range_is_written_once_in_the_source()


def test_the_cli_reference_is_generated_from_the_declarations():
    """docs/reference/cli.md is rendered at build time from the parsers (docs/hooks.py): every declared option of
    every command is there with its help, and nothing is typed by hand."""
    import importlib.util

    from bench.experiment.options import OPTIONS

    page = (REPO / "docs" / "reference" / "cli.md").read_text()
    assert "<!-- generated: cli -->" in page and "| `--" not in page  # the table is the hook's, not the page's
    spec = importlib.util.spec_from_file_location("docs_hooks", REPO / "docs" / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    shown = hooks.cli()
    for opt in OPTIONS:
        if opt.hidden:
            continue
        for command in opt.commands:
            section = shown.split(f"## `bench {command}`", 1)[1].split("\n## ", 1)[0]
            assert f"`{opt.flag}" in section, f"bench {command} {opt.flag} is missing from the CLI reference"
            assert opt.help.split("{", 1)[0][:40].replace("|", "\\|") in section, (command, opt.flag)
