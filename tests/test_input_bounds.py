"""Inputs checked where they enter, with their bounds (issue 37): environment variables, qrels grades, --limit above
a set's size, options that affect nothing, degenerate training and kNN data, `--db :memory:`, a BOM wherever text is
read, a corrupt schema version. Each bad input is one line naming it and what to do."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench import environment
from bench.cli import main

REPO = Path(__file__).resolve().parent.parent


def _one_error_line(capsys, pattern: str) -> str:  # noqa: ANN001
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("bench: error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert re.search(pattern, lines[0]), lines[0]
    return lines[0]


# ------------------------------------------------------------------------ environment variables
@pytest.mark.parametrize("name, value, accepted", [
    ("LENBENCH_PROGRESS", "bogus", "one of bar, lines, off"),
    ("LENBENCH_MAX_LINE_BYTES", "abc", "a whole number >= 1"),
    ("LENBENCH_MAX_LINE_BYTES", "-1", "a whole number >= 1"),
    ("LENBENCH_DB_BUSY_TIMEOUT", "-5", "a number >= 0"),
    ("LENBENCH_DB_BUSY_TIMEOUT", "nan", "a number >= 0"),
    ("LENBENCH_DIST_TIMEOUT", "soon", "a number >= 1"),
    ("LENBENCH_MEMMAP_BYTES", "2GB", "a whole number >= 0"),
    ("LENBENCH_DOWNLOAD", "maybe", "one of 1, true"),
])  # fmt: skip
def test_a_bad_environment_value_is_one_line_naming_the_variable(name, value, accepted, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(name, value)
    db = tmp_path / "never.sqlite"
    assert main(["results", "--db", str(db)]) == 2
    line = _one_error_line(capsys, re.escape(f"${name}={value!r}"))
    assert accepted in line and "unset it" in line
    assert not db.exists()


def test_a_bad_line_cap_is_blamed_on_the_variable_not_on_the_data_file(tmp_path, monkeypatch):
    from bench.data.lines import read_lines

    data = tmp_path / "corpus.txt"
    data.write_text("one line\n")
    for value in ("-1", "abc", "0"):
        monkeypatch.setenv("LENBENCH_MAX_LINE_BYTES", value)
        with pytest.raises(environment.EnvironmentSettingError, match=r"\$LENBENCH_MAX_LINE_BYTES") as caught:
            list(read_lines(data))
        assert "corpus.txt" not in str(caught.value)
    monkeypatch.setenv("LENBENCH_MAX_LINE_BYTES", " 64 ")  # blanks around a good value are fine
    assert list(read_lines(data)) == ["one line\n"]


def test_good_values_are_read_and_blank_means_unset(monkeypatch):
    from results_db.location import busy_timeout_ms

    monkeypatch.setenv("LENBENCH_DB_BUSY_TIMEOUT", "2.5")
    assert busy_timeout_ms() == 2500
    monkeypatch.setenv("LENBENCH_DB_BUSY_TIMEOUT", "  ")
    assert busy_timeout_ms() == 30_000
    monkeypatch.setenv("LENBENCH_PROGRESS", "Lines")
    assert environment.choice("LENBENCH_PROGRESS") == "lines"
    monkeypatch.setenv("LENBENCH_ALLOW_PICKLE", "off")
    assert environment.flag("LENBENCH_ALLOW_PICKLE") is False


def test_every_lenbench_variable_the_code_names_is_declared_and_read_through_the_checked_reader():
    """A variable named anywhere in the packages is declared in bench.environment.VARIABLES (its kind and bounds),
    and no module reads one with os.environ.get / os.getenv directly."""
    named, direct = set(), []
    for top in ("bench", "methods", "leaderboard", "results_db", "lenbench"):
        for path in (REPO / top).rglob("*.py"):
            source = path.read_text()
            named |= set(re.findall(r"(?<=[\"'$])LENBENCH_[A-Z_]*[A-Z]\b", source))  # quoted or $NAME
            direct += [f"{path.relative_to(REPO)}: {m}" for m in
                       re.findall(r"(?:environ\.get|getenv)\(\s*[\"']LENBENCH_\w+", source)]  # fmt: skip
    assert named - set(environment.VARIABLES) == set()
    assert direct == []


# ------------------------------------------------------------------------ a byte order mark wherever text is read
BOM = "\ufeff"


def test_a_byte_order_mark_is_accepted_by_every_data_reader(tmp_path):
    """Windows editors start UTF-8 files with a BOM. An STS header with one was refused ('\\ufeffsentence1'); in a
    corpus or a jsonl file it became part of the first text. Every reader now drops it, also in .gz files, and the
    BEIR corpus's first document is found again at its stored offset."""
    import gzip
    import json

    from bench.data import read_beir, read_labelled, read_sts
    from bench.data.corpus import load_file_corpus
    from tests.test_eval_cli import write_beir

    sts = tmp_path / "sts.tsv"
    sts.write_text(BOM + "sentence1\tsentence2\tscore\na man\ta person\t4.0\na cat\tthe stock\t0.5\n", encoding="utf-8")
    assert read_sts(sts).sentences1 == ["a man", "a cat"]
    (tmp_path / "sts.tsv.gz").write_bytes(gzip.compress(sts.read_bytes()))
    assert read_sts(tmp_path / "sts.tsv.gz").scores == [4.0, 0.5]

    beir = tmp_path / "beir"
    write_beir(beir)
    for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv"):
        path = beir / name
        path.write_text(BOM + path.read_text(encoding="utf-8"), encoding="utf-8")
    data = read_beir(beir)
    first = json.loads((beir / "corpus.jsonl").read_text(encoding="utf-8-sig").splitlines()[0])
    assert data.doc_text(first["_id"]).endswith(first["text"]) and BOM not in data.doc_text(first["_id"])
    assert all(not q.startswith(BOM) for q in data.queries) and len(data.qrels) == 3

    knn = tmp_path / "knn.jsonl"
    knn.write_text(BOM + "".join(json.dumps({"text": f"text {i}", "label": "ab"[i % 2]}) + "\n" for i in range(4)),
                   encoding="utf-8")  # fmt: skip
    assert read_labelled(knn).texts[0] == "text 0"

    corpus = tmp_path / "corpus.txt"
    corpus.write_text(BOM + "first text\nsecond text\n", encoding="utf-8")
    assert load_file_corpus(corpus).texts == ["first text", "second text"]


