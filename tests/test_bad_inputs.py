"""Every bad input of issue 11, table-driven: exit status 2, exactly one `bench: error:` line naming the input,
no traceback, and the database's earlier rows unchanged (a hash of them before and after) - or, where the
database itself is the bad input, that file unchanged (or not created)."""

from __future__ import annotations

import gc
import gzip
import hashlib
import json
import os
import re
import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from bench.cli import main
from results_db import ResultsDB
from tests.conftest import write_sts
from tests.test_eval_cli import PAIRS, write_beir

pytestmark = pytest.mark.usefixtures("one_thread")


@dataclass
class World:
    root: Path
    model: Path
    data: Path
    db: Path  # a good database with one finished run

    def eval(self, suite: str = "sts:stsb", db: str | Path | None = None, *extra: str) -> list[str]:
        return ["eval", "--model", str(self.model), "--suite", suite, "--data-dir", str(self.data),
                "--db", str(db if db is not None else self.db), "--max-len", "32", *extra]  # fmt: skip


def rows_digest(path: Path, max_run: int | None = None) -> str:
    """sha256 of every row of runs 1..max_run (all runs when None) and of everything hanging off them."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        limit = max_run if max_run is not None else con.execute("SELECT max(id) FROM runs").fetchone()[0]
        parts = []
        for sql in (
            "SELECT * FROM runs WHERE id <= ? ORDER BY id",
            "SELECT * FROM scores WHERE run_id <= ? ORDER BY id",
            "SELECT i.* FROM score_items i JOIN scores s ON s.id = i.score_id WHERE s.run_id <= ? ORDER BY i.score_id",
            "SELECT * FROM train_log WHERE run_id <= ? ORDER BY id",
        ):
            parts.append(con.execute(sql, (limit,)).fetchall())
    finally:
        con.close()
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()


def file_digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


@pytest.fixture(scope="module")
def template(tmp_path_factory, tiny_model_dir) -> World:
    """Data and a database with one finished run, made once; each case works on a copy."""
    root = tmp_path_factory.mktemp("bad-inputs")
    data = root / "data"
    write_beir(data / "beir" / "scifact")
    write_sts(data / "sts" / "stsb-test.tsv", PAIRS)
    world = World(root, tiny_model_dir, data, root / "good.sqlite")
    assert main(world.eval("sts:stsb+beir:scifact")) == 0
    return world


@pytest.fixture()
def world(template, tmp_path, monkeypatch) -> World:
    monkeypatch.chdir(tmp_path)  # no ./data to fall back on
    shutil.copytree(template.data, tmp_path / "data")
    shutil.copy(template.db, tmp_path / "good.sqlite")
    return World(tmp_path, template.model, tmp_path / "data", tmp_path / "good.sqlite")


# ------------------------------------------------------------------------------ the database itself
def _other_app(path: Path, table: str) -> Path:
    con = sqlite3.connect(path)
    con.execute(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, name TEXT)")
    con.execute(f"INSERT INTO {table} (name) VALUES ('alice')")
    con.commit()
    con.close()
    return path


def _newer(path: Path) -> Path:
    con = sqlite3.connect(path)
    con.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    con.commit()
    con.close()
    return path


def _junk(w: World) -> Path:
    (w.root / "junk.sqlite").write_bytes(b"this is not sqlite\n" * 200)
    return w.root / "junk.sqlite"


def _truncated(w: World) -> Path:
    (w.root / "cut.sqlite").write_bytes(w.db.read_bytes()[:5000])
    return w.root / "cut.sqlite"


def _a_file(w: World) -> Path:
    (w.root / "plain.txt").write_text("x")
    return w.root / "plain.txt" / "r.sqlite"


def _with_newer(w: World) -> Path:
    shutil.copy(w.db, w.root / "newer.sqlite")
    return _newer(w.root / "newer.sqlite")


def _with_corrupt_version(w: World) -> Path:
    path = Path(shutil.copy(w.db, w.root / "stamp.sqlite"))
    con = sqlite3.connect(path)
    con.execute("UPDATE meta SET value = 'x7' WHERE key = 'schema_version'")
    con.commit()
    con.close()
    return path


# name: (make the --db argument, command, message)
BAD_DATABASES: dict[str, tuple[Callable[[World], Path | str], str, str]] = {
    "corrupt file": (_junk, "eval", r"junk\.sqlite is not an SQLite database"),
    "truncated file": (_truncated, "eval", r"cut\.sqlite is truncated \(5000 bytes of \d+\)"),
    "a folder": (lambda w: w.root, "eval", r"--db .* is a folder; give a file path"),
    "missing parent folder": (lambda w: w.root / "no" / "r.sqlite", "eval", r"folder .*/no does not exist"),
    "parent is a file": (_a_file, "eval", r"plain\.txt is a file, not a folder"),
    "unwritable place": (lambda w: "/proc/lenbench-test.sqlite", "eval", r"cannot open results database /proc/.*unable to open"),
    "unknown URL scheme": (lambda w: "foo://somewhere/db", "eval", r"unknown database URL scheme 'foo'"),
    "another app's database": (lambda w: _other_app(w.root / "app.sqlite", "users"), "eval",
                               r"app\.sqlite is not a lenbench results database \(it holds other tables: users\).*--db-init-foreign"),
    "another app's runs table, --db-init-foreign": (lambda w: _other_app(w.root / "app.sqlite", "runs"), "eval --db-init-foreign",
                                                    r"already has table\(s\) runs of another application"),
    "database from a newer lenbench": (_with_newer, "eval", r"schema version 99, newer than this lenbench knows"),
    # a damaged stamp was reported as "not a lenbench results database", and :memory: created a file of that name
    "corrupt schema version": (_with_corrupt_version, "eval", r"stamp\.sqlite has a corrupt schema version \('x7' in its meta"),
    "results: corrupt schema version": (_with_corrupt_version, "results", r"has a corrupt schema version \('x7'"),
    "in memory": (lambda w: ":memory:", "eval", r"--db ':memory:' is an in-memory database: nothing recorded there is kept"),
    "results: in memory": (lambda w: ":memory:", "results", r"--db ':memory:' is an in-memory database"),
    "results: misspelled path": (lambda w: w.root / "mispelled.sqlite", "results", r"mispelled\.sqlite does not exist \(reading never creates one\)"),
    "results: another app's database": (lambda w: _other_app(w.root / "app.sqlite", "users"), "results",
                                        r"is not a lenbench results database"),
    "results: corrupt file": (_junk, "results", r"is not an SQLite database"),
}  # fmt: skip


def _one_error_line(capsys, message: str) -> str:
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and errors[0].startswith("bench: error: ") and "Traceback" not in err, err
    assert re.search(message, errors[0]), errors[0]
    return errors[0]


@pytest.mark.parametrize("case", list(BAD_DATABASES))
def test_bad_database(case, world, capsys):
    make, command, message = BAD_DATABASES[case]
    target = make(world)
    good_before = file_digest(world.db)
    bad_before = file_digest(Path(target)) if "://" not in str(target) else None
    capsys.readouterr()
    name, *flags = command.split()
    argv = world.eval("sts:stsb", target, *flags) if name == "eval" else ["results", "--db", str(target)]
    assert main(argv) == 2
    _one_error_line(capsys, message)
    if "://" not in str(target):
        assert file_digest(Path(target)) == bad_before  # not written, not created
    assert file_digest(world.db) == good_before


def test_an_sqlalchemy_sqlite_url_works_for_reads_and_writes(world, capsys):
    url = f"sqlite:///{world.db}"  # sqlite:////abs/path.sqlite
    assert len(ResultsDB(url, read_only=True).runs()) == 1
    assert main(["results", "--db", url, "--runs-only"]) == 0
    assert "finished" in capsys.readouterr().out


def test_db_init_foreign_adds_lenbench_tables_beside_the_others(world, capsys):
    app = _other_app(world.root / "app.sqlite", "users")
    assert main(world.eval("sts:stsb", app, "--db-init-foreign")) == 0
    con = sqlite3.connect(app)
    assert con.execute("SELECT name FROM users").fetchall() == [("alice",)]  # their rows untouched
    con.close()
    assert main(world.eval("sts:stsb", app, "--rerun")) == 0  # now it is a lenbench database too: no flag needed
    assert ResultsDB(app).runs()["status"].tolist() == ["finished", "finished"]


# ------------------------------------------------------------------------------------ data files
def _write(rel: str, data: bytes | str) -> Callable[[Path], None]:
    def do(root: Path) -> None:
        path = root / rel
        path.write_bytes(data if isinstance(data, bytes) else data.encode())

    return do


def _truncated_gz(root: Path) -> None:
    corpus = root / "beir" / "scifact" / "corpus.jsonl"
    packed = gzip.compress(corpus.read_bytes() * 50)
    (root / "beir" / "scifact" / "corpus.jsonl.gz").write_bytes(packed[: len(packed) // 2])
    corpus.unlink()


def _sts(rows: str) -> Callable[[Path], None]:
    return _write("sts/stsb-test.tsv", "sentence1\tsentence2\tscore\n" + rows)


def _qrels(second: str) -> Callable[[Path], None]:
    return _write("beir/scifact/qrels/test.tsv", f"query-id\tcorpus-id\tscore\nq1\td1\t1\n{second}q3\td4\t1\n")


GOOD_ROWS = "".join(f"{a}\t{b}\t{s}\n" for a, b, s in PAIRS[:5])
DOC = '{"_id": "d1", "title": "t", "text": "a man plays guitar"}\n'

BAD_DATA: dict[str, tuple[Callable[[Path], None], str, str]] = {
    "sts: bytes that are not UTF-8": (_write("sts/stsb-test.tsv", b"sentence1\tsentence2\tscore\na b\tc d\t1.0\ncaf\xe9\tcafe\t2.0\n"),
                                      "sts:stsb", r"stsb-test\.tsv:3: not UTF-8 text \(byte 0xe9"),
    "beir: bytes that are not UTF-8": (_write("beir/scifact/corpus.jsonl", DOC.encode() + b'{"_id": "d2", "text": "\xff\xfe"}\n'),
                                       "beir:scifact", r"corpus\.jsonl:2: not UTF-8 text \(byte 0xff"),
    "beir: truncated .gz corpus": (_truncated_gz, "beir:scifact", r"corpus\.jsonl\.gz: the gzip file is truncated or corrupt"),
    "beir: null document text": (_write("beir/scifact/corpus.jsonl", DOC + '{"_id": "d2", "title": "x", "text": null}\n'),
                                 "beir:scifact", r"corpus\.jsonl:2: 'text' is null"),
    "beir: null query text": (_write("beir/scifact/queries.jsonl", '{"_id": "q1", "text": null}\n'),
                              "beir:scifact", r"queries\.jsonl:1: 'text' is null"),
    "beir: a number as text": (_write("beir/scifact/corpus.jsonl", '{"_id": "d1", "text": 42}\n'),
                               "beir:scifact", r"corpus\.jsonl:1: 'text' must be a string, got int"),
    "beir: a 2 MB line": (_write("beir/scifact/corpus.jsonl", DOC + json.dumps({"_id": "big", "text": "word " * 400_000}) + "\n"),
                          "beir:scifact", r"corpus\.jsonl:2: line longer than 1,048,576 bytes"),
    "sts: nan gold score": (_sts(GOOD_ROWS + "x y\tz w\tnan\n"), "sts:stsb", r"stsb-test\.tsv:7: score 'nan' is not a finite number"),
    "sts: inf gold score": (_sts(GOOD_ROWS + "x y\tz w\tinf\n"), "sts:stsb", r"stsb-test\.tsv:7: score 'inf' is not a finite number"),
    "sts: constant gold scores": (_sts("".join(f"{a}\t{b}\t3.0\n" for a, b, _ in PAIRS[:8])), "sts:stsb",
                                  r"all 8 gold scores are 3; Spearman correlation is undefined"),
    "sts: constant gold scores within --limit": (_sts("".join(f"{a}\t{b}\t{3.0 if i < 6 else i}\n" for i, (a, b, _) in enumerate(PAIRS[:9]))),
                                                 "sts:stsb --limit 5 --limit-mode first",
                                                 r"'stsb' \(the 5 pairs of its --limit\): all 5 gold scores are 3"),
    "sts: empty sentence": (_sts(GOOD_ROWS + "\tz w\t2.0\n"), "sts:stsb", r"stsb-test\.tsv:7: sentence1 is empty; a model cannot be scored"),
    "sts: blank sentence": (_sts(GOOD_ROWS + "x y\t   \t2.0\n"), "sts:stsb", r"stsb-test\.tsv:7: sentence2 is empty \(only white space\)"),
    "beir: blank judged query": (_write("beir/scifact/queries.jsonl", '{"_id": "q1", "text": "who"}\n{"_id": "q2", "text": " \\t "}\n{"_id": "q3", "text": "dog"}\n'),
                                 "beir:scifact", r"queries\.jsonl:2: the text of query 'q2' is empty \(only white space\)"),
    "knn: empty text": (_write("knn/agnews_test.jsonl", "".join(json.dumps({"text": "" if i == 7 else f"text {i}", "label": "ab"[i % 2]}) + "\n" for i in range(20))),
                        "knn:agnews", r"agnews_test\.jsonl:8: 'text' is empty"),
    # pytrec_eval keeps one slot per grade: 3e9 grew `bench eval` to 23 GB; 1e10 scored every query 0; 1.7 became 1
    "beir: a grade pytrec_eval cannot hold": (_qrels("q2\td3\t3000000000\n"), "beir:scifact",
                                              r"qrels/test\.tsv:3: score '3000000000' is outside the relevance grades .*-1000 to 1000"),
    "beir: a grade of 1e10": (_qrels("q2\td3\t1e10\n"), "beir:scifact", r"qrels/test\.tsv:3: score '1e10' is outside"),
    "beir: a fractional grade": (_qrels("q2\td3\t1.7\n"), "beir:scifact",
                                 r"qrels/test\.tsv:3: score '1\.7' is not a whole number; relevance grades are integers"),
    "knn: blank label": (_write("knn/agnews_test.jsonl", "".join(json.dumps({"text": f"text {i}", "label": " " if i == 3 else "ab"[i % 2]}) + "\n" for i in range(20))),
                         "knn:agnews", r"agnews_test\.jsonl:4: 'label' is empty"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BAD_DATA))
def test_bad_data_file(case, world, capsys, monkeypatch):
    import pytrec_eval

    def never_scored(*a, **k):  # a grade out of range must be refused before pytrec_eval sees it (23 GB at 3e9)
        raise AssertionError("pytrec_eval was given bad qrels")

    monkeypatch.setattr(pytrec_eval, "RelevanceEvaluator", never_scored)
    corrupt, suite, message = BAD_DATA[case]
    before = rows_digest(world.db)
    (world.data / "knn").mkdir(exist_ok=True)
    corrupt(world.data)
    suite, *extra = suite.split()
    capsys.readouterr()
    assert main(world.eval(suite, None, *extra)) == 2
    line = _one_error_line(capsys, message)
    runs = ResultsDB(world.db).runs()
    assert runs["status"].tolist() == ["finished", "failed"] and runs["error"].iloc[1].split(": ", 1)[1] in line
    assert ResultsDB(world.db).scores([int(runs["id"].iloc[1])]).empty
    assert rows_digest(world.db, max_run=1) == before


def test_duplicate_beir_ids_keep_the_last_record_as_beir_does_and_are_counted(world, capsys, caplog):
    (world.data / "beir" / "scifact" / "corpus.jsonl").open("a").write('{"_id": "d2", "title": "", "text": "a man plays the guitar"}\n')
    (world.data / "beir" / "scifact" / "queries.jsonl").open("a").write('{"_id": "q3", "text": "who plays guitar"}\n')
    assert main(world.eval("beir:scifact")) == 0
    assert re.search(r"corpus\.jsonl: 1 duplicate document id\(s\): 'd2' at lines 2 and 5", caplog.text)
    assert re.search(r"queries\.jsonl: 1 duplicate query id\(s\): 'q3' at lines 3 and 4", caplog.text)
    from bench.data import read_beir

    data = read_beir(world.data / "beir" / "scifact")
    assert data.corpus["d2"]["text"] == "a man plays the guitar" and data.queries["q3"] == "who plays guitar"
    scores = ResultsDB(world.db).scores([2])
    assert len(scores) and all(info["duplicate_ids"] == {"corpus": 1, "queries": 1} for info in scores["info"])


def test_judged_documents_missing_from_the_corpus_are_counted_warned_once_and_scored_as_missed(world, caplog):
    # BEIR and mteb keep such judgements: a relevant document no search returns. q2's only judged document is absent,
    # so q2 scores 0 (not dropped), and the count is in every score's info.
    (world.data / "beir" / "scifact" / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\tghost\t1\nq2\tghost2\t1\nq3\td4\t1\n")
    assert main(world.eval("beir:scifact")) == 0
    warned = [r for r in caplog.records if "not in corpus.jsonl" in r.getMessage()]
    assert len(warned) == 1 and "2 judgement(s)" in warned[0].getMessage() and "'ghost' (line 3)" in warned[0].getMessage()
    scores = ResultsDB(world.db).scores([2])
    assert all(info["qrels_unknown_docs"] == 2 for info in scores["info"])
    ndcg = scores[(scores.metric == "ndcg_at_10") & (scores.variant == "clean")].iloc[0]
    from bench.data import read_beir

    assert read_beir(world.data / "beir" / "scifact").qrels["q2"] == {"ghost": 1, "ghost2": 1} and ndcg["n"] == 3


def test_documents_without_text_are_kept_and_counted_and_a_corpus_of_only_those_is_one_line(world, capsys, caplog):
    corpus = world.data / "beir" / "scifact" / "corpus.jsonl"
    corpus.open("a").write('{"_id": "d5", "title": "", "text": ""}\n{"_id": "d6", "text": "  "}\n')
    assert main(world.eval("beir:scifact")) == 0
    assert re.search(r"corpus\.jsonl: 2 of 6 documents have neither title nor text \(first: 'd5' at line 5\)", caplog.text)
    assert all(info["blank_docs"] == 2 for info in ResultsDB(world.db).scores([2])["info"])
    corpus.write_text('{"_id": "d1", "title": "", "text": ""}\n')
    before = rows_digest(world.db)
    capsys.readouterr()
    assert main(world.eval("beir:scifact")) == 2
    _one_error_line(capsys, r"corpus\.jsonl: none of its 1 documents has a title or a text")
    assert rows_digest(world.db, max_run=2) == before


def test_the_shipped_scifact_has_no_duplicate_ids(shared_data):
    from bench.data import read_beir

    assert read_beir(shared_data / "beir" / "scifact").duplicates == {}


# --------------------------------------------------------------------------------- hyper-parameters
BAD_HPARAMS = {
    "not a number": ("simcse", "simcse.temperature=abc", r"simcse\.temperature='abc': must be a finite number, got str"),
    "zero temperature": ("simcse", "simcse.temperature=0", r"simcse\.temperature=0\.0: must be > 0"),
    "negative temperature": ("simcse", "simcse.temperature=-1", r"simcse\.temperature=-1\.0: must be > 0"),
    "NaN": ("simcse", "simcse.temperature=NaN", r"simcse\.temperature=nan: must be a finite number"),
    "dropout of 1": ("simcse", "simcse.dropout=1", r"simcse: dropout must be in \(0, 1\)"),
    "unknown choice": ("laser3-self", "laser3-self.m_mode=sideways", r"m_mode 'sideways' is not one of|m_mode='sideways': must be one of"),
    "momentum 1": ("esimcse", "esimcse.momentum=1", r"momentum must be in \[0, 1\)"),
    "fractional count": ("crop", "crop.chunk_sentences=2.5", r"crop\.chunk_sentences=2\.5: must be an integer, got float"),
    "zero layers": ("paser", "paser.decoder_layers=0", r"paser: decoder_layers must be >= 1, got 0"),
    "zero decoder heads": ("paser", "paser.decoder_heads=0", r"paser\.decoder_heads=0: must be >= 1"),
    "bool for a float": ("mlm", "mlm.mask_prob=true", r"mlm\.mask_prob=True: must be a finite number, got bool"),
    "unknown key": ("simcse", "simcse.temprature=0.1", r"has no hyper-parameter\(s\) \['temprature'\]"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BAD_HPARAMS))
def test_bad_hyper_parameter_is_refused_before_any_model_loads(case, world, capsys, monkeypatch):
    import bench.encode.loading

    def no_loading(*a, **k):
        raise AssertionError("a model was loaded before the hyper-parameters were validated")

    monkeypatch.setattr(bench.encode.loading, "load_transformer", no_loading)
    (world.root / "corpus.txt").write_text("one text. another one.\n" * 20)
    method, item, message = BAD_HPARAMS[case]
    before = rows_digest(world.db)
    capsys.readouterr()
    argv = ["run", "--method", method, "--backbone", str(world.model), "--corpus", str(world.root / "corpus.txt"),
            "--budget", "steps=2", "--suite", "sts:stsb", "--data-dir", str(world.data), "--db", str(world.db),
            "--out", str(world.root / "runs"), "--no-progress", "--hp", item]  # fmt: skip
    assert main(argv) == 2
    _one_error_line(capsys, message)
    assert rows_digest(world.db) == before and len(ResultsDB(world.db).runs()) == 1  # no run recorded


# ------------------------------------------------------------------------------------ pickle weights
def _pickle_folder(world: World, name: str, payload) -> Path:  # noqa: ANN001
    import torch

    folder = shutil.copytree(world.model, world.root / name)
    (folder / "model.safetensors").unlink()
    torch.save(payload(folder), folder / "pytorch_model.bin")
    return folder


class _Evil:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        import os

        return (os.system, (f"touch {self.marker}",))


def _state_dict(world: World):  # noqa: ANN202
    from safetensors.torch import load_file

    return lambda folder: load_file(str(world.model / "model.safetensors"))


@pytest.mark.parametrize("case", ["pickle-only folder without --allow-pickle", "malicious pickle with --allow-pickle"])
def test_pickle_weights(case, world, capsys, monkeypatch):
    monkeypatch.delenv("LENBENCH_ALLOW_PICKLE", raising=False)  # --allow-pickle sets it for the process
    marker = world.root / "PWNED"
    if case.startswith("pickle-only"):
        folder, extra, message = _pickle_folder(world, "bin-model", _state_dict(world)), [], (
            r"bin-model has only pickle weights \(pytorch_model\.bin\).*pass --allow-pickle")
    else:
        folder, extra, message = _pickle_folder(world, "evil-model", lambda f: {"w": _Evil(marker)}), ["--allow-pickle"], (
            r"pickle weights were refused by torch's weights_only loader.*GLOBAL posix\.system")
    before = rows_digest(world.db)
    capsys.readouterr()
    assert main(["eval", "--model", str(folder), "--suite", "sts:stsb", "--data-dir", str(world.data), "--db", str(world.db), *extra]) == 2
    _one_error_line(capsys, message)
    assert not marker.exists()  # the payload never ran
    assert rows_digest(world.db) == before and len(ResultsDB(world.db).runs()) == 1


def test_allow_pickle_loads_trusted_pickle_weights_to_the_same_scores(world, monkeypatch):
    monkeypatch.delenv("LENBENCH_ALLOW_PICKLE", raising=False)
    folder = _pickle_folder(world, "bin-model", _state_dict(world))
    for model, extra in ((folder, ["--allow-pickle"]), (world.model, [])):  # the same flags, so the same backend
        assert main(["eval", "--model", str(model), "--suite", "sts:stsb", "--data-dir", str(world.data), "--db",
                     str(world.db), "--max-len", "32", "--no-cache", *extra]) == 0  # fmt: skip
    scores = ResultsDB(world.db).scores()
    sts = scores[scores.suite == "sts"].set_index("run_id")["value"]
    assert list(sts.index) == [1, 2, 3] and sts[2] == pytest.approx(sts[3], abs=1e-9)  # same weights, same score


# ------------------------------------------------------------------------------- the embedding cache
def _legacy_cache(folder: Path, namespace: str, with_alias: bool) -> Path:
    """A cache file as lenbench wrote it before the format marker (the first ones had no alias table)."""
    from bench.encode.cache import TABLES_SQL, cache_file_name

    path = folder / cache_file_name(namespace, "ids-v1" if with_alias else None)
    con = sqlite3.connect(path)
    for name in ("emb", "alias", "meta") if with_alias else ("emb", "meta"):
        con.execute(TABLES_SQL[name])
    con.execute("INSERT INTO meta VALUES ('namespace', ?)", (namespace,))
    con.commit()
    con.close()
    return path


def test_cache_clear_removes_only_files_it_can_prove_are_embedding_caches(tmp_path, capsys):
    from bench.encode.cache import TABLES_SQL, EmbeddingCache

    folder = tmp_path / "mixed"
    cache = EmbeddingCache(folder, "fp|mean|64")
    cache.put([b"k" * 16], np.ones((1, 4), dtype=np.float32))
    cache.close()
    ours = [cache.path, _legacy_cache(folder, "old|mean|64", True), _legacy_cache(folder, "older|cls|128", False)]
    ResultsDB(folder / "results.sqlite").create_run(kind="eval", model="m", method="x", status="finished")
    _other_app(folder / "app.sqlite", "users")
    lookalike = folder / "mine.sqlite"  # lenbench's tables, but neither the marker nor a name lenbench gives
    con = sqlite3.connect(lookalike)
    for sql in TABLES_SQL.values():
        con.execute(sql)
    con.execute("INSERT INTO meta VALUES ('namespace', 'x')")
    con.commit()
    con.close()
    (folder / "notes.sqlite").write_text("plain text under a database name")
    (folder / "onnx").mkdir()
    (folder / "onnx" / "0123abcd-mean-v3.onnx").write_bytes(b"someone else's model")  # lenbench's name, not its file
    strangers = {p: file_digest(p) for p in folder.glob("*.sqlite") if p not in ours}
    strangers[folder / "onnx" / "0123abcd-mean-v3.onnx"] = file_digest(folder / "onnx" / "0123abcd-mean-v3.onnx")

    assert main(["cache", "info", "--cache-dir", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "3 encoder file(s)" in out and "kept 5 file(s)" in out and "fp|mean|64" in out
    assert main(["cache", "clear", "--cache-dir", str(folder)]) == 0
    out = capsys.readouterr().out
    assert not any(p.exists() for p in ours), out
    assert {p: file_digest(p) for p in strangers} == strangers  # every other file is still there, byte for byte
    assert len(ResultsDB(folder / "results.sqlite", create=False).runs()) == 1


def _cache_file(world: World) -> Path:
    import os

    files = sorted(Path(os.environ["LENBENCH_CACHE"]).glob("*.sqlite"))
    assert len(files) == 1, files
    return files[0]


def _wrong_size_vectors(path: Path) -> None:
    con = sqlite3.connect(path)
    con.execute("UPDATE emb SET vec = substr(vec, 1, 12)")
    con.commit()
    con.close()


def _nan_vectors(path: Path) -> None:
    con = sqlite3.connect(path)
    con.execute("UPDATE emb SET vec = ?", (np.full(64, np.nan, dtype=np.float32).tobytes(),))
    con.commit()
    con.close()


CORRUPT_CACHES: dict[str, tuple[Callable[[Path], None], str, bool]] = {
    "random bytes": (lambda p: p.write_bytes(np.random.default_rng(0).bytes(40_000)), r"is corrupt .*moved it to", True),
    "truncated": (lambda p: p.write_bytes(p.read_bytes()[:6000]), r"is corrupt .*moved it to", True),
    "wrong vector size": (_wrong_size_vectors, r"stored vector\(s\) are not \d+ float32 values", False),
    "non-finite vectors": (_nan_vectors, r"stored vector\(s\) are not \d+ float32 values", False),
    "another program's tables": (lambda p: (p.unlink(), _other_app(p, "users")), r"is corrupt .*not lenbench's", True),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CORRUPT_CACHES))
def test_a_corrupt_embedding_cache_is_named_set_aside_and_rebuilt(case, world, capsys, caplog, monkeypatch, tmp_path):
    monkeypatch.setenv("LENBENCH_CACHE", str(tmp_path / "emb"))
    argv = world.eval("sts:stsb", None, "--backend", "torch")
    assert main(argv) == 0
    path = _cache_file(world)
    gc.collect()  # the first eval's cache connections are closed, as when its process ends
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)  # the process has ended: its WAL was checkpointed
    corrupt, message, set_aside = CORRUPT_CACHES[case]
    corrupt(path)
    argv.append("--rerun")  # scored again (not the finished row reused), so the cache is read
    assert main(argv) == 0  # the eval goes on
    assert re.search(message, caplog.text), caplog.text
    assert re.search(re.escape(path.name), caplog.text)
    assert any((tmp_path / "emb" / "corrupt").glob(f"{path.name}.*")) == set_aside
    sts = ResultsDB(world.db).scores().query("suite == 'sts'").groupby("run_id")["value"].first()
    assert sts.iloc[-1] == pytest.approx(sts.iloc[-2], abs=1e-6)  # rebuilt: the same score as before
    caplog.clear()
    assert main(argv) == 0 and "corrupt" not in caplog.text and "float32 values" not in caplog.text  # healed


def test_a_cache_that_cannot_be_written_falls_back_to_running_without_it(world, caplog, monkeypatch, tmp_path):
    monkeypatch.setenv("LENBENCH_CACHE", str(tmp_path / "plain-file"))
    (tmp_path / "plain-file").write_text("a file where the cache folder should be")
    assert main(world.eval("sts:stsb", None, "--backend", "torch")) == 0
    assert re.search(r"goes on without the embedding cache", caplog.text), caplog.text
    assert ResultsDB(world.db).runs()["status"].tolist() == ["finished", "finished"]


# -------------------------------------------------------------------------- database paths and URLs
@pytest.mark.parametrize("name", ["x%41.sqlite", "a?b.sqlite", "c#d.sqlite", "with space.sqlite", "p%20q%.sqlite", "e&f=g.sqlite"])
def test_a_database_path_is_the_file_it_names(name, world, capsys):
    target = world.root / "odd" / name
    target.parent.mkdir()
    assert main(world.eval("sts:stsb", target)) == 0
    # no other file was written (the database's own name, no decoded twin); evals/ holds the row's results.json
    assert sorted(p.name for p in target.parent.iterdir()) == sorted([name, "evals"])
    assert main(["results", "--db", str(target), "--runs-only"]) == 0
    assert "finished" in capsys.readouterr().out
    assert len(ResultsDB(target, read_only=True).runs()) == 1


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:", "sqlite:///file::memory:?uri=true", "sqlite:///file:x?mode=memory&uri=true"])
def test_an_in_memory_database_is_refused(url, world, capsys):
    capsys.readouterr()
    assert main(world.eval("sts:stsb", url)) == 2
    _one_error_line(capsys, r"is an in-memory database: nothing recorded there is kept")


# ------------------------------------------------------------------------------------- model folders
def _edit_json(rel: str, change: Callable[[dict], None]) -> Callable[[Path], None]:
    def do(folder: Path) -> None:
        data = json.loads((folder / rel).read_text())
        change(data)
        (folder / rel).write_text(json.dumps(data))

    return do


def _no_tokenizer(folder: Path) -> None:
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        (folder / name).unlink(missing_ok=True)


def _vocab_txt(lines: list[str]) -> Callable[[Path], None]:
    def do(folder: Path) -> None:
        _no_tokenizer(folder)
        (folder / "vocab.txt").write_text("\n".join(lines) + "\n")

    return do


def _unknown_words_only(data: dict) -> None:
    """A tokenizer.json whose vocabulary knows no English word piece: every word of a sentence is [UNK]."""
    specials = {t: i for t, i in data["model"]["vocab"].items() if t.startswith("[")}
    data["model"]["vocab"] = {**specials, **{f"\u4e00{i}": len(specials) + i for i in range(300)}}


def _safetensors(change: Callable[[bytes], bytes]) -> Callable[[Path], None]:
    def do(folder: Path) -> None:
        path = folder / "model.safetensors"
        path.write_bytes(change(path.read_bytes()))

    return do


BAD_MODELS: dict[str, tuple[Callable[[Path], None], str]] = {
    "no tokenizer files": (_no_tokenizer, r"has no tokenizer files .*5-token tokenizer"),
    "tokenizer.json not JSON": (lambda f: (f / "tokenizer.json").write_text("{not json"), r"tokenizer\.json is not a tokenizer"),
    "tokenizer.json of 5 tokens": (_edit_json("tokenizer.json", lambda d: d["model"].update(vocab={"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4})),
                                   r"vocabulary has only 5 entries"),
    "tokenizer that knows no word": (_edit_json("tokenizer.json", _unknown_words_only), r"reads a plain sentence as \d+ unknown token"),
    "tokenizer.json that does not load": (_edit_json("tokenizer.json", lambda d: d["model"].update(type="NoSuchModel")), r"tokenizer\.json cannot be loaded"),
    "empty vocab.txt": (_vocab_txt([]), r"vocabulary has only 0 entries"),
    "vocab.txt larger than the embeddings": (_vocab_txt([f"w{i}" for i in range(40_000)]), r"40000 entries but config\.json's vocab_size is 30522"),
    "config.json not JSON": (lambda f: (f / "config.json").write_text("{'hidden_size': 32"), r"config\.json cannot be read as JSON"),
    "config.json a list": (lambda f: (f / "config.json").write_text("[1, 2]"), r"config\.json holds a JSON list"),
    "config hidden size != weights": (_edit_json("config.json", lambda d: d.update(hidden_size=64)), r"hidden size 64 but the weights are 32 wide"),
    "config vocab_size != weights": (_edit_json("config.json", lambda d: d.update(vocab_size=40_000)), r"vocab_size 40000 but the weights' embedding matrix has 30522 rows"),
    "config layers != weights": (_edit_json("config.json", lambda d: d.update(num_hidden_layers=4)), r"says 4 layers but the weights hold 2"),
    "random bytes as safetensors": (_safetensors(lambda b: np.random.default_rng(1).bytes(len(b))), r"model\.safetensors is not a complete safetensors file"),
    "truncated safetensors": (_safetensors(lambda b: b[: len(b) // 2]), r"model\.safetensors is not a complete safetensors file"),
    "safetensors header of another shape": (_safetensors(lambda b: b.replace(b'"shape":[30522,32]', b'"shape":[30522,33]', 1)),
                                            r"not a complete safetensors file|weights are 33 wide"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BAD_MODELS))
def test_a_model_folder_that_would_score_garbage_is_refused_before_a_run_is_recorded(case, world, capsys):
    folder = shutil.copytree(world.model, world.root / "model")
    change, message = BAD_MODELS[case]
    change(folder)
    before = rows_digest(world.db)
    capsys.readouterr()
    assert main(["eval", "--model", str(folder), "--suite", "sts:stsb", "--data-dir", str(world.data), "--db", str(world.db)]) == 2
    _one_error_line(capsys, message)
    assert rows_digest(world.db) == before and len(ResultsDB(world.db).runs()) == 1  # no run recorded


def test_a_blank_query_nobody_judged_is_not_an_error(world):
    (world.data / "beir" / "scifact" / "queries.jsonl").open("a").write('{"_id": "q9", "text": ""}\n')
    assert main(world.eval("beir:scifact")) == 0


# --------------------------------------------------------------------------------- numbers and names
def _run(world: World, *extra: str) -> list[str]:
    (world.root / "corpus.txt").write_text("one text. another one.\n" * 20)
    return ["run", "--method", "simcse", "--backbone", str(world.model), "--corpus", str(world.root / "corpus.txt"),
            "--budget", "steps=2", "--suite", "sts:stsb", "--data-dir", str(world.data), "--db", str(world.db),
            "--out", str(world.root / "runs"), "--no-progress", *extra]  # fmt: skip


BAD_ARGUMENTS: dict[str, tuple[Callable[[World], list[str]], str]] = {
    "eval --max-len 0": (lambda w: w.eval("sts:stsb", None, "--max-len", "0"), r"--max-len 0: must be >= 4 and <= 100,000"),
    "eval --max-len beyond the model's positions": (lambda w: w.eval("sts:stsb@elong", None, "--max-len", "2000"), r"--max-len 2000: model .* reads at most 512 tokens"),
    "run --eval-max-len beyond the backbone's positions": (lambda w: _run(w, "--eval-max-len", "1000"), r"--eval-max-len 1000: model .* reads at most 512 tokens"),
    "run --out under a file": (lambda w: _run(w, "--out", str(w.db / "runs")), r"--out .*good\.sqlite is a file, so the folder cannot be created there"),
    "sweep --folder that is a file": (lambda w: ["sweep", str(w.root / "s.toml"), "--db", str(w.db), "--folder", str(w.db)], r"--folder .*good\.sqlite is an existing file, not a folder"),
    "eval --batch-size -3": (lambda w: w.eval("sts:stsb", None, "--batch-size", "-3"), r"--batch-size -3: must be >= 1"),
    "eval --seed -1": (lambda w: w.eval("sts:stsb", None, "--seed", "-1"), r"--seed -1: must be >= 0"),
    "eval --seed 2**32": (lambda w: w.eval("sts:stsb", None, "--seed", str(2**32)), r"--seed 4,294,967,296: must be >= 0 and <= 4,294,967,295"),
    "eval --limit beyond int64": (lambda w: w.eval("sts:stsb", None, "--limit", str(10**20)), r"--limit 100,000,000,000,000,000,000: must be"),
    "eval --elong of a billion copies": (lambda w: w.eval("sts:stsb@elong", None, "--elong", "2,1000000000"), r"elongation variant '1000000000': use integers >= 2 \(at most 1000\)"),
    "eval --elong with a superscript digit": (lambda w: w.eval("sts:stsb@elong", None, "--elong", "2,\u00b2"), r"elongation variant '\u00b2': use integers"),
    "eval --attack elong of a billion copies": (lambda w: w.eval("sts:stsb@elong", None, "--attack", "elong=2,1000000000"), r"elongation variant '1000000000'"),
    "eval --nproc 0": (lambda w: w.eval("sts:stsb", None, "--nproc", "0"), r"--nproc 0: must be >= 1"),
    "eval --device gpu": (lambda w: w.eval("sts:stsb", None, "--device", "gpu"), r"--device 'gpu' is not a device name; give cpu, cuda"),
    "eval --device cpu:1": (lambda w: w.eval("sts:stsb", None, "--device", "cpu:1"), r"--device 'cpu:1': the CPU has no index"),
    "eval --device cuda:99": (lambda w: w.eval("sts:stsb", None, "--device", "cuda:99"), r"--device 'cuda:99': this (torch .* cannot use a CUDA GPU|machine has \d+ CUDA GPU)"),
    "eval --data-dir that does not exist": (lambda w: [*w.eval("sts:stsb")[:-2], "--data-dir", str(w.root / "nowhere")], r"--data-dir .*nowhere does not exist; give the folder"),
    "eval --data-dir that is a file": (lambda w: [*w.eval("sts:stsb")[:-2], "--data-dir", str(w.db)], r"--data-dir .*good\.sqlite is a file, not a folder"),
    "results --run of no run": (lambda w: ["results", "--db", str(w.db), "--run", "999999"], r"--run 999999: no such run in .*good\.sqlite"),
    "results --run beyond int64": (lambda w: ["results", "--db", str(w.db), "--run", str(2**64)], r"--run 18,446,744,073,709,551,616: must be >= 1"),
    "export --run 0": (lambda w: ["export", str(w.root / "out"), "--db", str(w.db), "--run", "0"], r"--run 0: must be >= 1"),
    "export into an existing file": (lambda w: ["export", str(w.db), "--db", str(w.db)], r"bench export DIR .*good\.sqlite is an existing file, not a folder"),
    "export under a file": (lambda w: ["export", str(w.db / "sub"), "--db", str(w.db)], r"good\.sqlite is a file, so the folder cannot be created there"),
    "run --budget steps=1e30": (lambda w: _run(w, "--budget", "steps=1e30"), r"budget steps=1e30: at most 9,007,199,254,740,992"),
    "run --budget seconds=1e12": (lambda w: _run(w, "--budget", "seconds=1e12"), r"budget seconds=1e12: at most 315,360,000"),
    "run --lr nan": (lambda w: _run(w, "--lr", "nan"), r"--lr nan: must be a finite number"),
    "run --lr 0": (lambda w: _run(w, "--lr", "0"), r"--lr 0: must be > 0 and <= 1"),
    "run --warmup-steps -1": (lambda w: _run(w, "--warmup-steps", "-1"), r"--warmup-steps -1: must be >= 0"),
    "run --checkpoint-minutes inf": (lambda w: _run(w, "--checkpoint-minutes", "inf"), r"--checkpoint-minutes inf: must be a finite number"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BAD_ARGUMENTS))
def test_a_bad_number_or_name_on_the_command_line_is_refused_before_anything_runs(case, world, capsys, monkeypatch):
    make, message = BAD_ARGUMENTS[case]
    before = rows_digest(world.db)
    capsys.readouterr()
    assert main(make(world)) == 2
    _one_error_line(capsys, message)
    assert rows_digest(world.db) == before and len(ResultsDB(world.db).runs()) == 1  # no run recorded


# ------------------------------------------------------------------------- stored text on a terminal
EVIL_NAME = "m\x1b[2J\x1b]8;;http://evil\x07click\x1b]8;;\x07\u202eevil\x00"


@pytest.mark.parametrize("argv", [["results"], ["results", "--runs-only"], ["results", "--format", "csv"], ["results", "--format", "json"]])
def test_control_characters_in_stored_names_are_printed_as_escapes(argv, world, capsys):
    db = ResultsDB(world.db)
    run = db.create_run(kind="eval", model=EVIL_NAME, method=EVIL_NAME, status="running", suite="sts")
    db.add_scores(run, [__import__("results_db").ScoreRecord("sts", "stsb", "spearman", 50.0, 40)])
    db.finish_run(run)
    capsys.readouterr()
    assert main([*argv, "--db", str(world.db)]) == 0
    out = capsys.readouterr().out
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f\u202e]", out), out  # nothing the terminal would interpret
    assert ("\\x1b[2J" in out and "\\u202eevil" in out) or "\\u001b[2J" in out  # shown, as escapes (JSON's own)


def test_control_characters_in_an_error_line_are_escaped(world, capsys):
    capsys.readouterr()
    assert main(["results", "--db", str(world.db), "--reference", "x\x1b[31m"]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "x\\x1b[31m" in err


# ------------------------------------------------------------------------ faults of the database's disk
def test_a_database_locked_by_another_writer_mid_run_is_one_line_and_the_row_is_marked(world, capsys, monkeypatch):
    """Another process holds the write lock when the run records its first scores: the run stops with one line
    that says so, and its row is marked failed once the lock is released (not left 'running')."""
    import threading

    monkeypatch.setenv("LENBENCH_DB_BUSY_TIMEOUT", "0.3")
    original = ResultsDB.add_scores
    holder = sqlite3.connect(world.db, timeout=5, check_same_thread=False)

    def add_scores_while_locked(self, run_id, records):  # noqa: ANN001
        holder.execute("BEGIN IMMEDIATE")  # another writer takes the lock, and keeps it 1.2 s
        threading.Timer(1.2, holder.rollback).start()
        return original(self, run_id, records)

    monkeypatch.setattr(ResultsDB, "add_scores", add_scores_while_locked)
    before = rows_digest(world.db)
    capsys.readouterr()
    assert main(world.eval("sts:stsb")) == 2
    _one_error_line(capsys, r"results database .*good\.sqlite is locked by another process \(waited 0\.3 s.*run the command again")
    runs = ResultsDB(world.db).runs()
    assert runs["status"].tolist() == ["finished", "failed"] and "locked by another process" in runs["error"].iloc[1]
    assert ResultsDB(world.db).scores([int(runs["id"].iloc[1])]).empty and rows_digest(world.db, max_run=1) == before
    holder.close()


FILL_DISK = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead of killing us
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
from bench.cli import main
sys.exit(main(sys.argv[2:]))
"""


