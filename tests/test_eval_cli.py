"""`bench eval` through `bench.cli.main`: bad input gives one clear error (exit 2) and keeps earlier runs intact;
re-running hits the embedding cache; @elong inputs stay within max_len and m follows SPEC §2."""

import json
import re
from pathlib import Path

import numpy as np
import pytest

from bench.evaluate.attacks import count_tokens, elongate, elongate_within, max_m
from bench.cli import main
from bench.encode.encoder import Encoder
from results_db import ResultsDB
from tests.conftest import write_sts

DOCS = {
    "d1": ("Guitar", "a man plays the electric guitar on stage"),
    "d2": ("Cooking", "slice the onion and fry it in butter"),
    "d3": ("Markets", "the stock market fell sharply after the report"),
    "d4": ("Pets", "the dog barks at the cat in the garden"),
}
QUERIES = {"q1": "who plays the guitar", "q2": "why did stock prices fall", "q3": "dog and cat"}
QRELS = [("q1", "d1", 1), ("q2", "d3", 2), ("q3", "d4", 1)]
# every sentence is 5 word-piece tokens: at max_len 32, m ranges over 1..6 (SPEC §2: floor((32 - 2) / 5))
WORDS = ["cat", "dog", "sun", "tree", "car", "boat", "bird", "fish", "rain", "snow", "road", "hill"]
PAIRS = [
    (" ".join(WORDS[(i + k) % 12] for k in range(5)), " ".join(WORDS[(i * 5 + k) % 12] for k in range(5)), float(i % 5))
    for i in range(40)
]


def write_beir(folder):
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "title": t, "text": x}) + "\n" for d, (t, x) in DOCS.items()))
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in QUERIES.items()))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{s}\n" for q, d, s in QRELS))


def write_eval_data(root: Path, pairs: list, labelled: list[tuple[str, str]]) -> Path:
    """A data folder of a tiny SciFact, an STS-B test file of `pairs` and an AG News file of (text, label)."""
    write_beir(root / "beir" / "scifact")
    write_sts(root / "sts" / "stsb-test.tsv", pairs)
    (root / "knn").mkdir(parents=True)
    (root / "knn" / "agnews_test.jsonl").write_text("".join(json.dumps({"text": t, "label": y}) + "\n" for t, y in labelled))
    return root


@pytest.fixture()
def data_dir(tmp_path):
    return write_eval_data(tmp_path / "data", PAIRS, [(f"text {i}", "ab"[i % 2]) for i in range(20)])


@pytest.fixture()
def forward_calls(monkeypatch):
    """Every model forward pass of every Encoder in the test: (batch size, padded length)."""
    calls = []
    original = Encoder._forward

    def counting(self, batch):
        calls.append(tuple(batch["input_ids"].shape))
        return original(self, batch)

    monkeypatch.setattr(Encoder, "_forward", counting)
    return calls


def _eval(model, suite, data_dir, db, *extra):
    return main(["eval", "--model", str(model), "--suite", suite, "--data-dir", str(data_dir), "--db", str(db), *extra])


# ------------------------------------------------------------------------- bad input
def _break(path, text):
    def do(root):
        (root / path).write_text(text)

    return do


BAD_DATA = {
    "corrupt jsonl line": (
        _break("beir/scifact/queries.jsonl", '{"_id": "q1", "text": "guitar"}\n{"_id": "q2", "text": "x"\n'),
        "beir:scifact", r"queries\.jsonl:2: not valid JSON",
    ),
    "qrels naming an unknown query": (
        _break("beir/scifact/qrels/test.tsv", "query-id\tcorpus-id\tscore\nq9\td1\t1\n"),
        "beir:scifact", r"test\.tsv:2: query-id 'q9' is not in queries\.jsonl",
    ),
    "empty corpus": (_break("beir/scifact/corpus.jsonl", "\n"), "beir:scifact", r"corpus\.jsonl: the corpus of 'scifact' is empty"),
    "document without text": (
        _break("beir/scifact/corpus.jsonl", '{"_id": "d1", "title": "x"}\n'),
        "beir:scifact", r"corpus\.jsonl:1: missing field\(s\) \['text'\]",
    ),
    "corrupt knn line": (_break("knn/agnews_test.jsonl", "{oops\n"), "knn", r"agnews_test\.jsonl:1: not valid JSON"),
    "bad sts score": (_break("sts/stsb-test.tsv", "sentence1\tsentence2\tscore\na\tb\thigh\n"), "sts:stsb", r"stsb-test\.tsv:2: score 'high'"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BAD_DATA))
