"""The leaderboard in a real browser: `bench leaderboard` serves a filled database on 127.0.0.1, headless Chromium
(the system's /usr/bin/chromium, driven by playwright; no `playwright install`) loads it, reads the table, applies a
filter and saves screenshots under the test's tmp_path.

Streamlit draws tables on a canvas (glide data grid); the grid also keeps an accessible <table role="grid"> of the
rows it draws, which is what the test reads.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.test_leaderboard_fixtures import fill_db

CHROMIUM = os.environ.get("LENBENCH_CHROMIUM", "/usr/bin/chromium")
START_TIMEOUT_S = 120
TABLE = "[data-testid='stDataFrame']"


def _chromium() -> str:
    if Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK):
        return CHROMIUM
    found = shutil.which("chromium")
    if found is None:
        pytest.skip(f"no Chromium at {CHROMIUM} or on PATH (apt-get install chromium; .ci/run installs it)")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _bench_command() -> list[str]:
    script = Path(sys.executable).parent / "bench"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from bench.cli import main; sys.exit(main())"]


@pytest.fixture
def server(tmp_path):
    """`bench leaderboard --db <filled db> --port <free port>`; yields the URL once Streamlit answers."""
    db = fill_db(tmp_path / "results.sqlite")
    port = _free_port()
    log = (tmp_path / "server.log").open("w")
    proc = subprocess.Popen(
        [*_bench_command(), "leaderboard", "--db", str(db), "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=tmp_path,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"bench leaderboard exited ({proc.returncode}):\n{(tmp_path / 'server.log').read_text()}")
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"the leaderboard did not answer within {START_TIMEOUT_S}s:\n{(tmp_path / 'server.log').read_text()}")
            time.sleep(0.25)
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)  # bench exec'd into Streamlit: this stops the server itself
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _rows(page) -> list[list[str]]:  # noqa: ANN001
    """The visible rows of the first table, from the grid's accessible DOM."""
    return page.eval_on_selector_all(
        f"{TABLE} table[role='grid'] tbody tr",
        "rows => rows.map(r => Array.from(r.querySelectorAll('td')).map(td => td.textContent.trim()))",
    )


def _header(page) -> list[str]:  # noqa: ANN001
    return page.eval_on_selector_all(f"{TABLE} table[role='grid'] thead th", "hs => hs.map(h => h.textContent.trim())")


def _wait_rows(page, predicate, timeout_s: float = 60) -> list[list[str]]:  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    rows: list[list[str]] = []
    while time.monotonic() < deadline:
        try:
            rows = _rows(page)
        except Exception:  # noqa: BLE001 - the table is being re-rendered
            rows = []
        if rows and predicate(rows):
            return rows
        time.sleep(0.25)
    raise AssertionError(f"the table never matched; last rows: {rows}")


def test_leaderboard_in_chromium(server, tmp_path):
    chromium = _chromium()
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            page.set_default_timeout(90_000)
            page.goto(server)
            page.wait_for_selector(f"{TABLE} table[role='grid'] tbody tr", state="attached")
            header = _header(page)
            assert header[:6] == ["method", "backbone", "budget", "corpus", "seeds", "run ids"]
            assert header[-4:] == ["sts12", "stsb", "sickr", "average"]
            rows = _wait_rows(page, lambda r: len(r) == 4)
            assert {(r[0], r[1]) for r in rows} == {
                ("laser3-self", "bert-tiny"),
                ("simcse", "bert-tiny"),
                ("simcse", "minilm"),
                ("vanilla", "minilm"),
            }
            assert rows[0][0] == "laser3-self"  # best average first
            assert ["1, 2"] == [r[5] for r in rows if r[:2] == ["simcse", "bert-tiny"]]  # two seeds, one row
            page.wait_for_timeout(500)  # let the canvas paint before the picture
            page.screenshot(path=str(tmp_path / "leaderboard.png"), full_page=True)

            # Sortable: a click on the last column's header (average, drawn on the canvas) sorts ascending.
            box = page.locator(TABLE).first.bounding_box()
            page.mouse.click(box["x"] + box["width"] - 40, box["y"] + 17)
            rows = _wait_rows(page, lambda r: r[0][0] == "vanilla")
            averages = [float(r[-1]) for r in rows]
            assert averages == sorted(averages)
            page.screenshot(path=str(tmp_path / "leaderboard-sorted.png"), full_page=True)

            # Filter: Method = simcse (the sidebar's first multiselect).
            sidebar = page.locator("[data-testid='stSidebar']")
            method = sidebar.locator("[data-testid='stMultiSelect']").filter(has_text="Method")
            method.locator("input").click()
            page.get_by_role("option", name="simcse", exact=True).click()
            page.keyboard.press("Escape")
            rows = _wait_rows(page, lambda r: len(r) == 2)
            assert {r[0] for r in rows} == {"simcse"}
            assert {r[1] for r in rows} == {"bert-tiny", "minilm"}
            page.wait_for_timeout(500)
            page.screenshot(path=str(tmp_path / "leaderboard-simcse.png"), full_page=True)
        finally:
            browser.close()
    for name in ("leaderboard.png", "leaderboard-sorted.png", "leaderboard-simcse.png"):
        shot = tmp_path / name
        assert shot.stat().st_size > 10_000, f"{shot} looks empty"
