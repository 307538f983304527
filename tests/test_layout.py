"""Room sizes the project guide sets: no function in the packages longer than 100 lines, the encoder module at most
450 lines, and no encoder method that asks which backend it has (the backend is chosen once, at construction).
And one writer of Run.runtime: `results_db.store.ResultsDB.merge_runtime`."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("bench", "methods", "leaderboard", "results_db")
MAX_FUNCTION_LINES = 100
MAX_ENCODER_LINES = 450


def long_functions(source: str, limit: int = MAX_FUNCTION_LINES) -> list[tuple[str, int]]:
    """(name, lines) of every function or method in `source` longer than `limit` lines (decorators excluded)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            if length > limit:
                out.append((node.name, length))
    return out


def backend_name_checks(source: str, cls: str = "Encoder") -> list[str]:
    """'method:line' of every comparison in class `cls` between a string and a backend name (`x.backend`,
    `backend`, `x.engine.name`): dispatch by name instead of through the backend object."""

    def is_backend_name(node: ast.AST) -> bool:
        if isinstance(node, ast.Name):
            return node.id == "backend"
        if isinstance(node, ast.Attribute):
            return node.attr == "backend" or (node.attr == "name" and "engine" in ast.unparse(node.value))
        return False

    def is_text(node: ast.AST) -> bool:
        if isinstance(node, ast.Constant):
            return isinstance(node.value, str)
        return isinstance(node, (ast.Tuple, ast.List, ast.Set)) and any(is_text(e) for e in node.elts)

    found = []
    for klass in ast.walk(ast.parse(source)):
        if not (isinstance(klass, ast.ClassDef) and klass.name == cls):
            continue
        for method in klass.body:
            if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(method):
                if isinstance(node, ast.Compare):
                    sides = [node.left, *node.comparators]
                    if any(map(is_backend_name, sides)) and any(map(is_text, sides)):
                        found.append(f"{method.name}:{node.lineno}")
    return found


def runtime_assignments(source: str) -> list[int]:
    """Lines that assign to an attribute named `runtime` (`run.runtime = ...`): an ORM edit of Run.runtime."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        lines += [node.lineno for t in targets if isinstance(t, ast.Attribute) and t.attr == "runtime"]
    return lines


def test_the_checks_catch_what_they_look_for():
    body = "\n".join(f"    x = {i}" for i in range(MAX_FUNCTION_LINES))
    assert long_functions(f"def f():\n{body}\n") == [("f", MAX_FUNCTION_LINES + 1)]
    assert long_functions(f"def f():\n{body}\n", limit=MAX_FUNCTION_LINES + 1) == []
    dispatch = (
        "class Encoder:\n"
        "    def _forward(self, batch):\n"
        "        if self.backend == 'onnx':\n"
        "            return 1\n"
        "    def tokens(self):\n"
        "        return self.engine.name in ('torch', 'onnx')\n"
        "    def fine(self):\n"
        "        return self.engine.pooled(1) == 'x' or self.pooling == 'mean'\n"
        "class Other:\n"
        "    def f(self):\n"
        "        return self.backend == 'onnx'\n"
    )
    assert backend_name_checks(dispatch) == ["_forward:3", "tokens:6"]
    assert runtime_assignments("run.runtime = {}\nx = run.runtime\nrun.runtime_seconds = 1\nrun.runtime |= {}\n") == [1, 4]


def test_no_function_is_longer_than_100_lines():
    offenders = [
        f"{path.relative_to(REPO)}:{name} ({length} lines)"
        for package in PACKAGES
        for path in sorted((REPO / package).rglob("*.py"))
        for name, length in long_functions(path.read_text())
    ]
    assert offenders == []


def test_the_encoder_module_stays_small_and_never_dispatches_on_the_backend_name():
    source = (REPO / "bench" / "encode" / "encoder.py").read_text()
    assert len(source.splitlines()) <= MAX_ENCODER_LINES
    assert backend_name_checks(source) == []


def test_run_runtime_is_written_by_one_results_db_function():
    writers = [
        f"{path.relative_to(REPO)}:{line}"
        for package in (*PACKAGES, "lenbench")
        for path in sorted((REPO / package).rglob("*.py"))
        for line in runtime_assignments(path.read_text())
    ]
    store = REPO / "results_db" / "store.py"
    (line,) = runtime_assignments(store.read_text())
    assert writers == [f"{store.relative_to(REPO)}:{line}"]
    (writer,) = [node.name for node in ast.walk(ast.parse(store.read_text()))
                 if isinstance(node, ast.FunctionDef) and node.lineno <= line <= node.end_lineno]  # fmt: skip
    assert writer == "merge_runtime"


MAX_PARAMETERS = 8
# Functions allowed to take more than MAX_PARAMETERS: none (issue 42, item 4: a run's settings travel as one value,
# a TrainJob, EncoderOptions or AttackInput, not parameter by parameter). Keep it empty: pass a value that carries them.
TOO_MANY_PARAMETERS: dict[str, int] = {}


def parameter_counts(source: str) -> dict[str, int]:
    """name -> parameters of every function or method in `source` taking more than MAX_PARAMETERS (self and cls
    not counted; *args and **kwargs not counted)."""
    out = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
            count = len(names) - (names[:1] in (["self"], ["cls"]))
            if count > MAX_PARAMETERS:
                out[node.name] = max(count, out.get(node.name, 0))
    return out


def test_the_parameter_check_counts_what_a_caller_passes():
    source = "def f(a, b, c, d, e, f, g, h, *, i=1): pass\nclass C:\n    def m(self, a, b, c, d, e, f, g, h): pass\n"
    assert parameter_counts(source) == {"f": 9}


def test_no_new_function_takes_more_than_8_parameters():
    found = {}
    for top in PACKAGES:
        for path in sorted((REPO / top).rglob("*.py")):
            for name, count in parameter_counts(path.read_text()).items():
                found[f"{path.relative_to(REPO)}:{name}"] = count
    grown = {k: v for k, v in found.items() if v > TOO_MANY_PARAMETERS.get(k, MAX_PARAMETERS)}
    assert grown == {}, f"more than {MAX_PARAMETERS} parameters (pass a value that carries them): {grown}"
