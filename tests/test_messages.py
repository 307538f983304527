"""Messages that match the facts: the same datasets named with and without --download, and pointers that exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.data.errors import DatasetMissingError
from bench.evaluate.runner import PAPER_SWEEP, locate_datasets
from bench.evaluate.suites import EvalContext, parse_suites

REPO = Path(__file__).resolve().parent.parent


def _named(message: str) -> tuple[int, list[str]]:
    """The count an error gives first, and which catalog datasets (cqadupstack's forums one by one) it names."""
    from bench.data.catalog import BEIR14, CATALOG

    count = int(re.match(r"(\d+) ", message).group(1))
    listed = message.split(". ")[0]
    return count, sorted(name for name in {*BEIR14, *CATALOG} if re.search(rf"\b{re.escape(name)}\b", listed))


def test_beir14_is_counted_and_named_alike_with_and_without_download(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no ./data, no ../shared/data

    def unreachable(url, timeout=None):
        raise DatasetMissingError(f"cannot reach the host of {url}")

    monkeypatch.setattr("bench.data.download.check_reachable", unreachable)
    suites = parse_suites(["beir14"])
    with pytest.raises(DatasetMissingError) as plain:
        locate_datasets(suites, EvalContext())
    with pytest.raises(DatasetMissingError) as download:
        locate_datasets(suites, EvalContext(fetch=True))
    count, names = _named(str(plain.value))
    assert count == 14 == len(names) and "cqadupstack" in names and not any(n.startswith("cqadupstack-") for n in names) and "cqadupstack (12 forums)" in str(plain.value)
    assert _named(str(download.value)) == (count, names)
    assert "scifact.zip" not in str(download.value)
    for message in (str(plain.value), str(download.value)):  # the paper's BEIR experiment, a file that exists
        assert f"bench sweep {PAPER_SWEEP}" in message
    assert (REPO / PAPER_SWEEP).is_file()


def test_a_selection_of_beir_sets_gets_no_paper_pointer(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DatasetMissingError) as exc:
        locate_datasets(parse_suites(["beir:scifact"]), EvalContext())
    assert PAPER_SWEEP not in str(exc.value)
