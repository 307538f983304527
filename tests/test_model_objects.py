"""Models from memory (bench.encode.objects): a SentenceTransformer object scores as the same model by its folder and
reuses its row, changed weights give a new row; a transformers model with its tokenizer scores as its folder; any
object with `encode` runs the attacks over STS and retrieval, known by the name its caller declares (marked so,
never reused unless asked); `bench eval --model file.py:NAME` loads such an object from a plain file."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

import lenbench
from bench.cli import main
from bench.report.results_file import load_schema
from bench.runtime.errors import ConfigError, ModelLoadError
from results_db import ResultsDB
from tests.test_eval_cli import DOCS, QRELS, QUERIES, write_eval_data

pytestmark = pytest.mark.usefixtures("one_thread")

SMALL = {"max_len": 32, "elong": "2", "quiet": True}

# A model lenbench knows nothing of but its encode(): each word a fixed pseudo-random 16-dim vector (seeded by its
# crc32), a text the sum of its words'. Dense, so no two cosines of the pairs below tie (a tie would make Spearman
# depend on float rounding); a sum, so a text repeated m times points the same way. The same source is the file
# `bench eval --model enc.py:make` loads.
HASH_SOURCE = '''
import zlib

import numpy as np


class HashEncoder:
    def encode(self, sentences, **kwargs):
        def word(w):
            return np.random.default_rng(zlib.crc32(w.encode())).standard_normal(16)

        return np.stack([sum(word(w) for w in text.lower().split()) for text in sentences])


def make():
    return HashEncoder()
'''
_namespace: dict = {}
exec(compile(HASH_SOURCE, "hash_encoder", "exec"), _namespace)
HashEncoder = _namespace["HashEncoder"]

WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa quebec "
         "romeo sierra tango uniform victor whiskey xray yankee zulu amber basil cedar dune").split()  # fmt: skip


def _pairs() -> list[tuple[str, str, float]]:
    """30 STS pairs of 6 words each; a pair shares `gold` (0..4) of its words."""
    rng = random.Random(0)
    out = []
    for i in range(30):
        first = rng.sample(WORDS, 6)
        shared = i % 5
        second = first[:shared] + rng.sample([w for w in WORDS if w not in first], 6 - shared)
        rng.shuffle(second)
        out.append((" ".join(first), " ".join(second), float(shared)))
    return out


PAIRS = _pairs()


@pytest.fixture()
def data_dir(tmp_path):
    labelled = [(f"{a} {'sports' if i % 2 else 'markets'}", "ab"[i % 2]) for i, (a, _, _) in enumerate(PAIRS)]
    return write_eval_data(tmp_path / "data", PAIRS, labelled)


def config_of(value) -> dict:  # noqa: ANN001 - a runs frame's config cell: a dict or its JSON
    return value if isinstance(value, dict) else json.loads(value)


def scores(db: Path, run_id: int) -> dict:
    frame = ResultsDB(db).scores()
    part = frame[frame["run_id"] == run_id]
    return {(r["suite"], r["dataset"], r["variant"], r["metric"]): float(r["value"]) for _, r in part.iterrows()}


def unit(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_sentence_transformer_object_scores_as_its_folder_and_reuses_its_row(reference_dir, data_dir, tmp_path):
    import torch
    from sentence_transformers import SentenceTransformer

    db = tmp_path / "r.sqlite"
    suites = "sts:stsb@elong+beir:scifact@elong+knn:agnews"
    by_path = lenbench.evaluate(str(reference_dir), suites, db=db, data_dir=str(data_dir), **SMALL)
    st = SentenceTransformer(str(reference_dir), device="cpu")  # the packaged all-MiniLM-L6-v2, from its folder
    first = lenbench.evaluate(st, suites, db=db, data_dir=str(data_dir), **SMALL)
    path_scores, object_scores = scores(db, by_path.run_ids[0]), scores(db, first.run_ids[0])
    assert first.run_ids != by_path.run_ids
    assert len(path_scores) == 10  # clean and elong-2 of spearman and 3 BEIR metrics, and kNN's 2 metrics clean
    assert object_scores.keys() == path_scores.keys()
    assert all(abs(object_scores[k] - path_scores[k]) < 1e-6 for k in path_scores)  # the stored precision

    again = lenbench.evaluate(st, suites, db=db, data_dir=str(data_dir), **SMALL)
    assert again.run_ids == first.run_ids and len(ResultsDB(db).runs()) == 2  # the same weights: its row, reused

    with torch.no_grad():
        st[0].auto_model.embeddings.word_embeddings.weight[1000, 0] += 1e-3  # one weight of one parameter changed
    changed = lenbench.evaluate(st, suites, db=db, data_dir=str(data_dir), **SMALL)
    runs = ResultsDB(db).runs().set_index("id")
    assert changed.run_ids[0] not in (by_path.run_ids[0], first.run_ids[0]) and len(runs) == 3
    prints = runs["config"].map(lambda c: config_of(c)["model_fingerprint"])
    assert prints[changed.run_ids[0]] != prints[first.run_ids[0]]
    assert "identity" not in config_of(runs.loc[first.run_ids[0], "config"])  # derived from its weights: unmarked


def test_transformers_model_with_its_tokenizer_scores_as_its_folder(tiny_model_dir, data_dir, tmp_path):
    from transformers import AutoModel, AutoTokenizer

    db = tmp_path / "r.sqlite"
    by_path = lenbench.evaluate(str(tiny_model_dir), "sts:stsb@elong", db=db, data_dir=str(data_dir), **SMALL)
    model = AutoModel.from_pretrained(str(tiny_model_dir))
    with pytest.raises(ConfigError, match="needs its tokenizer: pass tokenizer= or a \\(model, tokenizer\\) pair"):
        lenbench.evaluate(model, "sts:stsb@elong", db=db, data_dir=str(data_dir), **SMALL)
    pair = (model, AutoTokenizer.from_pretrained(str(tiny_model_dir)))
    got = lenbench.evaluate(pair, "sts:stsb@elong", db=db, data_dir=str(data_dir), **SMALL)
    assert scores(db, got.run_ids[0]) == pytest.approx(scores(db, by_path.run_ids[0]), abs=1e-6)
    keyword = lenbench.evaluate(model, "sts:stsb@elong", db=db, data_dir=str(data_dir),
                                tokenizer=AutoTokenizer.from_pretrained(str(tiny_model_dir)), **SMALL)  # fmt: skip
    assert keyword.run_ids == got.run_ids  # the same weights and tokenizer, either way: the same row


def test_opaque_encoder_over_sts_and_retrieval_with_attacks(data_dir, tmp_path, capsys):
    db = tmp_path / "r.sqlite"
    suites = "sts:stsb@elong,pad+beir:scifact@elong"
    first = lenbench.evaluate(HashEncoder(), suites, db=db, data_dir=str(data_dir), name="hash-16", **SMALL)
    got = scores(db, first.run_ids[0])
    # STS by hand: Spearman x100 of the cosines of the two sides against the gold scores
    n = len(PAIRS)
    vectors = unit(HashEncoder().encode([a for a, _, _ in PAIRS] + [b for _, b, _ in PAIRS]))
    expected = 100 * spearmanr((vectors[:n] * vectors[n:]).sum(1), [s for _, _, s in PAIRS]).statistic
    assert got[("sts", "stsb", "clean", "spearman")] == pytest.approx(expected, abs=1e-6)
    # word-level elongation repeats each text's words twice: a sum of word vectors points the same way, same score
    assert got[("sts", "stsb", "elong-2", "spearman")] == pytest.approx(expected, abs=1e-6)
    assert {v for (s, _, v, _) in got if s == "sts"} == {"clean", "elong-2", "pad-start-2", "pad-start-4",
                                                        "pad-middle-2", "pad-middle-4", "pad-end-2", "pad-end-4"}  # fmt: skip
    assert got[("sts", "stsb", "pad-end-4", "spearman")] != pytest.approx(expected, abs=1e-3)  # padding moves it
    # retrieval by hand: MRR@10 of the documents ranked by cosine to each query (title + " " + text)
    doc_ids = list(DOCS)
    docs = unit(HashEncoder().encode([f"{t} {x}" for t, x in DOCS.values()]))
    reciprocal = []
    for qid, text in QUERIES.items():
        order = [doc_ids[i] for i in np.argsort(-(docs @ unit(HashEncoder().encode([text]))[0]))]
        relevant = {d for q, d, s in QRELS if q == qid and s > 0}
        reciprocal.append(1 / (1 + min(order.index(d) for d in relevant)))
    assert got[("beir", "scifact", "clean", "mrr_at_10")] == pytest.approx(100 * np.mean(reciprocal), abs=1e-6)
    assert {v for (s, _, v, _) in got if s == "beir"} == {"clean", "elong-2"}

    run = ResultsDB(db).runs().iloc[0]
    config = config_of(run["config"])
    assert run["model"] == "hash-16" and config["identity"] == "declared, not derived"
    results_json = json.loads((Path(ResultsDB(db).get_run(first.run_ids[0])["output_dir"]) / "results.json").read_text())
    assert results_json["run"]["model"] == "hash-16" and results_json["config"]["identity"] == "declared, not derived"
    assert results_json["provenance"]["model_info"]["identity"] == "declared, not derived"
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(results_json, load_schema())

    capsys.readouterr()
    again = lenbench.evaluate(HashEncoder(), suites, db=db, data_dir=str(data_dir), name="hash-16",
                              max_len=32, elong="2")  # fmt: skip
    said = capsys.readouterr().out
    assert again.run_ids != first.run_ids and "identity is declared, not derived" in said and "scores a new row" in said
    assert scores(db, again.run_ids[0]) == pytest.approx(got, abs=1e-9)
    reused = lenbench.evaluate(HashEncoder(), suites, db=db, data_dir=str(data_dir), name="hash-16",
                               reuse_declared=True, max_len=32, elong="2")  # fmt: skip
    said = capsys.readouterr().out
    assert reused.run_ids == again.run_ids and "reusing it by declared identity" in said
    assert len(ResultsDB(db).runs()) == 2

    assert main(["results", "--db", str(db)]) == 0
    assert "hash-16 (identity declared, not derived)" in capsys.readouterr().out
    from leaderboard.grouping import evaluated_model_labels
    from leaderboard.queries import run_list

    assert set(evaluated_model_labels(run_list(ResultsDB(db)))) == {"hash-16 (identity declared, not derived)"}


def test_an_opaque_object_without_a_name_is_one_clear_error(data_dir, tmp_path):
    db = tmp_path / "r.sqlite"
    with pytest.raises(ConfigError) as caught:
        lenbench.evaluate(HashEncoder(), "sts:stsb@elong", db=db, data_dir=str(data_dir), **SMALL)
    message = str(caught.value)
    assert len(message.splitlines()) == 1 and "HashEncoder" in message
    assert "name it: lenbench.evaluate(obj, ..., name='my-encoder-v1')" in message
    assert not db.exists()  # refused before a database was made


def test_opaque_encoder_is_refused_by_a_suite_that_needs_token_embeddings(data_dir, tmp_path):
    from bench.evaluate.suites import SuiteError

    with pytest.raises(SuiteError, match="'hash-16' is scored through its own encode\\(\\).* cannot run diag"):
        lenbench.evaluate(HashEncoder(), "diag", db=tmp_path / "r.sqlite", data_dir=str(data_dir), name="hash-16",
                          max_len=32, quiet=True)  # fmt: skip


def test_bad_encode_output_is_one_line_naming_the_object(data_dir, tmp_path):
    class OneVector:
        def encode(self, sentences, **kwargs):  # noqa: ANN001, ANN003, ANN201 - the protocol as mteb states it
            return np.ones(8)

    with pytest.raises(ModelLoadError, match=r"'one'.*OneVector\.encode\(\d+ texts\) returned an array of shape \(8,\)"):
        lenbench.evaluate(OneVector(), "sts:stsb@elong", db=tmp_path / "r.sqlite", data_dir=str(data_dir), name="one",
                          **SMALL)  # fmt: skip


def test_model_file_and_name_on_the_command_line(data_dir, tmp_path, monkeypatch, capsys):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "enc.py").write_text(HASH_SOURCE)
    monkeypatch.chdir(folder)
    db = tmp_path / "r.sqlite"
    base = ["eval", "--suite", "sts:stsb@elong", "--elong", "2", "--data-dir", str(data_dir), "--max-len", "32",
            "--db", str(db)]  # fmt: skip
    assert main([*base, "--model", "enc.py:make"]) == 0
    run = ResultsDB(db).runs().iloc[0]
    assert run["model"] == "enc.py:make" and config_of(run["config"])["identity"] == "declared, not derived"
    api = lenbench.evaluate(HashEncoder(), "sts:stsb@elong", db=tmp_path / "api.sqlite", data_dir=str(data_dir),
                            name="hash", **SMALL)  # fmt: skip
    expected = scores(tmp_path / "api.sqlite", api.run_ids[0])
    assert scores(db, int(run["id"])) == pytest.approx(expected, abs=1e-9)  # the file's encoder is the same encoder
    capsys.readouterr()
    assert main([*base, "--model", "enc.py:make", "--reuse-declared"]) == 0
    assert "reusing it by declared identity" in capsys.readouterr().out and len(ResultsDB(db).runs()) == 1

    assert main([*base, "--model", "enc.py:nothing"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "enc.py defines no 'nothing'" in err[0] and "HashEncoder" in err[0]
    assert main([*base, "--model", "missing.py:make"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no file missing.py" in err[0]
    assert len(ResultsDB(db).runs()) == 1  # nothing recorded


def test_an_object_is_estimated_without_being_recorded(data_dir, tmp_path):
    db = tmp_path / "r.sqlite"
    estimate = lenbench.evaluate(HashEncoder(), "sts:stsb@elong", db=db, data_dir=str(data_dir), name="hash-16",
                                 estimate=True, **SMALL)  # fmt: skip
    assert [(d.suite, d.dataset) for d in estimate.datasets] == [("sts", "stsb")] and estimate.seconds > 0
    assert not db.exists()


# ------------------------------------------------------------------------------------------- a backbone object
def _run_options(tmp_path: Path, data_dir: Path) -> dict:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(f"Sentence {i} is about topic {i % 5}. It has more words {i}." for i in range(40)) + "\n")
    return {"db": tmp_path / "r.sqlite", "out": str(tmp_path / "runs"), "data_dir": str(data_dir), "corpus": str(corpus),
            "budget": "steps=2", "batch_size": 4, "max_len": 32, "elong": "2", "quiet": True}  # fmt: skip


def test_a_backbone_object_trains_from_its_folder_and_reuses_its_rows(tiny_model_dir, data_dir, tmp_path):
    import torch
    from transformers import AutoModel, AutoTokenizer

    options = _run_options(tmp_path, data_dir)
    model, tokenizer = AutoModel.from_pretrained(str(tiny_model_dir)), AutoTokenizer.from_pretrained(str(tiny_model_dir))
    first = lenbench.run("simcse", "sts:stsb@elong", backbone=(model, tokenizer), **options)
    runs = ResultsDB(options["db"]).runs()
    assert sorted(runs["method"]) == ["simcse", "vanilla"]
    (folder,) = set(runs["backbone"])  # both rows name the folder the object was saved as
    assert Path(folder).parent == tmp_path / "runs" / "backbones" and Path(folder).name.startswith("object-")
    by_path = lenbench.evaluate(str(tiny_model_dir), "sts:stsb@elong", db=tmp_path / "path.sqlite",
                                data_dir=str(data_dir), max_len=32, elong="2", quiet=True)  # fmt: skip
    vanilla = scores(options["db"], first.runs["vanilla"][0])
    assert vanilla == pytest.approx(scores(tmp_path / "path.sqlite", by_path.run_ids[0]), abs=1e-6)  # its weights, as saved

    again = lenbench.run("simcse", "sts:stsb@elong", backbone=model, tokenizer=tokenizer, **options)
    assert again.run_ids == first.run_ids and len(ResultsDB(options["db"]).runs()) == 2  # the same weights: reused

    with torch.no_grad():
        model.embeddings.word_embeddings.weight[1000, 0] += 1e-3  # one weight changed
    changed = lenbench.run("simcse", "sts:stsb@elong", backbone=(model, tokenizer), **options)
    runs = ResultsDB(options["db"]).runs()
    assert set(changed.run_ids).isdisjoint(first.run_ids) and len(runs) == 4  # another model: new rows, none reused
    assert len(set(runs["backbone"])) == 2


def test_a_backbone_named_by_a_file_on_the_command_line(tiny_model_dir, data_dir, tmp_path, monkeypatch, capsys):
    options = _run_options(tmp_path, data_dir)
    (tmp_path / "backbone.py").write_text(
        "from sentence_transformers import SentenceTransformer\n\n\n"
        f"def make():  # the folder's transformer under a mean pooling\n    return SentenceTransformer({str(tiny_model_dir)!r}, device='cpu')\n"
    )  # fmt: skip
    (tmp_path / "hash.py").write_text(HASH_SOURCE)
    monkeypatch.chdir(tmp_path)
    base = ["run", "--method", "simcse", "--suite", "sts:stsb@elong", "--elong", "2", "--budget", "steps=2",
            "--batch-size", "4", "--max-len", "32", "--data-dir", str(data_dir), "--corpus", options["corpus"],
            "--out", options["out"], "--db", str(options["db"]), "--no-progress"]  # fmt: skip
    assert main([*base, "--backbone", "backbone.py:make"]) == 0
    runs = ResultsDB(options["db"]).runs()
    (folder,) = set(runs["backbone"])
    assert Path(folder).name.startswith("object-") and (Path(folder) / "config.json").is_file()
    api = lenbench.run("simcse", "sts:stsb@elong", backbone=str(tiny_model_dir), **{**options, "db": tmp_path / "api.sqlite"})
    trained = runs.set_index("method").loc["simcse", "id"]
    # the file's SentenceTransformer is the folder's weights: trained alike, scored alike
    assert scores(options["db"], int(trained)) == pytest.approx(scores(tmp_path / "api.sqlite", api.runs["simcse"][0]), abs=1e-6)

    capsys.readouterr()
    assert main([*base, "--backbone", "hash.py:make"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "hash.py:make" in err[0] and "can be scored (bench eval --model" in err[0]
    assert len(ResultsDB(options["db"]).runs()) == 2  # nothing recorded
