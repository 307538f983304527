"""The commands the documentation suggests work on a fresh machine (after ./setup.sh, no ../shared/data), or stop
with one line naming the missing data and where it comes from. Read from the pages themselves
(docs/concepts/suites-and-attacks.md, docs/howto/package-a-method.md), so page and test cannot drift.

Kept fast: a tiny model stands in for minilm and --limit keeps a few items (the commands are the pages' otherwise).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.cli import main

REPO = Path(__file__).resolve().parent.parent
EVAL_PAGE = REPO / "docs" / "concepts" / "suites-and-attacks.md"  # docs/concepts/suites-and-attacks.md
METHOD_PAGE = REPO / "docs" / "howto" / "package-a-method.md"  # docs/howto/package-a-method.md
pytestmark = pytest.mark.usefixtures("one_thread")


def _eval_block() -> dict[str, list[list[str]]]:
    """The `bench eval` examples of the page, by the comment heading their group."""
    text = EVAL_PAGE.read_text()
    block = text.split("```bash", 1)[1].split("```", 1)[0]
    groups: dict[str, list[list[str]]] = {}
    current = ""
    for line in block.splitlines():
        if line.startswith("# "):
            current = line
            groups[current] = []
        elif line.startswith("bench eval"):
            groups[current].append(line.split("#", 1)[0].split()[1:])
    return groups


def _group(word: str) -> list[list[str]]:
    (commands,) = [c for heading, c in _eval_block().items() if word in heading]
    assert commands, f"no commands under the page heading containing {word!r}"
    return commands


@pytest.fixture()
def fresh(tmp_path, monkeypatch):
    """A working folder with no ./data and no ../shared/data, and an empty --data-dir."""
    work = tmp_path / "work"
    (work / "empty").mkdir(parents=True)
    monkeypatch.chdir(work)
    return work


def _quick(argv: list[str], model: Path, work: Path) -> list[str]:
    from bench.evaluate.suites.registry import attacked_families

    argv = [str(model) if a == "minilm" else a for a in argv]
    elong = "elong" in attacked_families([argv[argv.index("--suite") + 1]])  # --elong beside no elong suite is refused
    return argv + ["--limit", "20", "--data-dir", str(work / "empty"), "--db", str(work / "r.sqlite"), "--no-progress",
                   *(["--elong", "2"] if elong else [])]  # fmt: skip


def test_documented_commands_for_a_fresh_machine_work(fresh, tiny_model_dir, capsys):
    for argv in _group("right after ./setup.sh"):
        rc = main(_quick(argv, tiny_model_dir, fresh))
        out = capsys.readouterr()
        assert rc == 0, f"documented command {' '.join(argv)} failed: {out.err}"
        assert "run " in out.out


def test_documented_commands_that_need_data_say_what_is_missing(fresh, tiny_model_dir, capsys):
    for argv in _group("need a data folder"):
        rc = main(_quick(argv, tiny_model_dir, fresh))
        err = capsys.readouterr().err
        assert rc == 2 and len(err.strip().splitlines()) == 1, f"{' '.join(argv)}: {err}"
        assert "not found" in err and "bench data list" in err, err
    db = fresh / "r.sqlite"
    if db.exists():  # refused before a run row is written
        from results_db import ResultsDB

        assert ResultsDB(db).runs().empty


def test_readme_adapter_example_trains(fresh, tiny_model_dir, tmp_path, capsys, monkeypatch):
    """The 'Adding a method' module, as printed, registers and trains (registered in-process here instead of through
    an installed entry point; tests/test_plugin.py covers the entry point)."""
    from bench.train import registry

    code = METHOD_PAGE.read_text().split("# mypkg/shuffle.py", 1)[1].split("```", 1)[0]
    namespace: dict = {}
    exec(compile(code, "docs/howto/package-a-method.md", "exec"), namespace)  # noqa: S102 - the page's own example
    monkeypatch.setattr(registry, "METHODS", registry.METHODS.fresh())
    registry.register(namespace["SPEC"])
    run_line = re.search(r"^bench run --method shuffle .*$", METHOD_PAGE.read_text(), re.M).group(0).split()[1:]
    argv = [str(tiny_model_dir) if a.startswith("random-bert") else a for a in run_line]
    argv = [a.replace("steps=50", "steps=2") for a in argv]  # 2 steps instead of 50
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(f"sentence {i} about topic {i % 5} with a few more words" for i in range(40)) + "\n")
    rc = main(argv + ["--corpus", str(corpus), "--db", str(fresh / "r.sqlite"), "--out", str(fresh / "runs"),
                      "--no-progress", "--no-baseline", "--batch-size", "4", "--max-len", "32", "--limit", "20"])  # fmt: skip
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert "[shuffle] trained 2 steps" in out.out


def test_readme_plugin_package_installs_and_registers(tmp_path):
    """The 'Adding a method' files, copied from the page as printed (pyproject.toml and mypkg/shuffle.py), make a
    package pip installs offline; its entry point gives `bench methods` the method with the config's checked ranges."""
    import os
    import subprocess
    import sys

    text = METHOD_PAGE.read_text()
    pyproject = text.split("# mypkg/pyproject.toml\n", 1)[1].split("```", 1)[0]
    module = text.split("# mypkg/shuffle.py\n", 1)[1].split("```", 1)[0]
    assert "[build-system]" in pyproject and "[project]" in pyproject
    src = tmp_path / "mypkg"
    (src / "mypkg").mkdir(parents=True)
    (src / "pyproject.toml").write_text(pyproject)
    (src / "mypkg" / "__init__.py").write_text("")
    (src / "mypkg" / "shuffle.py").write_text(module)
    target = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
                           "--quiet", "--disable-pip-version-check", "--target", str(target), str(src)],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), str(REPO)])}
    listed = subprocess.run([sys.executable, "-m", "bench", "methods"], capture_output=True, text=True, env=env, timeout=300)
    assert listed.returncode == 0 and "shuffle" in listed.stdout, listed.stdout + listed.stderr
    check = subprocess.run([sys.executable, "-c", "from bench.train.registry import get_method; "
                            "get_method('shuffle').config_from({'min_words': 1000})"],
                           capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
    assert check.returncode != 0 and "min_words=1000: must be >= 1 and < 1000" in check.stderr