def _run_with_file_size_limit(limit: int, argv: list[str]):  # noqa: ANN202
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-c", FILL_DISK, str(limit), *argv], capture_output=True, text=True, timeout=300)


def test_a_full_disk_under_the_results_database_is_one_line_and_keeps_earlier_results(world):
    """RLIMIT_FSIZE stands in for a full disk: every file the process writes stops growing at the limit."""
    import resource

    if resource.getrlimit(resource.RLIMIT_FSIZE)[1] not in (resource.RLIM_INFINITY,) and resource.getrlimit(resource.RLIMIT_FSIZE)[1] < 10**7:
        pytest.skip("this machine already limits file sizes")
    before = rows_digest(world.db)
    con = sqlite3.connect(world.db)
    con.execute("VACUUM")  # no free page left: the new run's scores must grow the file
    con.close()
    size = world.db.stat().st_size
    words = ["cat", "dog", "sun", "tree", "car", "boat", "bird", "fish"]
    rows = [(f"{words[i % 8]} {words[i // 8 % 8]}", f"{words[i // 64 % 8]} {words[i % 5]}", float(i % 5)) for i in range(1500)]
    write_sts(world.data / "sts" / "stsb-test.tsv", rows)  # 1,500 pairs: their per-pair values take tens of KB
    # two pages of room: the run's row and its final status fit whatever the recorded paths and code version weigh
    # (a dirty tree's "-dirty" had tipped a limit of exactly `size` over), its scores do not
    done = _run_with_file_size_limit(size + 8192, [*world.eval("sts:stsb"), "--no-cache", "--backend", "torch"])
    assert done.returncode == 2, done.stderr
    errors = [line for line in done.stderr.splitlines() if "error" in line.lower()]
    assert "Traceback" not in done.stderr and len(errors) == 1 and errors[0].startswith("bench: error: "), done.stderr
    assert re.search(r"results database .*good\.sqlite: (the disk is full|disk I/O error while writing \(a full disk).*earlier results are kept", errors[0]), errors[0]
    con = sqlite3.connect(world.db)
    assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    con.close()
    assert rows_digest(world.db, max_run=1) == before