def test_a_sweep_file_with_a_byte_order_mark_is_read(tmp_path):
    from bench.sweep.spec import load_spec

    spec = tmp_path / "grid.toml"
    spec.write_text(BOM + '[sweep]\nname = "bom"\n[grid]\nmethod = ["simcse"]\n', encoding="utf-8")
    assert load_spec(spec).name == "bom"


# ------------------------------------------------------------------------ --limit above a set's size
def test_a_limit_above_the_sets_size_scores_and_labels_the_full_set(tiny_model_dir, tmp_path, capsys, caplog):
    """`--limit 1000000` on an 8-pair STS file and a 3-query BEIR set: the warning says so, the tables name the
    datasets without a subset mark, each score records the limit as above the size (not as a subset), and the
    numbers equal those of an evaluation without --limit (BEIR's corpus is not cut to a slice either)."""
    from results_db import ResultsDB
    from tests.conftest import write_sts
    from tests.test_eval_cli import write_beir

    data = tmp_path / "data"
    write_sts(data / "sts" / "stsb-test.tsv", [(f"sentence {i} about a cat", f"a cat {i}", float(i % 5)) for i in range(8)])
    write_beir(data / "beir" / "scifact")

    def scores(db: Path, *limit: str):  # noqa: ANN202
        assert main(["eval", "--model", str(tiny_model_dir), "--suite", "sts:stsb+beir:scifact", "--data-dir", str(data),
                     "--db", str(db), "--max-len", "32", "--no-progress", *limit]) == 0  # fmt: skip
        frame = ResultsDB(db).scores()
        return frame.set_index(["dataset", "metric"])["value"].to_dict(), list(frame["info"]), capsys.readouterr().out

    full, _, _ = scores(tmp_path / "full.sqlite")
    limited, infos, out = scores(tmp_path / "limited.sqlite", "--limit", "1000000")
    assert limited == pytest.approx(full)
    assert "[1000000]" not in out and "stsb" in out
    assert all("limit" not in info and info["limit_above_size"] == 1000000 for info in infos)
    assert re.search(r"stsb: --limit 1000000 is not below its 8 pairs; scored the whole set", caplog.text)
    assert re.search(r"scifact: --limit 1000000 is not below its 3 judged queries", caplog.text)
    # a limit that cuts is still a subset (tests/test_report.py: stsb[5], {"limit": 5})


# ------------------------------------------------------------------------ degenerate kNN sets
def _labelled(path: Path, n: int) -> Path:
    import json

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"text": f"text number {i}", "label": "ab"[i % 2]}) + "\n" for i in range(n)))
    return path


class _Vectors:
    """A model whose embedding of 'text number i' is a fixed 2-d vector (no forward pass)."""

    max_len = 64
    tokenizer = None

    def encode(self, texts, desc="", normalize=True):  # noqa: ANN001, ANN201, ARG002
        import numpy as np

        x = np.asarray([[1.0 + int(t.split()[-1]) % 2, 1.0 + int(t.split()[-1]) / 100] for t in texts], dtype=np.float32)
        return x / np.linalg.norm(x, axis=1, keepdims=True) if normalize else x


