"""One-way package dependencies: the harness (`bench/`) never imports the method implementations (`methods/`);
built-in methods reach the registry only through the `lenbench.methods` entry-point group, as plug-ins do. Every
import points down the stages of the data flow (LAYERS), no module imports itself back through others, and the
score records and attacks load without the database layer."""

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


# ------------------------------------------------------------------------------ layers and cycles
# The stages of the data flow, lowest first (bench/__init__.py says what each owns). A module may import modules of
# its own package and of lower layers only; two packages in one layer never import each other. Imports inside
# functions and under TYPE_CHECKING count: they are edges a reader has to follow too.
LAYERS: list[tuple[str, ...]] = [
    ("bench.environment",),  # the one checked reader of $LENBENCH_* variables, which the database reads too
    ("results_db",),
    ("bench.runtime",),
    ("bench.data",),
    ("bench.encode",),
    ("bench.train", "bench.evaluate"),
    ("methods",),  # plug-ins over the method protocol; `bench` never imports them (above)
    ("bench.report",),
    ("leaderboard",),
    ("bench.experiment",),
    ("bench.sweep",),
    ("bench.claim",),  # a claim's runs are sweep points
    ("bench.commands",),
    ("bench.cli",),
    ("bench.__main__",),
    ("lenbench",),  # the Python API: the commands' jobs as functions, on the same specs (never the parser)
]
PACKAGES = ("bench", "methods", "leaderboard", "results_db", "lenbench")


def module_files() -> dict[str, Path]:
    """Module name -> source file, for every module of the project's packages."""
    out = {}
    for top in PACKAGES:
        for path in sorted((REPO / top).rglob("*.py")):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def import_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports (relative imports resolved; `from m import name` is an edge to
    m.name when that is a module, else to m)."""
    files = module_files()

    def known(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(parent + ([node.module] if node.module else []))
                for alias in node.names:  # `from package import submodule` is an edge to the submodule only
                    sub = f"{base}.{alias.name}"
                    names.add(sub if sub in files else base)
        graph[module] = {t for t in map(known, names) if t and t != module}
    return graph


def layer_of(module: str) -> tuple[int, str]:
    """(layer index, the layer's package the module belongs to); the bare `bench` package is below everything."""
    if module == "bench":
        return -1, "bench"
    best = None
    for index, layer in enumerate(LAYERS):
        for prefix in layer:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > len(best[1])):
                best = (index, prefix)
    assert best is not None, f"{module} belongs to no layer: add its package to LAYERS"
    return best


def test_import_graph_resolves_relative_and_nested_imports():
    graph = import_graph()
    assert "bench.encode.pooling" in graph["bench.encode.backends.onnx_export"]  # a module-level import
    assert "bench.encode.st_config" in graph["bench.encode.encoder"]
    assert "bench.experiment.run_spec" in graph["bench.sweep.points"]


def test_every_import_points_down_the_layers():
    offenders = []
    for module, targets in import_graph().items():
        level, package = layer_of(module)
        for target in targets:
            t_level, t_package = layer_of(target)
            if t_level > level or (t_level == level and t_package != package):
                offenders.append(f"{module} -> {target}")
    assert offenders == []


def test_no_import_cycle():
    graph = import_graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert cycles == []


