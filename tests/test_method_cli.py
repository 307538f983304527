"""`bench method new` writes a one-file method that passes `bench method check` and trains with `bench run`;
`bench method check` reports each broken promise of a method file in one line naming the file (and its line), and
`bench run` stops a broken file with the same kind of line, the traceback only with --debug or LENBENCH_DEBUG=1.

Kept small: every check trains 2 steps of batch 4 on random-bert-tiny, the run 2 steps on five STS pairs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.cli import main
from tests.conftest import write_sts

pytestmark = pytest.mark.usefixtures("one_thread")


def _bench(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def _scaffold(name: str) -> str:
    from bench.train.method_scaffold import render

    return render(name)


def _pair_method(name: str, cls: str, summary: str, body: str) -> str:
    """A method file of one PairContrastiveAdapter subclass with `body` as its methods (line 15 is body's first)."""
    return f'''\
from dataclasses import dataclass

from bench.train.method import MethodSpec
from methods.pairs import PairContrastiveAdapter


@dataclass
class Config:
    temperature: float = 0.05


class {cls}(PairContrastiveAdapter):
    name = "{name}"

{body}

SPEC = MethodSpec(name="{name}", paper="(yours)", summary="{summary}", config_cls=Config,
                  factory=lambda config, *, tokenizer, max_len, seed=0, **_: {cls}(
                      config, tokenizer=tokenizer, max_len=max_len, seed=seed))
'''


NAN_LOSS = _pair_method("nan-loss", "NanLoss", "a loss that is NaN", """\
    def make_pair(self, text, rng):
        ids = self.tokens.body(text)
        return (self.tokens.wrap(ids), self.tokens.wrap(ids[::-1])) if ids else None

    def loss(self, model, batch):
        loss, info = super().loss(model, batch)
        return loss * float("nan"), info
""")

# (variant, the file's text from the scaffold of method NAME, extra check arguments, the line it must name (None:
# any), what the line must say). Each variant gets its own method name: one process may load each name once.
SHUFFLED = '" ".join(rng.sample(w, len(w)))'
BROKEN = [
    ("wrong-type", lambda n: _scaffold(n).replace("return [", "return 5 or ["), (), 11,
     "returned int; expected a list with one positive per text"),
    ("all-skipped", lambda n: _scaffold(n).replace("len(w) >= config.min_words", "len(w) > 999"), (), 11,
     "skipped all 8 texts it was given"),
    ("empty", lambda n: _scaffold(n).replace(SHUFFLED, '""'), (), 11, "returned an empty positive for every text"),
    ("identical", lambda n: _scaffold(n).replace(SHUFFLED, '" ".join(w)'), (), 11,
     "returned every text unchanged as its positive"),
    ("raises", lambda n: _scaffold(n).replace("    words = [", "    1 / 0\n    words = ["), (), 14,
     "raised ZeroDivisionError"),
    ("nan-loss", lambda n: NAN_LOSS, (), None, "non-finite loss (nan) at step 1 of nan-loss; expected a finite loss"),
    ("hp-range", _scaffold, ("--hp", "hp-range.min_words=0"), 11,
     "hyper-parameter hp-range.min_words=0: must be >= 1 and <= 512 (default 2)"),
    ("no-default", lambda n: _scaffold(n).replace("min_words: int = hp(2, ge=1, le=512)", "min_words: int"), (), 8,
     "config field Config.min_words of method 'no-default' has no default"),
    ("clash", lambda n: _scaffold(n).replace(f'name="{n}"', 'name="simcse"'), (), 11,
     "method name 'simcse' clashes with a built-in method"),
]


def test_a_new_method_passes_its_check_and_trains_with_bench_run(tmp_path, monkeypatch, capsys):
    from results_db import ResultsDB

    monkeypatch.chdir(tmp_path)
    rc, out, err = _bench(capsys, "method", "new", "x")
    assert rc == 0 and "wrote x.py" in out, err
    text = (tmp_path / "x.py").read_text()
    (imported,) = re.findall(r"^from lenbench import (.+)$", text, re.M)
    assert len(text.splitlines()) <= 15 and len(imported.split(",")) <= 3  # the small contract, as the issue asks
    assert "@contrastive" in text and "hp(" in text and "def positives(texts," in text  # whole batches, one hp

    rc, out, err = _bench(capsys, "method", "check", "./x.py")
    assert rc == 0 and err == "", err
    assert out.splitlines() == [out.strip()] and out.startswith("ok: ./x.py (x)")

    write_sts(tmp_path / "data" / "sts" / "stsb-test.tsv", [
        ("A man is playing a guitar.", "A man plays the guitar.", 4.8),
        ("A woman is slicing onions.", "A man is riding a horse.", 0.4),
        ("The cat sleeps on the sofa.", "A cat is sleeping on a couch.", 4.5),
        ("Stocks fell sharply today.", "Children play football outside.", 0.0),
        ("The train arrived late.", "The train was delayed.", 4.0),
    ])  # fmt: skip
    (tmp_path / "corpus.txt").write_text("\n".join(f"sentence {i} about topic {i % 5} with some words" for i in range(24)))
    rc, out, err = _bench(capsys, "run", "--method", "./x.py", "--budget", "steps=2", "--backbone", "random-bert-tiny",
                          "--corpus", "corpus.txt", "--suite", "sts:stsb", "--data-dir", "data", "--db", "r.sqlite",
                          "--out", "runs", "--batch-size", "4", "--max-len", "32", "--eval-max-len", "64",
                          "--no-progress", "--no-baseline")  # fmt: skip
    assert rc == 0, err
    runs = ResultsDB(tmp_path / "r.sqlite").runs()
    assert runs["method"].tolist() == ["x"] and runs["status"].tolist() == ["finished"]
    assert "[x] trained 2 steps" in out


def test_method_new_refuses_an_existing_file_a_built_in_name_and_a_name_that_is_no_slug(tmp_path, monkeypatch,
                                                                                        capsys):  # fmt: skip
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.py").write_text("# my own work\n")
    for argv, says in [(["mine"], "mine.py already exists"), (["simcse"], "'simcse' clashes with a built-in method"),
                       (["My Method"], "'My Method' is not a slug"),
                       (["other", "--out", "mine.py"], "mine.py already exists")]:  # fmt: skip
        rc, out, err = _bench(capsys, "method", "new", *argv)
        assert rc == 2 and len(err.strip().splitlines()) == 1 and says in err, (argv, err)
    assert (tmp_path / "mine.py").read_text() == "# my own work\n"  # never overwritten
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.py"]


@pytest.mark.parametrize("variant, make, extra, line, says", BROKEN, ids=[b[0] for b in BROKEN])
def test_method_check_reports_a_broken_method_file_in_one_line_naming_it(tmp_path, monkeypatch, capsys, variant,
                                                                         make, extra, line, says):  # fmt: skip
    monkeypatch.chdir(tmp_path)
    shown = f"./{variant}.py"
    (tmp_path / f"{variant}.py").write_text(make(variant))
    rc, out, err = _bench(capsys, "method", "check", shown, *extra)
    assert rc == 2 and out == "", out
    assert len(err.strip().splitlines()) == 1, err
    where = re.escape(shown) + (rf":{line}:" if line is not None else r":\d+:")
    assert re.match(rf"bench: error: {where} ", err) and says in err, err


def test_bench_run_stops_a_broken_method_file_in_one_line_and_shows_the_traceback_only_when_asked(
        tmp_path, monkeypatch, capsys):  # fmt: skip
    from bench.runtime.errors import MethodFileError

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LENBENCH_DEBUG", raising=False)
    Path("nodefault.py").write_text(_scaffold("nodefault").replace("= hp(2, ge=1, le=512)", ""))
    argv = ["run", "--method", "./nodefault.py", "--budget", "steps=2", "--backbone", "random-bert-tiny",
            "--db", "r.sqlite", "--no-baseline", "--no-progress"]  # fmt: skip
    rc, out, err = _bench(capsys, *argv)
    assert rc == 2 and "Traceback" not in err
    assert err.strip().splitlines() == [
        "bench: error: ./nodefault.py:8: config field Config.min_words of method 'nodefault' has no default; expected "
        "one, e.g. `min_words: int = hp(DEFAULT, ...)` (a run takes the defaults and its --hp values)"]
    with pytest.raises(MethodFileError, match=r"nodefault\.py:8: config field"):
        main(["--debug", *argv])
    monkeypatch.setenv("LENBENCH_DEBUG", "1")
    with pytest.raises(MethodFileError, match=r"nodefault\.py:8: config field"):
        main(argv)


RAISES_IN_A_WORKER = _pair_method("lookup", "Lookup", "a positive looked up where there is none", """\
    def text_pair(self, text, rng):
        return (text, {}[text.split()[0]])
""")


def test_a_full_adapter_raising_in_a_loader_worker_is_one_line_at_its_line(tmp_path, monkeypatch, capsys):
    """A batch is made in a loader process, whose error reaches training only as its traceback's text: the line is
    made there, naming the file's own line, as in the main process."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LENBENCH_DEBUG", raising=False)
    Path("lookup.py").write_text(RAISES_IN_A_WORKER)
    rc, out, err = _bench(capsys, "run", "--method", "./lookup.py", "--budget", "steps=2", "--backbone", "random-bert-tiny",
                          "--batch-size", "4", "--max-len", "32", "--loader-workers", "1", "--db", "r.sqlite",
                          "--no-baseline", "--no-progress")  # fmt: skip
    lines = err.strip().splitlines()
    assert rc != 0 and "Traceback" not in err and len(lines) == 1, err[-2000:]
    assert re.fullmatch(r"bench: error: \./lookup\.py:16: KeyError: '.+' \(while making a batch of method 'lookup'\)", lines[0])