def test_bad_data_fails_its_run_with_one_clear_line(case, tiny_model_dir, data_dir, tmp_path, capsys, monkeypatch):
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")  # no ./data or ../shared/data to fall back on
    db = tmp_path / "r.sqlite"
    assert _eval(tiny_model_dir, "beir:scifact+sts:stsb", data_dir, db, "--max-len", "32") == 0
    before = ResultsDB(db).scores()
    corrupt, suite, message = BAD_DATA[case]
    corrupt(data_dir)
    capsys.readouterr()
    assert _eval(tiny_model_dir, suite, data_dir, db, "--max-len", "32") == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "bench: error:" in line]
    assert len(errors) == 1 and errors[0].startswith("bench: error: ") and "Traceback" not in err, err
    assert re.search(message, errors[0]), errors[0]
    out = ResultsDB(db)
    runs = out.runs()
    assert runs["status"].tolist() == ["finished", "failed"]
    assert runs["error"].iloc[1] and re.search(message, runs["error"].iloc[1])
    kept = out.scores([int(runs["id"].iloc[0])])
    assert kept[["suite", "dataset", "metric", "variant", "value"]].equals(before[["suite", "dataset", "metric", "variant", "value"]])
    assert out.scores([int(runs["id"].iloc[1])]).empty


BAD_ARGS = {
    "unknown suite": (["--suite", "nosuch"], r"unknown suite 'nosuch'; known: .*beir"),
    "unknown variant": (["--suite", "sts@short"], r"unknown attack family 'short'; known: @elong, @pad, @shuffle"),
    "unknown dataset": (["--suite", "beir:nosuch"], r"unknown dataset 'nosuch'"),
    "sts name in beir": (["--suite", "beir:stsb"], r"'stsb' is not a retrieval \(BEIR\) dataset"),
    "unknown model path": (["--model", "{tmp}/no-model"], r"model folder '.*no-model' does not exist"),
    "folder that is no model": (["--model", "{tmp}"], r"cannot load model '.*': the folder .* has no config\.json"),
    "unknown hub id (offline)": (["--model", "nobody/no-such-model"], r"cannot load model 'nobody/no-such-model'.*offline"),
    "bad elongation": (["--elong", "1,2"], r"elongation variant '1': use integers >= 2"),
    "max_len too small": (["--max-len", "2"], r"--max-len 2: must be >= 4"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BAD_ARGS))
def test_bad_arguments_give_one_clear_line_and_record_nothing(case, tiny_model_dir, data_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    db = tmp_path / "r.sqlite"
    assert _eval(tiny_model_dir, "sts:stsb", data_dir, db, "--max-len", "32") == 0
    before = ResultsDB(db).scores()
    capsys.readouterr()
    extra, message = BAD_ARGS[case]
    extra = [a.replace("{tmp}", str(tmp_path)) for a in extra]
    args = {"--model": str(tiny_model_dir), "--suite": "sts:stsb"}
    opts = []
    for flag, value in zip(extra[::2], extra[1::2]):
        if flag in args:
            args[flag] = value
        else:
            opts += [flag, value]
    argv = ["eval", "--model", args["--model"], "--suite", args["--suite"], "--data-dir", str(data_dir), "--db", str(db), *opts]
    assert main(argv) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "bench: error:" in line]
    assert len(errors) == 1 and "Traceback" not in err, err
    assert re.search(message, errors[0]), errors[0]
    out = ResultsDB(db)
    assert out.runs()["status"].tolist() == ["finished"]  # refused before a run was recorded
    assert out.scores()[["dataset", "value"]].equals(before[["dataset", "value"]])


