"""Stored text stays inert in a real browser: every text column and every name a run or score carries (method,
suite, dataset, variant, metric, attack, backbone, corpus, model, budget, command, error, code version, sweep,
config and package keys) holds HTML, a script, Markdown images and links and a bare URL, all pointing at a beacon
HTTP server on loopback. Headless Chromium opens every view, picks the planted suite, metric and dataset, opens
every sidebar selector and hovers over every table header (column help is a Markdown tooltip); the beacon must
receive no request and no element may carry its address (no <img>, <a>, <script> or attribute made from stored
text).
"""

from __future__ import annotations

import http.server
import threading
from pathlib import Path

import numpy as np
import pytest

from results_db import ItemValues, ResultsDB, ScoreRecord
from tests.test_leaderboard_browser import TABLE, VIEWPORT, _chromium, _go, _number, _serve, _settle
from tests.test_leaderboard_fixtures import fill_extras


class _Beacon(http.server.BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.hits.append(self.path)
        self.send_response(204)
        self.end_headers()

    do_POST = do_GET

    def log_message(self, *args) -> None:  # noqa: ANN002 - quiet
        pass


@pytest.fixture
def beacon():
    _Beacon.hits = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Beacon)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], _Beacon.hits
    finally:
        server.shutdown()
        server.server_close()


def payload(field: str, port: int) -> str:
    """A name that, read as Markdown or HTML anywhere, makes the browser call the beacon (each kind its own path)."""
    u = f"http://127.0.0.1:{port}"
    return (f"{field} ![i]({u}/md-img-{field}.png) [l]({u}/md-link-{field}) <img src=\"{u}/html-img-{field}.png\"> "
            f"<script>fetch('{u}/script-{field}')</script> {u}/auto-{field} <a href=\"{u}/a-{field}\">a</a>")  # fmt: skip


def fill_planted(path: Path, port: int) -> dict[str, str]:
    """fill_extras (runs 1-10) plus a trained run (11) and an imported reference (12) whose every text is a payload,
    scored on planted datasets, variants (an attack family), metrics and a planted suite."""
    fill_extras(path)
    P = {f: payload(f, port) for f in ("method", "backbone", "corpus", "budget", "model", "command", "error", "code",
                                      "sweep", "point", "dataset", "variant", "metric", "suite", "key", "value",
                                      "reference", "attack")}  # fmt: skip
    variant = f"{P['attack']}-2"  # an attack family of its own (the text before the first '-')
    db = ResultsDB(path)
    rng = np.random.default_rng(7)
    ids = [str(i) for i in range(40)]
    gold = np.round(rng.uniform(0, 5, 40), 2).tolist()

    def items() -> ItemValues:
        return ItemValues("spearman", ids, (np.asarray(gold) / 5 + rng.normal(0, 0.5, 40) * 0.3).tolist(), gold)

    for kind, method, model in (("train", P["method"], P["model"]), ("reference", "", P["reference"])):
        run = db.create_run(
            kind=kind, model=model, method=method, backbone=P["backbone"] if kind == "train" else "",
            suite=P["suite"], train_corpus=P["corpus"] if kind == "train" else "", budget_label=P["budget"] if kind == "train" else "",
            budget_asked={P["key"]: 1}, budget_consumed={P["key"]: 1}, config={P["key"]: P["value"]}, config_hash=P["value"],
            code_version=P["code"], package_versions={P["key"]: P["value"]}, data_fingerprint={P["key"]: P["value"]},
            command=P["command"], output_dir=P["value"], sweep=P["sweep"], sweep_point=P["point"], status="running",
            model_info={"parameters": 4_400_000, "embedding_dim": 128, "max_tokens": 512},
        )  # fmt: skip
        records = [ScoreRecord("sts", d, "spearman", 50.0 + rng.normal(), 40, v, items(), {"changed_frac": 0.5} if v != "clean" else None)
                   for d in ("stsb", P["dataset"]) for v in ("clean", "elong-2", variant)]  # fmt: skip
        records += [ScoreRecord("sts", "stsb", P["metric"], 0.5, 40, v, items()) for v in ("clean", variant)]
        records += [ScoreRecord(P["suite"], P["dataset"], P["metric"], 0.25, 40, v, items()) for v in ("clean", variant)]
        db.add_scores(run, records)
        if kind == "train":
            db.log_train(run, [{"step": s, "loss": 1.0 / (s + 1), "lr": 3e-5, "examples_per_s": 10.0} for s in range(5)])
            db.add_curve_points(run, 2, [ScoreRecord(P["suite"], P["dataset"], P["metric"], 0.2, 40, variant, items())])
        db.finish_run(run, status="finished" if kind == "reference" else "failed", error=P["error"])
    db.engine.dispose()
    return P


