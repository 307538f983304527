"""A hub id given offline (`bench run --backbone bert-base-uncased`, `bench eval --model org/name`) is refused with one
line before any run row is written, without transformers' download retries: the offline variables are read, else
one short connection attempt decides (bench.runtime.hub)."""

from __future__ import annotations

import pytest

from bench.cli import main
from results_db import ResultsDB


@pytest.fixture()
def no_download(monkeypatch, tmp_path):
    """An empty hub cache, and any call into transformers' loaders fails the test (the check must come first)."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    import huggingface_hub.constants as constants
    import transformers

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub-cache"))

    def refuse(*a, **k):
        raise AssertionError("transformers was asked to load a model")

    monkeypatch.setattr(transformers.AutoModel, "from_pretrained", refuse)
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", refuse)


CASES = {
    "run --backbone": ["run", "--backbone", "bert-base-uncased", "--budget", "steps=1"],
    "eval --model": ["eval", "--model", "sentence-transformers/all-mpnet-base-v2", "--suite", "sts:stsb"],
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("how", ["HF_HUB_OFFLINE", "unreachable host"])
def test_hub_id_offline_fails_at_once_with_no_row(case, how, no_download, monkeypatch, tmp_path, capsys):
    if how == "unreachable host":  # no offline variable: the connection attempt decides (a closed local port)
        for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    db = tmp_path / "r.sqlite"
    assert main([*CASES[case], "--db", str(db)]) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("bench: error: "), err
    option = CASES[case][1]
    assert f"({option})" in lines[0] and "offline here" in lines[0]
    assert ("HF_HUB_OFFLINE is set" if how == "HF_HUB_OFFLINE" else "cannot reach 127.0.0.1") in lines[0]
    assert not db.exists() or ResultsDB(db).runs().empty  # no row written


def test_a_cached_hub_id_is_not_refused(no_download, monkeypatch, tmp_path):
    """What the hub cache holds loads offline: the check lets it through."""
    from bench.encode.loading import check_hub_model

    snapshot = tmp_path / "hub-cache" / "models--org--model" / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    refs = snapshot.parent.parent / "refs"
    refs.mkdir()
    (refs / "main").write_text("0" * 40)
    check_hub_model("org/model")  # no error
    with pytest.raises(Exception, match="offline here"):
        check_hub_model("org/other")