# ----------------------------------------------------------------------------- cache
def test_rerun_hits_the_embedding_cache(tiny_model_dir, data_dir, tmp_path, forward_calls, capsys):
    db = tmp_path / "r.sqlite"
    args = ("--max-len", "32", "--elong", "2,rand")
    assert _eval(tiny_model_dir, "beir:scifact@elong+sts:stsb", data_dir, db, *args) == 0
    first = len(forward_calls)
    assert first > 0
    # the same evaluation into another database (the first one would reuse its finished row): scored again
    assert _eval(tiny_model_dir, "beir:scifact@elong+sts:stsb", data_dir, tmp_path / "r2.sqlite", *args) == 0
    assert len(forward_calls) == first  # every text came from the cache
    a, b = (ResultsDB(d).scores().sort_values(["dataset", "metric", "variant"])["value"].tolist() for d in (db, tmp_path / "r2.sqlite"))
    assert a == b
    assert _eval(tiny_model_dir, "sts:stsb", data_dir, db, "--max-len", "32", "--no-cache") == 0
    assert len(forward_calls) > first  # --no-cache encodes again
    n = len(forward_calls)
    assert _eval(tiny_model_dir, "sts:stsb", data_dir, db, "--max-len", "32", "--pooling", "cls") == 0
    assert len(forward_calls) > n  # another pooling is another cache namespace
    n = len(forward_calls)
    assert _eval(tiny_model_dir, "sts:stsb", data_dir, db, "--max-len", "24") == 0
    assert len(forward_calls) > n  # and so is another max_len


# ----------------------------------------------------------------------------- @elong
def test_sts_elong_reports_attacked_scores_and_change_within_max_len(tiny_model_dir, data_dir, tmp_path, monkeypatch, capsys):
    seen: dict[str, list[str]] = {}
    original = Encoder.encode

    def recording(self, texts, *a, desc="encode", **kw):
        seen.setdefault(desc, []).extend(texts)
        return original(self, texts, *a, desc=desc, **kw)

    monkeypatch.setattr(Encoder, "encode", recording)
    db = tmp_path / "r.sqlite"
    max_len = 32
    assert _eval(tiny_model_dir, "sts:stsb@elong", data_dir, db, "--max-len", str(max_len), "--elong", "2,4,8,rand") == 0
    out = capsys.readouterr().out
    for col in ("clean", "elong-2", "elong-4", "elong-8", "elong-rand", "change(elong-2)", "change(elong-rand)"):
        assert col in out
    assert set(ResultsDB(db).scores()["variant"]) == {"clean", "elong-2", "elong-4", "elong-8", "elong-rand"}

    tok = Encoder.load(str(tiny_model_dir), use_cache=False).tokenizer
    sentences = {s for p in PAIRS for s in p[:2]}
    n = {count_tokens(s, tok) for s in sentences}
    assert n == {5}
    top = max_m(5, max_len)
    assert top == 6  # floor((32 - 2) / 5)
    for desc, texts in seen.items():
        variant = desc.split()[-1].removeprefix("elong-")  # desc: "stsb clean", "stsb elong-2", ...
        assert len(texts) == 2 * len(PAIRS)
        for t in texts:
            assert len(tok(t)["input_ids"]) <= max_len, (variant, t)  # never beyond max_len (specials included)
        if variant == "clean":
            continue
        originals = [p[0] for p in PAIRS] + [p[1] for p in PAIRS]
        ms = []
        for orig, t in zip(originals, texts):
            m = len(t.split()) // 5
            ms.append(m)
            if variant == "rand":
                assert t == elongate(orig, m) and 1 <= m <= top  # whole copies, m ~ U{1..max_m}
            else:
                assert t == elongate_within(orig, int(variant), tok, max_len)
                assert m == min(int(variant), top)  # 8 copies do not fit: cut at max_len, here after 6
        if variant == "rand":
            assert set(ms) == set(range(1, top + 1))  # 80 draws cover the whole range
            assert np.mean(ms) == pytest.approx((1 + top) / 2, abs=0.6)


