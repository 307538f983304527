"""The one registry type (`bench.runtime.plugins.Registry`) behind methods, attack families and suites: aliases,
lazy `module:object` built-ins, entry points, a type check, freeze; plug-in names are slugs, and a plug-in never
replaces a built-in (it is refused with a warning naming its entry point).

Plug-ins here are a distribution written by hand into a temporary folder (a .dist-info with entry_points.txt beside
its module) and put on sys.path: what `pip install` would leave, without pip."""

from __future__ import annotations

import logging
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench.runtime.plugins import Registry, RegistrationRefused, is_slug


@dataclass(frozen=True)
class Thing:
    name: str
    aliases: tuple[str, ...] = ()


LAZY_THING = Thing("lazy-one", aliases=("lz",))
NOT_A_THING = object()


def test_slugs():
    assert all(is_slug(n) for n in ("simcse", "laser3-self", "cocodr-pt", "len", "my_method2", "a" * 64))
    assert not any(is_slug(n) for n in ("../../../../tmp/x", "a/b", "..", "", "Simcse", "-x", "x-", "a--b", "x y",
                                        "<b>x</b>", "a" * 65, "ünï", None, 3))  # fmt: skip


def test_registry_aliases_lazy_entries_type_check_and_freeze():
    reg: Registry[Thing] = Registry("thing", Thing)
    one = reg.register(Thing("one", aliases=("uno",)))
    assert reg.get("uno") is one and reg.register(one) is one  # the same object again: a no-op
    reg.add_lazy("lazy-one", f"{__name__}:LAZY_THING")
    assert reg.names() == ["lazy-one", "one"] and reg.get("lazy-one") is LAZY_THING and reg.get("lz") is LAZY_THING
    assert reg.all_names() == ["lazy-one", "lz", "one", "uno"] and reg.is_builtin("lz") and not reg.is_builtin("one")
    with pytest.raises(RegistrationRefused, match="'one' is already a registered thing"):
        reg.register(Thing("one"))
    with pytest.raises(RegistrationRefused, match="'uno' is already"):
        reg.register(Thing("two", aliases=("uno",)))
    with pytest.raises(RegistrationRefused, match="'lazy-one' is already a built-in"):
        reg.register(Thing("lazy-one"))
    with pytest.raises(TypeError, match="expected Thing, got str"):
        reg.register("three")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not a slug"):
        reg.register(Thing("../x"))
    with pytest.raises(ValueError, match="alias name 'Bad Alias' is not a slug"):
        reg.register(Thing("fine", aliases=("Bad Alias",)))
    assert reg.get("fine") is None and reg.get("two") is None  # nothing half-registered
    reg.freeze()
    with pytest.raises(RegistrationRefused, match="frozen"):
        reg.register(Thing("late"))
    assert [t.name for t in reg] == ["lazy-one", "one"]


def write_dist(root: Path, dist: str, group: str, entries: dict[str, str], module: str, source: str) -> None:
    """A distribution as pip installs it: its module and a .dist-info with METADATA and entry_points.txt."""
    info = root / f"{dist}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in entries.items()))
    (root / f"{module}.py").write_text(textwrap.dedent(source))


@pytest.fixture
def on_path(tmp_path, monkeypatch):
    import importlib

    def add(*args) -> None:
        write_dist(tmp_path, *args)
        monkeypatch.syspath_prepend(str(tmp_path))
        importlib.invalidate_caches()

    return add


METHOD_PLUGIN = """
    from methods.simcse import SPEC
    from dataclasses import replace
    CLASH = replace(SPEC, name="simcse", aliases=())             # a built-in's name
    ALIAS_CLASH = replace(SPEC, name="fresh-one", aliases=("laser3",))  # a built-in's alias
    ESCAPE = replace(SPEC, name="../../../../tmp/x", aliases=())  # a path, not a name
    GOOD = replace(SPEC, name="good-one", aliases=())
    WRONG = 42
"""