def test_a_full_disk_under_the_embedding_cache_stops_its_writes_with_a_warning(tmp_path):
    import subprocess
    import sys

    script = """
import logging, resource, signal, sys
import numpy as np
from bench.encode.cache import EmbeddingCache
logging.basicConfig(level=logging.WARNING)
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
cache = EmbeddingCache(sys.argv[1], "fp|mean|64")
cache.put([bytes([i]) * 16 for i in range(10)], np.ones((10, 384), dtype=np.float32))
resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))
for chunk in range(50):  # about 15 MB of vectors: far past the limit
    keys = [chunk.to_bytes(2, "big") + i.to_bytes(14, "big") for i in range(200)]
    cache.put(keys, np.ones((200, 384), dtype=np.float32))
out = np.zeros((10, 384), dtype=np.float32)
print("hits", int(cache.fill([bytes([i]) * 16 for i in range(10)], out).sum()), "writable", cache.writable)
"""
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "hits 10 writable False" in done.stdout  # what was cached before stays readable
    assert len(re.findall(r"cannot write \((the disk is full|disk I/O error)\); this run goes on without writing to the cache", done.stderr)) == 1, done.stderr


# ---------------------------------------------------------------------------------------- sweep files
SWEEP_HEAD = '[sweep]\nname = "s"\n'
BAD_SWEEPS: dict[str, tuple[str, str]] = {
    "grid is a number": ("grid = 5\n", r"grid must be a table \(\[grid\] with key = value lines\), not a number"),
    "[variant] instead of [[variant]]": (SWEEP_HEAD + '[grid]\nmethod = ["simcse"]\n[variant]\nname = "a"\n', r"variant must be an array of tables; write \[\[variant\]\]"),
    "[[published]] instead of a list": ('published = 3\n[grid]\nmethod = ["simcse"]\n', r"published must be an array of tables"),
    "nested list in the grid": (SWEEP_HEAD + '[grid]\nmethod = [["simcse", "mlm"]]\n', r"method takes one value per point, not a list of lists"),
    "list for a single option in [fixed]": (SWEEP_HEAD + '[grid]\nmethod = ["simcse"]\n[fixed]\nbatch_size = [8, 16]\n', r"batch_size takes one value per point, not a list"),
    "table as a value": (SWEEP_HEAD + '[grid]\nmethod = ["simcse"]\n[fixed]\nbudget = { steps = 2 }\n', r"budget is a table; give a string, number or boolean"),
    "non-numeric published value": (SWEEP_HEAD + '[grid]\nmethod = ["simcse"]\n[[published]]\nsuite = "sts"\nmetric = "spearman"\nvalue = "76.3"\n', r"value '76\.3' is not a number"),
    "boolean published value": (SWEEP_HEAD + '[grid]\nmethod = ["simcse"]\n[[published]]\nsuite = "sts"\nmetric = "spearman"\nvalue = true\n', r"value True is not a number"),
    "published cell not a table": (SWEEP_HEAD + '[grid]\nmethod = ["simcse"]\n[[published]]\nsuite = "sts"\nmetric = "m"\nvalue = 1\ncell = "simcse"\n', r"cell must be a table"),
    "NUL in a method name": (SWEEP_HEAD + '[grid]\nmethod = ["sim\\u0000cse"]\n', r"holds a control character \(NUL, newline, escape\.\.\.\)"),
    "escape sequence in a variant name": (SWEEP_HEAD + '[grid]\nmethod = ["simcse"]\n[[variant]]\nname = "a\\u001b[2J"\n', r"holds a control character"),
    "absolute sweep name": ('[sweep]\nname = "/tmp/elsewhere"\n[grid]\nmethod = ["simcse"]\n', r"\[sweep\] name '/tmp/elsewhere' must be one word"),
    "sweep name climbing out": ('[sweep]\nname = "../../x"\n[grid]\nmethod = ["simcse"]\n', r"\[sweep\] name '\.\./\.\./x' must be one word"),
    "sweep name ..": ('[sweep]\nname = ".."\n[grid]\nmethod = ["simcse"]\n', r"\[sweep\] name '\.\.' must be one word"),
    "sweep name a number": ('[sweep]\nname = 5\n[grid]\nmethod = ["simcse"]\n', r"\[sweep\] name 5 must be one word"),
    "budget of 1e30 steps in a point": (SWEEP_HEAD + '[grid]\nmethod = ["simcse"]\n[fixed]\nbudget = "steps=1e30"\n', r"budget steps=1e30: at most"),
    "negative batch size in a point": (SWEEP_HEAD + '[grid]\nmethod = ["simcse"]\nbatch_size = [8, -1]\n', r"point .*batch_size=-1: must be >= 1"),
    "the same --hp twice in a point": (SWEEP_HEAD + '[grid]\nmethod = ["simcse"]\n[fixed]\nhp = ["simcse.temperature=0.1", "simcse.temperature=0.2"]\n', r"simcse\.temperature is given twice"),
    "not UTF-8": ("[sweep]\nname = \"caf\xe9\"\n", r"is not UTF-8 text|not valid TOML"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BAD_SWEEPS))