def test_a_knn_set_too_small_for_k_is_refused_and_a_small_test_part_is_warned_about(tmp_path, caplog):
    """10 texts at k = 10 left 8 to train on (k silently lowered to 8) and 2 to test: refused, naming what is
    needed. 20 texts (18 train, 2 test): scored, with a warning that the accuracy rests on 2 test texts."""
    from bench.data.errors import DataError
    from bench.evaluate.suites import EvalContext
    from bench.evaluate.suites.knn import KNNSuite

    _labelled(tmp_path / "knn" / "agnews_test.jsonl", 10)
    with pytest.raises(DataError, match=r"'agnews' has 10 texts: its 9:1 split leaves 8 to train on, fewer than the "
                                        r"k=10 neighbours each vote takes; .* at least 12 texts"):  # fmt: skip
        KNNSuite().evaluate(_Vectors(), "agnews", EvalContext(data_dir=str(tmp_path)))
    _labelled(tmp_path / "knn" / "agnews_test.jsonl", 20)
    records = KNNSuite().evaluate(_Vectors(), "agnews", EvalContext(data_dir=str(tmp_path)))
    assert {r.n for r in records} == {2}
    assert re.search(r"agnews: kNN accuracy rests on 2 test texts \(10% of 20\), fewer than k=10: each is 50 points",
                     caplog.text)  # fmt: skip


# ------------------------------------------------------------------------ degenerate training data
@pytest.mark.parametrize("lines, message", [
    (["the only line"], r"corpus\.txt has 1 distinct text \(1 in all\), fewer than one batch of 8"),
    (["the same line"] * 50, r"corpus\.txt has 1 distinct text \(50 in all\), fewer than one batch of 8"),
    ([f"line {i % 5}" for i in range(40)], r"has 5 distinct texts \(40 in all\), fewer than one batch of 8"),
])  # fmt: skip
def test_a_corpus_with_fewer_distinct_texts_than_a_batch_is_refused_before_any_row(lines, message, tiny_model_dir,
                                                                                   tmp_path, capsys):  # fmt: skip
    """A one-line corpus or 50 identical lines trained at batch 8 to a loss of ln 8 (every in-batch negative a copy
    of the positive) and said nothing."""
    from tests.conftest import write_sts

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(lines) + "\n")
    write_sts(tmp_path / "data" / "sts" / "stsb-test.tsv", [(f"a cat {i}", f"the cat {i}", float(i % 5)) for i in range(8)])
    db = tmp_path / "r.sqlite"
    argv = ["run", "--method", "simcse", "--backbone", str(tiny_model_dir), "--corpus", str(corpus), "--budget",
            "steps=2", "--batch-size", "8", "--suite", "sts:stsb", "--data-dir", str(tmp_path / "data"), "--db", str(db),
            "--out", str(tmp_path / "runs"), "--no-progress"]  # fmt: skip
    assert main(argv) == 2
    assert "give a corpus with more different texts (or a smaller --batch-size)" in _one_error_line(capsys, message)
    assert not (tmp_path / "runs").exists()
    if db.exists():
        from results_db import ResultsDB

        assert ResultsDB(db).runs().empty  # no row recorded


# ------------------------------------------------------------------------ options that affect nothing
@pytest.mark.parametrize("suite, extra, message", [
    ("sts:stsb", ["--attack", "pad=start-2"], r"--attack pad=start-2 affects nothing: no suite is attacked with @pad "
                                              r"\(suites: sts:stsb\); add @pad to a suite \(e\.g\. sts:stsb@pad\)"),
    ("sts:stsb", ["--elong", "4"], r"--elong 4 affects nothing: no suite is attacked with @elong"),
    ("sts:stsb@pad", ["--elong", "4"], r"--elong 4 affects nothing: no suite is attacked with @elong \(suites: sts:stsb@pad\)"),
    ("sts:stsb@elong,shuffle", ["--attack", "pad=end-4"], r"--attack pad=end-4 affects nothing: no suite is attacked "
                                                          r"with @pad"),
])  # fmt: skip
def test_attack_options_no_suite_uses_are_refused(suite, extra, message, tmp_path, capsys):
    """`--attack pad=start-2` or `--elong 4` without a matching @family suite was silently ignored: the scores were
    the defaults' (or clean only), and a suite whose suffix was forgotten went unnoticed."""
    db = tmp_path / "r.sqlite"
    argv = ["eval", "--model", "bm25", "--suite", suite, "--db", str(db), "--data-dir", str(tmp_path), *extra]
    assert main(argv) == 2
    _one_error_line(capsys, message)
    assert not db.exists()


def test_attack_options_a_suite_uses_are_accepted():
    from bench.experiment.settings import attack_settings

    assert attack_settings("4", ["pad=start-2"], ["sts:stsb@elong+beir:scifact@pad"]) == (["4"], {"pad": ["start-2"]})
    assert attack_settings("8", None, ["diag"])[0] == ["8"]  # diag always attacks with elong
    assert attack_settings(None, None, ["sts:stsb"])[1] == {}  # the defaults beside a clean suite: nothing given