def test_a_method_plugin_cannot_replace_a_builtin_nor_escape_with_its_name(on_path, monkeypatch, caplog):
    from bench.train import registry

    on_path("evil_methods", "lenbench.methods", {"simcse": "evil_m:CLASH", "fresh-one": "evil_m:ALIAS_CLASH",
            "x": "evil_m:ESCAPE", "good-one": "evil_m:GOOD", "wrong": "evil_m:WRONG", "gone": "evil_m:MISSING"},
            "evil_m", METHOD_PLUGIN)  # fmt: skip
    monkeypatch.setattr(registry, "METHODS", registry.METHODS.fresh())
    with caplog.at_level(logging.WARNING):
        names = registry.all_names()
    import methods.laser3
    import methods.simcse

    assert registry.get_method("simcse") is methods.simcse.SPEC and registry.get_method("laser3") is methods.laser3.SPEC_SELF
    assert "good-one" in names and "fresh-one" not in names and not any("/" in n for n in names)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "method plugin simcse (evil_m:CLASH) refused: method 'simcse' is already a built-in method; a plug-in cannot " \
           "replace it, give yours another name" in warnings
    assert any(w.startswith("method plugin fresh-one (evil_m:ALIAS_CLASH) refused: method 'laser3' is already a built-in")
               for w in warnings)  # fmt: skip
    assert any(w.startswith("method plugin x (evil_m:ESCAPE) failed to load: method name '../../../../tmp/x' is not a slug")
               for w in warnings)  # fmt: skip
    assert "method plugin wrong (evil_m:WRONG) failed to load: 'int' object is not callable" in warnings
    assert any(w.startswith("method plugin gone (evil_m:MISSING) failed to load:") for w in warnings)
    assert not any("built-in" in w and "(methods." in w for w in warnings)  # no warning blames a built-in
    assert len(warnings) == 5


def test_an_attack_plugin_cannot_replace_a_builtin_family(on_path, monkeypatch, caplog):
    from bench.evaluate.attacks import registry

    on_path("evil_attacks", "lenbench.attacks", {"elong": "evil_a:CLASH", "up": "evil_a:FAMILY"}, "evil_a", """
        from dataclasses import replace
        from bench.evaluate.attacks.elong import FAMILY as ELONG
        CLASH = replace(ELONG, summary="not the real elong")
        FAMILY = replace(ELONG, name="Up/Down")
    """)
    monkeypatch.setattr(registry, "FAMILIES", registry.FAMILIES.fresh())
    with caplog.at_level(logging.WARNING):
        elong = registry.get_family("elong")
    assert elong.summary != "not the real elong" and {f.name for f in registry.families()} >= {"elong", "pad", "len"}
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings[0].startswith("attack plugin elong (evil_a:CLASH) refused: attack 'elong' is already a built-in attack")
    assert warnings[1].startswith("attack plugin up (evil_a:FAMILY) failed to load: attack name 'Up/Down' is not a slug")


def test_folders_are_made_from_slugs_only_and_never_leave_the_output_folder(tmp_path):
    from bench.runtime.paths import child_folder

    assert child_folder(tmp_path, "laser3-self-seed1") == tmp_path / "laser3-self-seed1"
    for name in ("../../../../tmp/x", "..", "a/b", "/abs", ""):
        with pytest.raises(ValueError, match="cannot name a folder"):
            child_folder(tmp_path, name)


def test_a_suite_plugin_cannot_replace_a_builtin_suite_nor_use_a_path_as_its_name(on_path, monkeypatch, caplog):
    from bench.evaluate.suites import metadata, parse_suites

    on_path("evil_suites", "lenbench.suites", {"sts": "evil_s:CLASH", "up": "evil_s:ESCAPE"}, "evil_s", """
        from dataclasses import replace
        from bench.evaluate.suites.metadata import STS
        CLASH = replace(STS, factory="evil_s:nothing")
        ESCAPE = replace(STS, name="../sts")
    """)
    monkeypatch.setattr(metadata, "SUITES", metadata.SUITES.fresh())
    with caplog.at_level(logging.WARNING):
        ((suite, _),) = parse_suites("sts:stsb")
    assert type(suite).__module__ == "bench.evaluate.suites.sts" and metadata.SUITES["sts"] is metadata.STS
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings[0].startswith("suite plugin sts (evil_s:CLASH) refused: suite 'sts' is already a built-in suite")
    assert warnings[1].startswith("suite plugin up (evil_s:ESCAPE) failed to load: suite name '../sts' is not a slug")