def test_a_bad_sweep_file_is_refused_before_any_point_runs(case, world, capsys, monkeypatch):
    import bench.sweep.executors

    monkeypatch.setattr(bench.sweep.executors, "run_points", lambda *a, **k: pytest.fail("a point ran"), raising=False)
    text, message = BAD_SWEEPS[case]
    path = world.root / "bad.toml"
    path.write_bytes(text.encode("latin-1") if case == "not UTF-8" else text.encode())
    before = rows_digest(world.db)
    capsys.readouterr()
    assert main(["sweep", str(path), "--db", str(world.db)]) == 2
    _one_error_line(capsys, message)
    assert rows_digest(world.db) == before and len(ResultsDB(world.db).runs()) == 1
    assert not (world.root / "runs").exists() and not any(world.root.parent.glob("elsewhere"))  # nothing written anywhere


def test_a_repeated_hp_key_on_the_command_line_is_refused(world, capsys):
    capsys.readouterr()
    assert main(_run(world, "--hp", "simcse.temperature=0.1", "--hp", "simcse.temperature=0.2")) == 2
    _one_error_line(capsys, r"--hp 'simcse\.temperature=0\.2': simcse\.temperature is given twice \(simcse\.temperature=0\.1 before\)")


# ------------------------------------------------------------------------------ a run that died, re-run
def _score_ids(db: Path, run_id: int) -> dict[tuple[str, str], int]:
    scores = ResultsDB(db).scores([run_id])
    return {(s, d): int(i) for s, d, i in zip(scores["suite"], scores["dataset"], scores["id"])}


