"""Citations: every registered method, suite, attack family and catalog dataset declares what to cite, each key is
in references.bib, and `bench results --cite` / the API print exactly the bibliography of what a table rests on."""

from __future__ import annotations

import re

import numpy as np
import pytest

from bench.cli import main
from bench.data.catalog import CATALOG
from bench.evaluate.attacks.registry import FAMILIES
from bench.evaluate.suites.metadata import SUITES
from bench.report.citations import BIB_FILE, bibliography, collect, resolve
from bench.train.registry import all_methods
from results_db import ItemValues, ResultsDB, ScoreRecord

KEY = re.compile(r"^@\w+\{([^,]+),", re.MULTILINE)


def _declared():
    yield from ((f"method {s.name}", s.cite) for s in all_methods())
    yield from ((f"suite {m.name}", m.cite) for m in SUITES.values())
    yield from ((f"attack {f.name}", f.cite) for f in FAMILIES.values())
    yield from ((f"dataset {d.name}", d.cite) for d in CATALOG.values())


@pytest.mark.parametrize("what,cites", list(_declared()), ids=lambda v: v if isinstance(v, str) else None)
def test_every_registered_method_suite_attack_and_dataset_declares_a_resolvable_citation(what, cites):
    assert cites, f"{what} declares no citation (cite=...)"
    for cite in cites:
        key, text = resolve(cite)  # an unknown key raises
        assert text.startswith("@") and key in text


def test_the_bibliography_parses_whole_with_unique_keys():
    text = BIB_FILE.read_text(encoding="utf-8")
    keys = KEY.findall(text)
    assert len(keys) == len(set(keys)) == len(bibliography())
    for key, entry in bibliography().items():
        assert entry.count("{") == entry.count("}"), key  # balanced braces: each entry ends where the next starts


def test_a_plugin_gives_a_whole_entry_and_a_bad_one_is_named():
    key, text = resolve("@article{mine2026, title = {Mine}, year = {2026}}")
    assert key == "mine2026"
    with pytest.raises(ValueError, match="not a BibTeX entry"):
        resolve("@not bibtex")
    with pytest.raises(KeyError, match="nosuchkey"):
        resolve("nosuchkey")


def test_collect_dedupes_and_says_what_each_entry_is_cited_for():
    cites = collect(methods=["laser3-self", "laser3-intra", "simcse"], suites=[("beir", "scifact"), ("beir", "nfcorpus")],
                    variants=["clean", "elong-2"], correction="holm")  # fmt: skip
    keys = [c.key for c in cites]
    assert len(keys) == len(set(keys))
    assert keys[0] == "lenbench"
    by_key = {c.key: c.cited_for for c in cites}
    assert by_key["xiao2023length"] == ("method laser3-self", "method laser3-intra", "attack elong-2")
    assert by_key["thakur2021beir"] == ("suite beir", "dataset scifact", "dataset nfcorpus")
    assert {"wadden2020scifact", "boteva2016nfcorpus", "gao2021simcse", "efron1993bootstrap", "holm1979simple"} <= set(keys)
    assert "benjamini1995fdr" not in keys and "cer2017semeval" not in keys  # nothing the table does not show
    assert "benjamini1995fdr" in {c.key for c in collect(methods=["simcse"], correction="bh")}
    assert not {"efron1993bootstrap", "holm1979simple"} & {c.key for c in collect(methods=["simcse"], correction=None)}


def _db(path):
    db = ResultsDB(path)
    ids = [str(i) for i in range(10)]
    for method, suite, dataset, variant in (("vanilla", "sts", "stsb", "clean"), ("simcse", "sts", "stsb", "elong-2")):
        run = db.create_run(kind="train", model="m", method=method, suite=suite, config={}, config_hash=method)
        items = ItemValues("spearman", ids, list(np.linspace(0, 1, 10)), list(np.linspace(0, 5, 10)))
        db.add_scores(run, [ScoreRecord(suite, dataset, "spearman", 80.0, 10, variant, items)])
        db.finish_run(run, status="finished")
    run = db.create_run(kind="eval", model="bm25", method="", suite="beir", config={}, config_hash="bm25")
    db.add_scores(run, [ScoreRecord("beir", "scifact", "ndcg_at_10", 60.0, 300, "clean", None)])
    db.finish_run(run, status="finished")
    db.engine.dispose()
    return path


def test_bench_results_cite_prints_the_bibliography_of_the_shown_runs(tmp_path, capsys):
    path = str(_db(tmp_path / "r.sqlite"))
    assert main(["results", "--db", path, "--cite", "--run", "1", "--run", "2"]) == 0
    out = capsys.readouterr().out
    keys = KEY.findall(out)
    assert len(keys) == len(set(keys))
    assert {"lenbench", "gao2021simcse", "cer2017semeval", "xiao2023length", "efron1993bootstrap"} <= set(keys)
    assert "thakur2021beir" not in keys and "robertson2009bm25" not in keys  # run 3 is not shown
    assert main(["results", "--db", path, "--cite", "--run", "3"]) == 0
    keys = KEY.findall(capsys.readouterr().out)
    assert {"thakur2021beir", "wadden2020scifact", "robertson2009bm25"} <= set(keys) and "gao2021simcse" not in keys


def test_the_api_gives_the_same_bibliography(tmp_path, capsys):
    import lenbench

    path = str(_db(tmp_path / "r.sqlite"))
    assert main(["results", "--db", path, "--cite"]) == 0
    assert lenbench.load(path).citations() == capsys.readouterr().out
