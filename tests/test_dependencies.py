"""One-way package dependencies: the harness (`bench/`) never imports the method implementations (`methods/`);
built-in methods reach the registry only through the `lenbench.methods` entry-point group, as plug-ins do."""

from __future__ import annotations

import ast
import tomllib
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def imported_modules(path: Path) -> set[str]:
    """Absolute module names a source file imports (anywhere in it, functions included)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_imported_modules_sees_nested_and_from_imports(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("import os\ndef f():\n    from methods import get_method\n    import methods.simcse as s\n")
    assert {"os", "methods", "methods.get_method", "methods.simcse"} <= imported_modules(src)


def test_no_module_under_bench_imports_methods():
    offenders = {
        str(path.relative_to(REPO)): sorted(m for m in imported_modules(path) if m == "methods" or m.startswith("methods."))
        for path in sorted((REPO / "bench").rglob("*.py"))
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_builtin_methods_register_through_the_entry_point_group():
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"]["lenbench.methods"]
    installed = {ep.name: ep.value for ep in metadata.entry_points(group="lenbench.methods")}
    stale = {k: v for k, v in declared.items() if installed.get(k) != v}
    assert not stale, f"installed metadata is stale, run `pip install --no-deps -e .`: {stale}"

    from bench.train.registry import all_methods, get_method

    assert {spec.name for spec in all_methods()} >= set(declared)
    for name, value in declared.items():
        module, _, attr = value.partition(":")
        assert get_method(name) is getattr(__import__(module, fromlist=[attr]), attr)