def test_beir_elong_documents_are_cut_at_max_len_and_queries_stay_clean(tiny_model_dir, data_dir, tmp_path, monkeypatch):
    seen: dict[str, list[str]] = {}
    original = Encoder.encode

    def recording(self, texts, *a, desc="encode", **kw):
        seen.setdefault(desc, []).extend(texts)
        return original(self, texts, *a, desc=desc, **kw)

    monkeypatch.setattr(Encoder, "encode", recording)
    assert _eval(tiny_model_dir, "beir:scifact@elong", data_dir, tmp_path / "r.sqlite", "--max-len", "16", "--elong", "8") == 0
    tok = Encoder.load(str(tiny_model_dir), use_cache=False).tokenizer
    # queries are encoded once, clean, and serve every variant
    assert seen["scifact queries"] == list(QUERIES.values())
    assert [d for d in seen if "queries" in d] == ["scifact queries"]
    docs = seen["scifact elong-8 corpus"]
    clean = [f"{t} {x}" for t, x in DOCS.values()]
    assert seen["scifact clean corpus"] == clean
    for c, d in zip(clean, docs):
        assert len(tok(d)["input_ids"]) == 16 and (c + " " + c).startswith(d)  # cut at max_len on a token boundary


def test_commands_that_share_elong_share_its_default(capsys):
    """`--elong` has one default for `bench run`, `bench eval` and whatever builds settings without it (the API's
    settings, a suite context): the variants of the README's main job, m = 2 and random m."""
    from bench.cli import build_parser
    from bench.evaluate.attacks import parse_elong_variants
    from bench.evaluate.suites.base import EvalContext
    from bench.experiment.settings import EvalSettings

    parser = build_parser()
    run = parser.parse_args(["run"])
    ev = parser.parse_args(["eval", "--model", "minilm", "--suite", "sts@elong"])
    assert run.elong == ev.elong == "2,rand"
    assert EvalSettings().elong == EvalContext().elong == parse_elong_variants(None) == ["2", "rand"]
    for command in ("run", "eval"):
        with pytest.raises(SystemExit):
            parser.parse_args([command, "--help"])
        assert "(default 2,rand)" in re.sub(r"\s+", " ", capsys.readouterr().out), command


def test_eval_tables_name_the_model_scored_not_vanilla(tiny_model_dir, data_dir, tmp_path, capsys):
    """`bench eval` labels its row by the model's folder (its last two path parts) in its own table and in `bench
    results`, as the leaderboard does; the method stored stays 'vanilla' (an untrained model)."""
    db = tmp_path / "r.sqlite"
    label = "/".join(tiny_model_dir.parts[-2:])
    assert _eval(tiny_model_dir, "sts:stsb", data_dir, db, "--max-len", "32") == 0
    printed = capsys.readouterr().out
    assert main(["results", "--db", str(db)]) == 0
    listed = capsys.readouterr().out
    for out in (printed, listed):
        rows = [line.split() for line in out.splitlines() if line.split()[:2] == ["sts", "stsb"]]
        assert rows and all(row[4] == label for row in rows), out
    assert list(ResultsDB(db).runs()["method"]) == ["vanilla"]
    # main() called in-process records the command it was given, not the interpreter's (pytest's) arguments
    assert list(ResultsDB(db).runs()["command"]) == [
        f"bench eval --model {tiny_model_dir} --suite sts:stsb --data-dir {data_dir} --db {db} --max-len 32"]
