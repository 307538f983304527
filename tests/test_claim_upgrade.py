"""A claim's database that an earlier lenbench wrote gives its verdict again: tests/data/release/claim-schema6.sqlite
(written by lenbench at schema 6, see the folder's README) is re-keyed by `bench db upgrade` (schema 7: the trained
runs' precisions; schema 8: the untrained reference point's comparison), so `bench claim --no-run`, under an empty
cache, finds all 7 runs and prints the verdict that lenbench stored; `--no-run` on the file as it is does the same
through its upgraded copy in memory, leaving the file byte for byte as it was."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from bench.cli import main

RELEASE = Path(__file__).resolve().parent / "data" / "release"

pytestmark = pytest.mark.usefixtures("one_thread")


def _stored_verdict(path: Path) -> tuple[str, list[tuple]]:
    with sqlite3.connect(path) as conn:
        summary, rows = conn.execute("SELECT summary, rows FROM claim_verdicts ORDER BY id DESC").fetchone()
    return summary, [(r["comparator"], r["variant"], r["verdict"]) for r in json.loads(rows)]


def _shown_rows(out: str) -> list[tuple]:
    """(comparator, variant, verdict) of each row of the verdict table bench claim printed."""
    table = out[out.index("minus each comparator"):].splitlines()[2:]
    rows = []
    for line in table:
        if not line.strip():
            break
        words = line.split()
        rows.append((words[0], words[3], words[-1]))
    return rows


@pytest.fixture
def release(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # its runs scored the first 20 pairs (--limit before the seeded sample): today's claim says so, or it asks for a
    # sample, which those rows are not
    text = (RELEASE / "claim-tiny.toml").read_text()
    (tmp_path / "claim-as-released.toml").write_text(text)
    (tmp_path / "claim-tiny.toml").write_text(text.replace("limit = 20\n", 'limit = 20\nlimit_mode = "first"\n'))
    shutil.copy(RELEASE / "claim-schema6.sqlite", tmp_path / "r.sqlite")
    return tmp_path / "r.sqlite"


def test_an_upgraded_claim_database_of_an_earlier_release_gives_its_verdict_again(release, capsys):
    summary, rows = _stored_verdict(release)
    assert main(["db", "upgrade", "--db", str(release)]) == 0
    capsys.readouterr()
    assert main(["claim", "claim-tiny.toml", "--db", str(release), "--no-run"]) == 0
    out = capsys.readouterr().out
    assert "missing" not in out and "INCOMPLETE" not in out, out
    assert summary in out  # the stored verdict's line, word for word
    assert _shown_rows(out) == rows


def test_no_run_on_the_earlier_release_as_it_is_gives_the_verdict_and_leaves_the_file(release, capsys):
    summary, _ = _stored_verdict(release)
    before = release.read_bytes()
    assert main(["claim", "claim-tiny.toml", "--db", str(release), "--no-run"]) == 0
    assert summary in capsys.readouterr().out
    assert release.read_bytes() == before


def test_the_claim_as_released_now_asks_for_a_sample_and_says_which_field_differs(release, capsys):
    """Unchanged, the released claim file's `limit = 20` draws a seeded sample today: none of the stored runs (the
    first 20 pairs) is that point, and --no-run says so for each, naming limit_mode with both values."""
    assert main(["db", "upgrade", "--db", str(release)]) == 0
    capsys.readouterr()
    main(["claim", "claim-as-released.toml", "--db", str(release), "--no-run"])
    out = capsys.readouterr().out
    assert "missing" in out and "limit_mode" in out, out
