import gzip
import json

import pytest

from bench.data import DataError, DatasetMissingError, locate, read_beir, read_labelled, read_sts
from tests.conftest import write_sts


def make_beir(root, corpus, queries, qrels, gz=False):
    root.mkdir(parents=True, exist_ok=True)
    (root / "qrels").mkdir(exist_ok=True)

    def write(path, text):
        if gz:
            with gzip.open(f"{path}.gz", "wt", encoding="utf-8") as fh:
                fh.write(text)
        else:
            path.write_text(text)

    write(root / "corpus.jsonl", "\n".join(json.dumps(d) for d in corpus) + "\n")
    write(root / "queries.jsonl", "\n".join(json.dumps(q) for q in queries) + "\n")
    (root / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{s}\n" for q, d, s in qrels)
    )
    return root


CORPUS = [{"_id": "d1", "title": "Cats", "text": "cats purr."}, {"_id": "d2", "title": "", "text": "dogs bark."}]
QUERIES = [{"_id": "q1", "text": "what purrs"}, {"_id": "q2", "text": "unjudged query"}]


@pytest.mark.parametrize("gz", [False, True])
def test_read_beir_plain_and_gz(tmp_path, gz):
    data = read_beir(make_beir(tmp_path / "toy", CORPUS, QUERIES, [("q1", "d1", 1)], gz=gz))
    assert data.doc_text("d1") == "Cats cats purr." and data.doc_text("d2") == "dogs bark."
    assert data.queries == {"q1": "what purrs"}  # only judged queries are evaluated
    assert data.qrels == {"q1": {"d1": 1}}


def test_qrels_naming_unknown_doc_is_an_error_naming_file_and_line(tmp_path):
    root = make_beir(tmp_path / "toy", CORPUS, QUERIES, [("q1", "d1", 1), ("q1", "nope", 1)])
    with pytest.raises(DataError, match=r"test\.tsv:3: corpus-id 'nope'"):
        read_beir(root)


def test_corrupt_jsonl_line_is_named(tmp_path):
    root = make_beir(tmp_path / "toy", CORPUS, QUERIES, [("q1", "d1", 1)])
    with open(root / "corpus.jsonl", "a") as fh:
        fh.write('{"_id": "d3", "text": \n')
    with pytest.raises(DataError, match=r"corpus\.jsonl:3: not valid JSON"):
        read_beir(root)


def test_empty_corpus_is_an_error(tmp_path):
    root = make_beir(tmp_path / "toy", [], QUERIES, [])
    with pytest.raises(DataError, match="corpus of 'toy' is empty"):
        read_beir(root)


def test_read_sts_and_split_filter(tmp_path):
    path = tmp_path / "x.tsv"
    path.write_text("sentence1\tsentence2\tscore\tsplit\na\tb\t1.0\ttrain\nc\td\t2.5\ttest\n")
    assert read_sts(path).scores == [1.0, 2.5]
    only_test = read_sts(path, split="test")
    assert only_test.sentences1 == ["c"] and only_test.scores == [2.5]


def test_read_sts_bad_score_names_line(tmp_path):
    path = write_sts(tmp_path / "x.tsv", [("a", "b", 1.0), ("c", "d", "high")])
    with pytest.raises(DataError, match=r"x\.tsv:3: score 'high'"):
        read_sts(path)


def test_read_labelled(tmp_path):
    path = tmp_path / "l.jsonl"
    path.write_text('{"text": "a", "label": "x"}\n\n{"text": "b", "label": 2}\n')
    data = read_labelled(path)
    assert data.texts == ["a", "b"] and data.labels == ["x", "2"]
    path.write_text('{"text": "a"}\n')
    with pytest.raises(DataError, match=r"l\.jsonl:1: missing field\(s\) \['label'\]"):
        read_labelled(path)


def test_missing_dataset_error_names_dataset_folders_and_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DatasetMissingError) as err:
        locate("scifact", tmp_path / "nowhere")
    msg = str(err.value)
    assert "'scifact'" in msg and str(tmp_path / "nowhere") in msg
    assert "beir/scifact/corpus.jsonl" in msg and "beir/scifact/qrels/test.tsv" in msg


def test_locate_finds_files_under_data_dir(tmp_path):
    write_sts(tmp_path / "sts" / "stsb-test.tsv", [("a", "b", 1.0)])
    assert locate("stsb", tmp_path) == tmp_path / "sts" / "stsb-test.tsv"
