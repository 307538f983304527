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


def test_the_eta_counts_training_only_once_it_has_been_timed():
    """After the untrained baseline nothing says how long training takes: the line says so instead of guessing from
    the baseline's (evaluation-only) time; after a training the rest is measured training + evaluation per run."""
    from bench.experiment.progress_lines import Eta

    eta = Eta([False, True, True])  # vanilla, then two trained methods
    eta.done(None, 90.0)
    first = eta.line("vanilla", 1, 3, 95.0)
    assert "2 training(s) not timed yet" in first and "about 3 min" in first  # 2 evaluations x 90 s
    eta.done(120.0, 60.0)
    second = eta.line("laser3-self", 2, 3, 300.0)
    seconds, unmeasured = eta.left()
    assert unmeasured == 0 and seconds == pytest.approx(120.0 + (90.0 + 60.0) / 2)
    assert "about 3 min 15 s left" in second and "training 2 min" in second
    eta.done(100.0, 70.0)
    assert eta.line("simcse", 3, 3, 480.0) == "[simcse] 3/3 runs done, 8 min 00 s elapsed"