def _injected(page, port: int) -> list[str]:  # noqa: ANN001
    """Elements that would load or link the beacon: an address in a loading or linking attribute (src, href,
    srcset, style, an event handler...) or a script holding it (stored text turned into markup). Text, titles and
    aria-labels that spell it out are text."""
    return page.evaluate(
        """port => {
             const here = '127.0.0.1:' + port;
             const active = /^(src|href|srcset|xlink:href|action|formaction|poster|data|background|style|on.*)$/i;
             return Array.from(document.querySelectorAll('*')).filter(e =>
                 Array.from(e.attributes).some(a => active.test(a.name) && a.value.includes(here))
                 || (e.tagName === 'SCRIPT' && e.textContent.includes(here)))
               .map(e => e.outerHTML.slice(0, 200));
           }""",
        port,
    )


def _hover_headers(page) -> int:  # noqa: ANN001
    """Move the mouse along the header row of every table (a column's help shows as a tooltip on hover)."""
    hovered = 0
    for table in page.locator(TABLE).all():
        table.scroll_into_view_if_needed()
        box = table.bounding_box()
        if not box:
            continue
        for x in range(int(box["x"]) + 10, int(box["x"] + min(box["width"], VIEWPORT["width"])) - 5, 40):
            page.mouse.move(x, box["y"] + 15)
            page.wait_for_timeout(120)
            hovered += 1
    page.mouse.move(1, 1)
    return hovered


def _open_selectors(page) -> int:  # noqa: ANN001
    """Open every select box and multiselect, in the sidebar and on the page (their option lists render the stored
    names: run labels, curve labels, references)."""
    opened = 0
    for widget in page.locator("[data-testid='stSelectbox'], [data-testid='stMultiSelect']").all():
        if not widget.locator("input").first.is_visible():  # inside a closed expander (the Run view's per-item values)
            continue
        widget.scroll_into_view_if_needed()
        widget.locator("input").first.click()
        page.wait_for_timeout(300)
        page.keyboard.press("Escape")
        opened += 1
    _settle(page)
    return opened


def _pick(page, label: str, option_start: str) -> None:  # noqa: ANN001
    box = page.locator("[data-testid='stSidebar'] [data-testid='stSelectbox']").filter(has_text=label).first
    box.scroll_into_view_if_needed()
    box.locator("input").first.click()
    page.get_by_role("option").filter(has_text=option_start).first.click()
    _settle(page)


def test_stored_markup_never_reaches_the_beacon_in_any_view(tmp_path, monkeypatch, beacon):
    chromium = _chromium()
    sync_api = pytest.importorskip("playwright.sync_api")
    port, hits = beacon
    monkeypatch.delenv("LENBENCH_LEADERBOARD_PASSWORD", raising=False)
    planted = fill_planted(tmp_path / "results.sqlite", port)
    requested: list[str] = []
    checks: dict[str, int] = {}
    where = ["start"]
    with _serve(tmp_path / "results.sqlite", tmp_path) as url, sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.set_default_timeout(90_000)
            page.on("request", lambda r: requested.append(f"{where[0]}: {r.url}") if f"127.0.0.1:{port}" in r.url else None)
            page.goto(url)
            page.wait_for_selector(f"{TABLE} table[role='grid'] tbody tr", state="attached")
            _settle(page)

            def look(view: str) -> None:
                where[0] = view
                checks[f"{view}: headers hovered"] = _hover_headers(page)
                checks[f"{view}: selectors opened"] = _open_selectors(page)
                page.wait_for_timeout(500)
                assert not _injected(page, port), f"{view}: stored text became markup: {_injected(page, port)}"

            look("Leaderboard sts")
            where[0] = "picking"
            _pick(page, "Rank and compare on", "attack")  # the planted attack variant ranks and compares
            look("Leaderboard attack variant")
            _pick(page, "Metric", "metric")
            look("Leaderboard planted metric")
            _pick(page, "Suite", "suite")
            look("Leaderboard planted suite")

            _go(page, "Robustness")
            look("Robustness")
            _pick(page, "Attack family", "attack")
            look("Robustness planted family")
            _pick(page, "Dataset", "dataset")
            look("Robustness planted dataset")

            _go(page, "Run")
            _number(page, "Run id", 11)
            look("Run 11")
            assert page.get_by_text("method ![i]", exact=False).count() >= 1  # the name is shown, as text
            _number(page, "Run id", 12)
            look("Run 12")

            _go(page, "Compare")
            _number(page, "Run A", 11)
            _number(page, "Run B", 12)
            look("Compare")
        finally:
            browser.close()
    assert not requested and not hits, f"the browser called the beacon: {requested or hits}"
    assert all(n > 0 for k, n in checks.items() if k.endswith("hovered")), checks
    assert planted  # every field was planted (the names above start with them)