# ------------------------------------------------------------------------------------- a suite plug-in
SUITE_PLUGIN_SRC = Path(__file__).resolve().parent / "suite_plugin_pkg"


def test_a_plugin_suite_is_evaluated_by_bench_eval(tmp_path, tiny_model_dir, monkeypatch):
    """tests/suite_plugin_pkg, pip-installed offline into a temporary folder, is found by a separate `bench eval`
    process only through the `lenbench.suites` entry point of its dist-info; its score is the one the suite computes
    in this process with the same encoder."""
    import os
    import shutil
    import subprocess
    import sys

    from results_db import ResultsDB

    src, target = tmp_path / "src", tmp_path / "site"
    shutil.copytree(SUITE_PLUGIN_SRC, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
                           "--quiet", "--disable-pip-version-check", "--target", str(target), str(src)],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    repo = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), str(repo)]), "OMP_NUM_THREADS": "1",
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}  # fmt: skip
    db = tmp_path / "r.sqlite"
    proc = subprocess.run([sys.executable, "-m", "bench", "eval", "--model", str(tiny_model_dir), "--suite",
                           "demo-order:4", "--db", str(db), "--backend", "torch", "--no-cache", "--no-progress"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    scores = ResultsDB(db).scores()
    assert scores[["suite", "dataset", "metric", "variant", "n"]].values.tolist() == [["demo-order", "toy4", "order_robust", "clean", 4]]

    import importlib

    monkeypatch.syspath_prepend(str(target))
    importlib.invalidate_caches()
    from bench.evaluate.models import load_model
    from bench.evaluate.suites import EvalContext, metadata, parse_suites

    monkeypatch.setattr(metadata, "SUITES", metadata.SUITES.fresh())
    ((suite, _),) = parse_suites("demo-order:4")
    model = load_model(str(tiny_model_dir), backend="torch", use_cache=False)
    (expected,) = suite.evaluate(model, "toy4", EvalContext())
    assert scores["value"].iloc[0] == pytest.approx(expected.value) and expected.value in (0, 25, 50, 75, 100)


def test_help_lists_plugin_suites_and_a_running_command_refuses_registration(monkeypatch, capsys, tmp_path):
    """`bench eval --help` and `bench run --help` list the suites the registry holds (a plug-in's too) and the attack
    families; once a command starts, the method, attack and suite registries refuse registration, while their
    entries (built-ins, installed entry points) still resolve."""
    from bench.cli import main
    from bench.evaluate.attacks import registry as attacks
    from bench.evaluate.suites import metadata as suites
    from bench.evaluate.suites.registry import register_suite
    from bench.train import registry as methods

    for module, attr in ((methods, "METHODS"), (attacks, "FAMILIES"), (suites, "SUITES")):
        monkeypatch.setattr(module, attr, getattr(module, attr).fresh())
    register_suite(suites.SuiteMeta("my-suite", "mypkg.suite:make_suite", "score", "items", usage="my-suite:THING"))
    for command in ("eval", "run"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        out = " ".join(capsys.readouterr().out.split())
        assert "my-suite:THING" in out and "beir:NAME[,NAME]" in out and "needle" in out and "beir14" in out, command
        assert "@elong, @pad, @shuffle" in out, command
    assert main(["results", "--db", str(tmp_path / "absent.sqlite")]) == 2  # a command ran (and failed)
    for registry in (methods.METHODS, attacks.FAMILIES, suites.SUITES):
        with pytest.raises(RegistrationRefused, match="frozen"):
            registry.register(Thing("late"))  # type: ignore[arg-type]
    assert suites.SUITES.get("sts").main_metric == "spearman" and attacks.FAMILIES.get("elong").name == "elong"
    assert suites.SUITES.get("my-suite").usage == "my-suite:THING"
