"""Every shell and Python example of README.md and docs/ runs, offline on tiny data, and prints what its page shows
(tests/docs_examples.py says how a page marks a block). One test per page: its blocks share a folder and, for
Python, a namespace, in page order."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs_examples import Example, examples, matches

REPO = Path(__file__).resolve().parent.parent
PAGES = sorted([REPO / "README.md", *(REPO / "docs").rglob("*.md")])
MAX_SKIPPED = 12  # examples that need the network, a GPU, a cluster or many minutes: few, each with its reason


def _run_bash(example: Example, folder: Path) -> str:
    env = {**os.environ, "PATH": f"{REPO / '.venv' / 'bin'}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}"
           f"{os.environ.get('PATH', '')}", "LENBENCH_REPO": str(REPO), "PYTHONPATH": str(REPO),
           "LENBENCH_PROGRESS": "off", **example.env}  # fmt: skip
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", example.code], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 0, f"{example.where}: exit {done.returncode}\n{example.code}\n{out[-3000:]}"
    return out


def _run_python(example: Example, namespace: dict, monkeypatch) -> str:
    for name, value in example.env.items():
        monkeypatch.setenv(name, value)
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        exec(compile(example.code, f"{example.where}", "exec"), namespace)  # noqa: S102 - the page's own example
    return buffer.getvalue()


def _page_id(page: Path) -> str:
    return str(page.relative_to(REPO))


@pytest.mark.parametrize("page", [p for p in PAGES if any(e.runs for e in examples(p))], ids=_page_id)
def test_every_example_of_the_page_runs_and_prints_what_it_shows(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LENBENCH_PROGRESS", "off")
    monkeypatch.setenv("LENBENCH_REPO", str(REPO))
    namespace: dict = {"__name__": "__docs_example__"}
    for example in examples(page):
        if not example.runs:
            continue
        if example.language == "bash":
            out = _run_bash(example, tmp_path)
        else:
            out = _run_python(example, namespace, monkeypatch)
        if example.output is not None:
            problem = matches(example.output, out)
            assert problem is None, f"{example.where}: {problem}; it printed:\n{out[-3000:]}"


def test_skipped_examples_are_few_and_each_says_why():
    skipped = [e for page in PAGES for e in examples(page) if e.skip]
    assert len(skipped) <= MAX_SKIPPED, [f"{e.where}: {e.skip}" for e in skipped]
    assert all(e.skip != "no reason given" for e in skipped), [e.where for e in skipped if e.skip == "no reason given"]


def test_an_example_tested_elsewhere_names_a_test_that_reads_its_page():
    for page in PAGES:
        for example in examples(page):
            if example.tested_by:
                test = REPO / example.tested_by
                assert test.is_file(), f"{example.where}: tested-by {example.tested_by}: no such file"
                assert str(page.relative_to(REPO)) in test.read_text(), f"{example.where}: {example.tested_by} never reads {page.relative_to(REPO)}"


def test_the_runner_reads_marks_and_compares_output(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("""intro
<!-- example: skip needs the network -->
```bash
bench eval --model bert-base-uncased --suite sts
```

<!-- example: env A=1 B="two words" -->
```python
print("n = 1379   spearman 82.03")
```

```output
n = 1379 spearman ...
```

```toml
not = "run"
```
""")
    found = examples(page)
    assert [(e.language, e.skip, e.env) for e in found] == [
        ("bash", "needs the network", {}), ("python", "", {"A": "1", "B": "two words"})]
    assert matches(found[1].output, "n = 1379   spearman 82.03\n") is None
    assert matches("spearman 90.00", "spearman 82.03") is not None
    assert matches("b\na", "a\nb\n") is not None  # in order
