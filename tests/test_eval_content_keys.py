"""Results keyed by content: a resumed `bench eval` keeps a finished dataset's scores only while its files are the
files they were computed from; a changed file is scored again, and a line says so."""

from __future__ import annotations

import os
import signal
import time

from bench.cli import main
from results_db import ResultsDB
from tests.test_credentials import _beir


def _two_sets(tmp_path):
    data = _beir(tmp_path / "data")
    _beir(tmp_path / "other")
    (tmp_path / "other" / "beir" / "scifact").rename(data / "beir" / "nfcorpus")
    return data


def test_a_resumed_eval_scores_again_a_dataset_whose_file_changed(tmp_path, monkeypatch, capsys):
    data, db_path = _two_sets(tmp_path), tmp_path / "r.sqlite"
    argv = ["eval", "--model", "bm25", "--suite", "beir:scifact,nfcorpus", "--data-dir", str(data), "--db", str(db_path), "--no-progress"]
    original = ResultsDB.add_scores

    def add_then_fail(self, run_id, records):
        original(self, run_id, records)
        os.kill(os.getpid(), signal.SIGINT)  # the first dataset is committed, then the run stops
        time.sleep(0.05)

    monkeypatch.setattr(ResultsDB, "add_scores", add_then_fail)
    assert main(argv) == 130
    monkeypatch.setattr(ResultsDB, "add_scores", original)
    first = ResultsDB(db_path).scores()
    assert set(first["dataset"]) == {"scifact"}
    assert first.loc[first["metric"] == "ndcg_at_10", "value"].iloc[0] == 100.0  # q1 finds d1
    qrels = data / "beir" / "scifact" / "qrels" / "test.tsv"
    qrels.write_text("query-id\tcorpus-id\tscore\nq1\td3\t1\n")  # edited: now d3 is relevant, and d1 ranks first
    capsys.readouterr()
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert f"beir:scifact: {qrels} changed since this run scored it; scored again" in out
    runs = ResultsDB(db_path).runs()
    assert runs["status"].tolist() == ["finished"]
    scores = ResultsDB(db_path).scores()
    now = scores[(scores["dataset"] == "scifact") & (scores["metric"] == "ndcg_at_10")]["value"].tolist()
    assert len(now) == 1 and now[0] < 100.0  # the score of the file as it is now, not the old one
    from bench.runtime.provenance import file_sha256

    assert runs["data_fingerprint"].iloc[0][str(qrels)] == file_sha256(qrels)[:16]


def test_an_unchanged_file_is_not_scored_again(tmp_path, monkeypatch, capsys):
    data, db_path = _two_sets(tmp_path), tmp_path / "r.sqlite"
    argv = ["eval", "--model", "bm25", "--suite", "beir:scifact,nfcorpus", "--data-dir", str(data), "--db", str(db_path), "--no-progress"]
    original = ResultsDB.add_scores
    calls = []

    def add_then_fail(self, run_id, records):
        original(self, run_id, records)
        calls.append(records[0].dataset)
        if len(calls) == 1:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)

    monkeypatch.setattr(ResultsDB, "add_scores", add_then_fail)
    assert main(argv) == 130
    assert main(argv) == 0
    assert calls == ["scifact", "nfcorpus"]  # scifact was not scored a second time
    assert "scored again" not in capsys.readouterr().out


def test_two_model_folders_of_one_name_never_share_a_leaderboard_row(tmp_path, tiny_model_dir, monkeypatch):
    """`enc` typed in two folders holding different weights: two rows, each with its own score; the same weights
    evaluated twice (another folder, another name) stay one row per name."""
    import shutil

    from bench.encode.backbones import make_random_bert
    from leaderboard import grouping, queries
    from tests.conftest import write_sts

    write_sts(tmp_path / "data" / "sts" / "stsb-test.tsv", [("a b c", "a b d", 3.0), ("x y", "z w", 1.0), ("cat dog", "dog cat", 4.0)])
    shutil.copytree(tiny_model_dir, tmp_path / "x" / "enc")
    make_random_bert(tmp_path / "y" / "enc", size="tiny", seed=1)
    db = tmp_path / "r.sqlite"
    for parent in ("x", "y"):
        monkeypatch.chdir(tmp_path / parent)
        assert main(["eval", "--model", "enc", "--suite", "sts:stsb", "--data-dir", str(tmp_path / "data"), "--db", str(db),
                     "--max-len", "32", "--no-progress"]) == 0  # fmt: skip
    runs = grouping.group_runs(queries.run_list(ResultsDB(db, read_only=True)))
    assert runs["model"].tolist() == ["enc", "enc"]  # as typed
    codes, groups = grouping.coded_groups(runs)
    assert len(groups) == 2 and len(set(codes)) == 2
    assert all(b.startswith("enc @") for b in groups["backbone"])