@pytest.mark.parametrize("how", ["failed", "killed"])
def test_an_eval_that_died_is_resumed_by_running_it_again_and_skips_what_it_finished(how, world, capsys):
    corpus = world.data / "beir" / "scifact" / "corpus.jsonl"
    good = corpus.read_text()
    corpus.write_text(good + '{"_id": "dx", "text": null}\n')  # the second dataset fails after the first is scored
    argv = world.eval("sts:stsb+beir:scifact")
    assert main(argv) == 2
    first = ResultsDB(world.db).runs()
    run_id = int(first["id"].iloc[-1])
    assert first["status"].tolist() == ["finished", "failed"] and set(_score_ids(world.db, run_id)) == {("sts", "stsb")}
    if how == "killed":  # as if SIGKILLed: still 'running', held by a process that no longer exists
        con = sqlite3.connect(world.db)
        con.execute("UPDATE runs SET status = 'running', error = '', pid = 2147483646 WHERE id = ?", (run_id,))
        con.commit()
        con.close()
    sts_before = _score_ids(world.db, run_id)[("sts", "stsb")]
    corpus.write_text(good)
    capsys.readouterr()
    assert main(argv) == 0
    assert f"resuming run {run_id} ({'failed' if how == 'failed' else 'stale'})" in capsys.readouterr().out
    runs = ResultsDB(world.db).runs()
    assert runs["status"].tolist() == ["finished", "finished"]  # the same row, finished: no second row
    ids = _score_ids(world.db, run_id)
    assert ("beir", "scifact") in ids and ids[("sts", "stsb")] == sts_before  # STS kept as it was, not scored again
    read = ResultsDB(world.db).get_run(run_id)["data_fingerprint"]
    if how == "failed":  # the first attempt's files stay in the row's fingerprint, with the ones read now
        assert any(p.endswith("stsb-test.tsv") for p in read) and any(p.endswith("corpus.jsonl") for p in read), read


