"""Each suite fact has one home: a suite is declared once (a `SuiteMeta` in bench/evaluate/suites/metadata.py), a
named set's name and members once (`NAMED_SETS` in bench/data/catalog.py), and `ignore_identical_ids` once (the
dataset's catalog entry). Every other module reads them from there; this test fails when one is written again
outside its declaration: three suite names in one literal (a suite table), a named set's name, three of its members
in a list, tuple or set, two of the flagged datasets in one, another `SuiteMeta(...)` or an
`ignore_identical_ids=True`. (A dict with one value per dataset, such as the md5 of each BEIR download, states
that value, not a set's membership.)"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("bench", "leaderboard", "methods", "results_db")
HOMES = {"bench/data/catalog.py", "bench/evaluate/suites/metadata.py"}


def facts() -> tuple[set[str], dict[str, set[str]], set[str]]:
    """(built-in suite names, named set -> members, datasets flagged ignore_identical_ids), from their declarations."""
    from bench.data.catalog import CATALOG, NAMED_SETS
    from bench.evaluate.suites.metadata import BUILTIN

    return set(BUILTIN), {n: set(s.members) for n, s in NAMED_SETS.items()}, {n for n, i in CATALOG.items() if i.ignore_identical_ids}


def restated(source: str, where: str) -> list[str]:
    """Where `source` writes a declared fact again."""
    suites, sets, flagged = facts()
    out = []
    for node in ast.walk(ast.parse(source)):
        line = f"{where}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Constant) and node.value in sets:
            out.append(f"{line}: named set name {node.value!r}")
        if isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict)):
            items = node.keys if isinstance(node, ast.Dict) else node.elts
            strings = {n.value for n in items if isinstance(n, ast.Constant) and isinstance(n.value, str)}
            if len(strings & suites) >= 3:
                out.append(f"{line}: suite names {sorted(strings & suites)}")
            if isinstance(node, ast.Dict):
                continue  # a table with one value per dataset (a download's md5) states that value, not membership
            out += [f"{line}: members of {name}" for name, members in sets.items() if len(strings & members) >= 3]
            if len(strings & flagged) >= 2:
                out.append(f"{line}: datasets with ignore_identical_ids {sorted(strings & flagged)}")
        if isinstance(node, ast.Call):
            func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if func == "SuiteMeta":
                out.append(f"{line}: a suite declared")
            if any(k.arg == "ignore_identical_ids" and isinstance(k.value, ast.Constant) and k.value.value is True
                   for k in node.keywords):  # fmt: skip
                out.append(f"{line}: ignore_identical_ids=True")
    return out


def test_the_check_catches_each_kind_of_restated_fact():
    planted = '''
SUITE_FACTORIES = {"sts": "a:b", "beir": "a:c", "knn": "a:d"}
named = {"beir14": ()}
STS = ("sts12", "sts13", "sts14")
IGNORED = frozenset({"arguana", "quora"})
EXTRA = SuiteMeta("x", "m:f", "acc", "items")
info = DatasetInfo("x", "beir", "beir/x", "", ignore_identical_ids=True)
'''
    found = restated(planted, "planted.py")
    assert sorted(f.split(": ", 1)[1] for f in found) == [
        "a suite declared", "datasets with ignore_identical_ids ['arguana', 'quora']", "ignore_identical_ids=True",
        "members of sts7", "named set name 'beir14'", "suite names ['beir', 'knn', 'sts']"]


def test_suites_named_sets_and_ignore_identical_ids_are_written_only_in_their_declarations():
    offences = []
    for top in PACKAGES:
        for path in sorted((REPO / top).rglob("*.py")):
            where = str(path.relative_to(REPO))
            if where not in HOMES:
                offences += restated(path.read_text(), where)
    assert offences == []


def test_every_reader_gets_the_declared_facts():
    from bench.data.catalog import NAMED_SETS
    from bench.evaluate.suites import parse_suites
    from bench.evaluate.suites.metadata import SUITES, suite_meta
    from bench.sweep.spec import _average_of
    from leaderboard.main_board import SUITE_STANDARDS

    for name, named in NAMED_SETS.items():
        ((suite, _),) = parse_suites(name)
        assert suite.name == named.suite and tuple(suite.datasets()) == named.members  # the factory
        assert _average_of(name, "x") == named.members  # the sweep's average_of
        assert SUITE_STANDARDS[named.suite] == (named.label, named.members)  # the tables' averages
    assert set(SUITES.names()) >= {"sts", "beir", "knn", "mteb", "diag", "heldout", "needle"}
    assert suite_meta("mteb:STS12") is SUITES["mteb"]


def test_encoder_option_values_are_defined_once_and_offered_by_every_parser():
    """`bench eval`, `bench run` and a sweep's RunSpec offer exactly the encoder's pooling, backend and emb-dtype
    values (bench.encode.options) and check --limit with one function."""
    import argparse

    from bench.cli import build_parser
    from bench.encode.options import BACKENDS, EMB_DTYPES, POOLINGS
    from bench.experiment.options import options_of
    from bench.experiment.run_spec import positive_int

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    for command in ("eval", "run"):
        actions = {a.dest: a for a in commands[command]._actions}
        assert (actions["pooling"].choices, actions["backend"].choices, actions["emb_dtype"].choices) == (POOLINGS, BACKENDS, EMB_DTYPES)
        assert actions["limit"].type is positive_int
        declared = options_of(command)
        assert (declared["pooling"].choices, declared["backend"].choices, declared["emb_dtype"].choices) == (POOLINGS, BACKENDS, EMB_DTYPES)
        assert declared["limit"].type is positive_int


def test_the_builtin_fallbacks_name_what_pyproject_declares():
    """The suites and attack families an older install (metadata without the group) still finds are exactly the
    entry points pyproject.toml declares: the fallback cannot drift from the declaration."""
    import tomllib

    from bench.evaluate.attacks.registry import BUILTIN as ATTACKS
    from bench.evaluate.suites.metadata import BUILTIN as SUITES

    groups = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"]
    assert groups["lenbench.suites"] == SUITES and groups["lenbench.attacks"] == ATTACKS


def test_the_builtin_method_fallback_names_what_pyproject_declares():
    """Methods have the same fallback as suites and attacks: exactly the entry points pyproject.toml declares."""
    import tomllib

    from bench.train.registry import BUILTIN

    groups = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"]
    assert groups["lenbench.methods"] == BUILTIN


def test_builtin_methods_resolve_without_their_entry_points_and_an_unknown_one_lists_the_known():
    """An install whose metadata lacks the `lenbench.methods` group (a checkout newer than its `pip install -e .`)
    still finds every built-in method; an unknown name's error lists them."""
    import subprocess
    import sys

    code = (
        "from importlib import metadata\n"
        "real = metadata.entry_points\n"
        "metadata.entry_points = lambda **kw: [] if kw.get('group') == 'lenbench.methods' else real(**kw)\n"
        "from bench.train.registry import get_method\n"
        "print(get_method('simcse').name, get_method('laser3').name, get_method('eda-positive').name)\n"
        "try:\n"
        "    get_method('simcsx')\n"
        "except KeyError as exc:\n"
        "    print(exc)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    resolved, error = proc.stdout.splitlines()
    assert resolved == "simcse laser3-self eda-positive"
    assert error.startswith("unknown method 'simcsx'; known: ")
    known = error.split("known: ", 1)[1]
    assert all(name in known for name in ("vanilla", "simcse", "laser3-self", "mlm", "paser"))


# ------------------------------------------------------------------------------ encoder option defaults
# The defaults of the settings a run's scores depend on, declared once in `EncoderOptions` (bench/encode/options.py):
# setting -> (the names it goes by in code and on the command line, its default). Training has its own max_len and
# batch size (64 and 16), with other defaults, so only these literals under these names count.
ENCODER_SETTINGS = {
    "precision": ("precision", "auto"),
    "evaluation max_len": ("max_len|max-len", 256),
    "evaluation batch size": ("batch_size|batch-size", 64),
}
ENCODER_HOME = "bench/encode/options.py"


def literal_defaults(source: str, where: str) -> list[str]:
    """Where `source` writes the default of an ENCODER_SETTINGS setting as a literal: a function's default argument,
    a class attribute (a dataclass field, also through `field(default=...)` / `option(...)`), a parser's `default=`,
    or a `getattr(obj, name, default)` fallback."""
    import re

    def offence(name: str, value: ast.AST | None, line: int) -> list[str]:
        if not isinstance(value, ast.Constant) or isinstance(value.value, bool):
            return []
        return [f"{where}:{line}: {setting} default {value.value!r} ({name})" for setting, (names, literal)
                in ENCODER_SETTINGS.items() if re.search(names, name) and value.value == literal]  # fmt: skip

    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            positional = a.posonlyargs + a.args
            pairs = [*zip(positional[len(positional) - len(a.defaults):], a.defaults), *zip(a.kwonlyargs, a.kw_defaults)]
            for arg, default in pairs:
                found += offence(arg.arg, default, node.lineno)
        elif isinstance(node, ast.ClassDef):
            for stmt in node.body:
                target = stmt.target if isinstance(stmt, ast.AnnAssign) else (stmt.targets[0] if isinstance(stmt, ast.Assign) else None)
                if not isinstance(target, ast.Name) or stmt.value is None:
                    continue
                value = stmt.value
                if isinstance(value, ast.Call):  # field(default=X), option(X, ...)
                    value = next((k.value for k in value.keywords if k.arg == "default"), value.args[0] if value.args else None)
                found += offence(target.id, value, stmt.lineno)
        elif isinstance(node, ast.Call):
            func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if func == "getattr" and len(node.args) == 3 and isinstance(node.args[1], ast.Constant):
                found += offence(str(node.args[1].value), node.args[2], node.lineno)
            flags = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            dest = [k.value.value for k in node.keywords if k.arg == "dest" and isinstance(k.value, ast.Constant)]
            for keyword in node.keywords:
                if keyword.arg == "default" and (flags or dest):
                    found += offence(" ".join(flags + dest), keyword.value, node.lineno)
    return found


def test_the_default_check_catches_each_place_a_default_is_written():
    planted = '''
def load_model(name, *, max_len=256, precision="auto"):
    pass
class Settings:
    batch_size: int = 64
    eval_max_len: int = _opt(256, int)
    precision: str = field(default="auto")
    max_len: int = 64  # a training max_len: another setting
p.add_argument("--eval-batch-size", type=int, default=64)
p.add_argument("--backend", default="auto")
precision = getattr(args, "precision", "auto")
'''
    found = [f.split(": ", 1)[1] for f in literal_defaults(planted, "planted.py")]
    assert sorted(found) == sorted([
        "evaluation max_len default 256 (max_len)", "precision default 'auto' (precision)",
        "evaluation batch size default 64 (batch_size)", "evaluation max_len default 256 (eval_max_len)",
        "precision default 'auto' (precision)", "evaluation batch size default 64 (--eval-batch-size)",
        "precision default 'auto' (precision)"])


def test_precision_evaluation_max_len_and_batch_size_defaults_are_written_once():
    """Every parser, settings class and loader takes these defaults from EncoderOptions (ENCODER_DEFAULTS)."""
    offences = []
    for top in (*PACKAGES, "lenbench"):
        for path in sorted((REPO / top).rglob("*.py")):
            where = str(path.relative_to(REPO))
            if where != ENCODER_HOME:
                offences += literal_defaults(path.read_text(), where)
    assert offences == []
    home = literal_defaults((REPO / ENCODER_HOME).read_text(), ENCODER_HOME)
    # The evaluation batch size is the device's when none is asked (None; CPU_ROWS on the CPU): no literal 64 anywhere
    assert sorted(f.split(": ", 1)[1].split(" default")[0] for f in home) == sorted(
        s for s in ENCODER_SETTINGS if s != "evaluation batch size")
    from bench.encode.options import CPU_ROWS, ENCODER_DEFAULTS, hashed_batch_size

    assert ENCODER_DEFAULTS.batch_size is None and hashed_batch_size(None) == CPU_ROWS == 64


def test_bench_eval_options_are_eval_options_fields_with_the_same_defaults():
    """`bench eval`'s parser and the Python API's EvalOptions know the same options with the same defaults, and the
    encoder's part of them is EncoderOptions' defaults."""
    from bench.cli import build_parser
    from bench.encode.options import ENCODER_DEFAULTS
    from bench.experiment.eval_spec import EvalOptions

    parsed = vars(build_parser().parse_args(["eval", "--model", "m", "--suite", "sts"]))
    for name in ("func", "command", "verbose", "debug", "argv", "model", "suite", "download"):  # download: $LENBENCH_DOWNLOAD
        parsed.pop(name, None)
    defaults = EvalOptions().option_values()
    assert parsed == {name: defaults[name] for name in parsed}
    assert set(parsed) == set(defaults) - {"model", "suite", "download"}
    assert EvalOptions().encoder == ENCODER_DEFAULTS