def test_attacks_and_score_records_import_without_the_database_layer():
    """What a suite or an attack needs loads neither SQLAlchemy nor pandas (about a second of import time)."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", "import bench.evaluate.attacks, results_db.records"],
                          capture_output=True, text=True, cwd=REPO)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    imported = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "bench.evaluate.attacks" in imported and "results_db.records" in imported
    assert not {m for m in imported if m.split(".")[0] in ("sqlalchemy", "pandas")}


def test_checking_backbone_options_loads_no_torch():
    """The option checks a command runs before anything else (model folder, max_len within the positions, methods
    the backbone can learn) come from `bench.train.backbone`, which loads neither torch nor transformers."""
    import subprocess
    import sys

    code = ("import sys\n"
            "from bench.train.backbone import check_backbone_lengths, check_backbone_methods, is_generated_backbone\n"
            "for name in ('random-bert-mini', 'minilm', 'org/some-model'):\n"
            "    check_backbone_methods(name, ['simcse', 'mlm'])\n"
            "    check_backbone_lengths(name, {'--max-len': 64, '--eval-max-len': 128})\n"
            "assert is_generated_backbone('random-bert-mini') and not is_generated_backbone('minilm')\n"
            "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))\n")  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_training_settings_are_built_and_checked_without_torch():
    """A run's training settings (`TrainConfig`, bench.train.config), its budget and its options typed as the parser
    would are built and checked without loading torch or transformers: only training itself needs them."""
    import subprocess
    import sys

    code = ("import sys\n"
            "from bench.experiment.run_spec import RunSpec\n"
            "from bench.runtime.errors import ConfigError\n"
            "from dataclasses import replace\n"
            "from bench.train import Budget, TrainConfig\n"
            "spec = RunSpec.from_options({'method': 'simcse', 'max_len': 32, 'batch_size': 8, 'budget': 'steps=5'})\n"
            "cfg = replace(spec.train, seed=3)\n"
            "assert cfg.shared()['max_len'] == 32 and 'device' not in cfg.shared() and Budget.parse(spec.budget).steps == 5\n"
            "try:\n"
            "    TrainConfig(batch_size=1)\n"
            "    raise AssertionError('batch_size 1 accepted')\n"
            "except ConfigError:\n"
            "    pass\n"
            "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))\n")  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def optional_imports(path: Path) -> set[str]:
    """Modules imported under `try:` with an `except ImportError` (used when present, never required)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Try) and any(
            "ImportError" in ast.unparse(h.type or ast.Name("BaseException")) or "ModuleNotFoundError" in ast.unparse(h.type or ast.Name(""))
            for h in node.handlers
        ):
            for inner in node.body:
                for sub in ast.walk(inner):
                    if isinstance(sub, ast.Import):
                        names.update(a.name for a in sub.names)
                    elif isinstance(sub, ast.ImportFrom) and sub.level == 0 and sub.module:
                        names.add(sub.module)
                        names.update(f"{sub.module}.{a.name}" for a in sub.names)
    return names


def test_every_third_party_import_is_a_declared_dependency():
    """What the code imports (anywhere, functions included) is declared in pyproject.toml, by distribution name."""
    import re
    import sys

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = {re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0].lower().replace("_", "-")
                for d in project["dependencies"] + [d for extra in project["optional-dependencies"].values() for d in extra]}  # fmt: skip
    providers = metadata.packages_distributions()
    ours = set(PACKAGES) | {"tests"}
    missing = {}
    for path in [p for top in PACKAGES for p in sorted((REPO / top).rglob("*.py"))]:
        for name in imported_modules(path) - optional_imports(path):
            top = name.split(".")[0]
            if top in ours or top in sys.stdlib_module_names or top == "__future__":
                continue
            # an optional extra that is not installed here is matched by its module name
            dists = {d.lower().replace("_", "-") for d in providers.get(top, [])} or {top.lower().replace("_", "-")}
            if not dists & declared:
                missing.setdefault(top, set()).add(str(path.relative_to(REPO)))
    assert missing == {}


def test_bench_help_and_argument_errors_load_no_heavy_library():
    """`bench --help`, a subcommand's help and a bad option value are answered from the parser alone: building it
    loads none of torch, pandas, SQLAlchemy or transformers (each costs from a tenth of a second to seconds)."""
    import subprocess
    import sys

    code = ("import contextlib, io, sys\n"
            "from bench.cli import main\n"
            "for argv in (['--help'], ['run', '--help'], ['eval', '--help'], ['results', '--help'],\n"
            "             ['run', '--max-len', 'many'], ['nosuchcommand']):\n"
            "    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
            "        try:\n"
            "            main(argv)\n"
            "        except SystemExit as exc:\n"
            "            assert exc.code in (0, 2), (argv, exc.code)\n"
            "print(sorted(m for m in ('torch', 'pandas', 'sqlalchemy', 'transformers') if m in sys.modules))\n")  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