def test_a_finished_eval_run_again_is_a_new_run(world):
    assert main(world.eval("sts:stsb+beir:scifact")) == 0  # the template's finished run, exactly
    assert ResultsDB(world.db).runs()["status"].tolist() == ["finished", "finished"]


CHILD_THAT_WONT_STOP = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)  # deaf to the first Ctrl-C the sweep passes on
from results_db import ResultsDB
ResultsDB(sys.argv[1]).create_run(kind="train", model="m", method="simcse", status="running", sweep="s",
                                  sweep_point=sys.argv[3])
open(sys.argv[2], "w").write("started")
time.sleep(600)
"""


def test_a_double_ctrl_c_on_a_sweep_leaves_no_row_running_and_lists_every_point(world, monkeypatch, tmp_path):
    import _thread
    import sys
    import threading
    import time

    import bench.sweep.worker
    from bench.sweep.executors import run_local
    from bench.sweep.points import Point
    from bench.sweep.worker import WorkerSettings

    marker = tmp_path / "started"
    monkeypatch.setattr(bench.sweep.worker, "point_command",
                        lambda point, settings: [sys.executable, "-c", CHILD_THAT_WONT_STOP, settings.db, str(marker), point.key])
    # The deaf child is a process of its own (a slot's long-lived bench process would run a real point instead).
    monkeypatch.setattr(bench.sweep.worker.SlotProcesses, "get", lambda self, env, log_dir: None)
    points = [Point("s", f"method=simcse seed={i}", {}, (), "simcse", i, None) for i in range(3)]
    settings = WorkerSettings(db=str(world.db), out=str(tmp_path / "runs"), log_dir=str(tmp_path / "logs"), retries=0)

    def press_ctrl_c_twice() -> None:
        deadline = time.monotonic() + 60
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        _thread.interrupt_main()  # the first Ctrl-C: children are asked to stop (this one ignores it)
        time.sleep(1.2)
        _thread.interrupt_main()  # the second: stop waiting, kill

    threading.Thread(target=press_ctrl_c_twice, daemon=True).start()
    lines: list[str] = []
    results, interrupted = run_local(points, settings, jobs=1, echo=lines.append)
    assert interrupted
    assert sorted(r.key for r in results) == sorted(p.key for p in points), lines  # every point in the summary
    assert {r.key: r.status for r in results}["method=simcse seed=0"] == "interrupted"
    runs = ResultsDB(world.db).runs()
    assert "running" not in runs["status"].tolist() and runs["status"].iloc[-1] == "interrupted", lines
    assert any("marked run(s) 2 interrupted" in line for line in lines), lines


def test_bench_run_refuses_a_backbone_folder_without_a_tokenizer_before_any_row(world, capsys):
    folder = shutil.copytree(world.model, world.root / "backbone")
    _no_tokenizer(folder)
    argv = _run(world)
    argv[argv.index("--backbone") + 1] = str(folder)
    before = rows_digest(world.db)
    capsys.readouterr()
    assert main(argv) == 2
    _one_error_line(capsys, r"backbone.*has no tokenizer files")
    assert rows_digest(world.db) == before and len(ResultsDB(world.db).runs()) == 1


@pytest.mark.parametrize("damage", ["truncated weights", "state.json not JSON"])
def test_a_damaged_checkpoint_is_one_line_naming_it(damage, tmp_path):
    import torch

    from bench.runtime.errors import TrainingError
    from bench.train.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint

    save_checkpoint(tmp_path, 3, {"w": torch.ones(64, 64)}, {"step": 3, "rng": torch.zeros(4)})
    folder = latest_checkpoint(tmp_path)
    if damage == "truncated weights":
        data = (folder / "model.safetensors").read_bytes()
        (folder / "model.safetensors").write_bytes(data[: len(data) // 2])
    else:
        (folder / "state.json").write_text("{")
    with pytest.raises(TrainingError, match=r"checkpoint .*step-00000003 cannot be read .*move that folder away"):
        load_checkpoint(folder)


def test_a_corpus_changed_since_an_interrupted_evaluation_is_refused_in_one_line(world, capsys, monkeypatch):
    from bench.encode.encoder import Encoder

    real = Encoder._forward

    def dies_on_the_corpus(self, batch):  # queries are encoded first; the process dies in the corpus's first chunk
        if len(batch["input_ids"]) > 3:
            raise SystemExit(9)
        return real(self, batch)

    monkeypatch.setattr(Encoder, "_forward", dies_on_the_corpus)
    with pytest.raises(SystemExit):
        main(world.eval("beir:scifact", None, "--batch-size", "4"))
    monkeypatch.setattr(Encoder, "_forward", real)
    notes = list((Path(os.environ["LENBENCH_CACHE"]) / "progress").glob("*.json"))
    assert len(notes) == 1  # what the killed evaluation had read of corpus.jsonl
    corpus = world.data / "beir" / "scifact" / "corpus.jsonl"
    corpus.write_text(corpus.read_text().replace("guitar", "violin"))  # same size, other bytes where it read
    before = rows_digest(world.db, max_run=1)
    capsys.readouterr()
    assert main(world.eval("beir:scifact")) == 2
    line = _one_error_line(capsys, r"corpus\.jsonl changed since an interrupted evaluation of it read it \(its first "
                                   r"[0-9,]+ bytes differ\).* delete .*progress/.*\.json to score the file as it is now")
    assert str(notes[0]) in line
    assert ResultsDB(world.db).runs()["status"].iloc[-1] == "failed" and rows_digest(world.db, max_run=1) == before
    notes[0].unlink()
    assert main(world.eval("beir:scifact")) == 0  # the file as it is now, scored; the note goes with the finished scoring
    assert not notes[0].exists()


def test_a_method_that_needs_wordnet_without_it_stops_in_one_line_before_anything_trains(world, capsys, monkeypatch):
    """eda-positive read WordNet when its adapter was built, inside training: after the methods before it had
    trained, with a message that named apt only. Now its config refuses, with the rest of the settings."""
    import bench.encode.loading

    def no_loading(*a, **k):
        raise AssertionError("a model was loaded before the missing WordNet was reported")

    monkeypatch.setattr(bench.encode.loading, "load_transformer", no_loading)
    (world.root / "no-wordnet").mkdir()
    monkeypatch.setenv("LENBENCH_WORDNET", str(world.root / "no-wordnet"))
    (world.root / "corpus.txt").write_text("".join(f"text {i} here. another one {i}.\n" for i in range(40)))
    before = rows_digest(world.db)
    capsys.readouterr()
    argv = ["run", "--method", "simcse,eda-positive", "--backbone", str(world.model), "--corpus",
            str(world.root / "corpus.txt"), "--budget", "steps=2", "--suite", "sts:stsb", "--data-dir", str(world.data),
            "--db", str(world.db), "--out", str(world.root / "runs"), "--no-progress"]  # fmt: skip
    assert main(argv) == 2
    line = _one_error_line(capsys, r"eda-positive needs WordNet 3\.0 and there is none in .*no-wordnet: run \./setup\.sh")
    assert "LENBENCH_WORDNET" in line
    assert rows_digest(world.db) == before and len(ResultsDB(world.db).runs()) == 1  # nothing trained or recorded
    assert not (world.root / "runs").exists() or not any((world.root / "runs").iterdir())
