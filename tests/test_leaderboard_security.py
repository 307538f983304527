"""The leaderboard shows stored text literally (no Markdown link or external image from a method name, model,
error or code version), refuses to serve the network unprotected, gates on a password when one is set, and opens
a database given as an SQLAlchemy `sqlite:///` URL."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

pytest.importorskip("streamlit")

from markdown_it import MarkdownIt  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from leaderboard import auth, queries  # noqa: E402
from leaderboard.text import literal  # noqa: E402
from results_db import ResultsDB, ScoreRecord  # noqa: E402
from tests.test_leaderboard_fixtures import STS_DATASETS, fill_db  # noqa: E402

APP = Path(__file__).resolve().parent.parent / "leaderboard" / "app.py"
TIMEOUT = 90
EVIL_METHOD = "[x](http://evil)"
EVIL_MODEL = "![](http://evil/i.png)"
EVIL_ERROR = "boom ![beacon](http://evil/track.gif) <img src=http://evil/t.png> $x^2$"
EVIL_CODE = "`v1` ![](http://evil/c.png)"
MARKDOWN_ELEMENTS = ("markdown", "caption", "info", "warning", "error", "success", "title", "header", "subheader")
RENDER = MarkdownIt("commonmark", {"html": True}).enable("table").enable("strikethrough")


@pytest.fixture(autouse=True)
def no_password(monkeypatch, tmp_path):
    """No password from the environment or a secrets file of the user running the tests."""
    monkeypatch.delenv(auth.PASSWORD_ENV, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)


def evil_db(path: Path) -> Path:
    fill_db(path)
    db = ResultsDB(path)
    run = db.create_run(
        kind="train", model=EVIL_MODEL, method=EVIL_METHOD, backbone=EVIL_MODEL, suite="sts", budget_label="steps=1",
        train_corpus="wiki1m", code_version=EVIL_CODE, command=f"bench run --method '{EVIL_METHOD}'", status="running",
    )  # fmt: skip
    db.add_scores(run, [ScoreRecord("sts", d, "spearman", 90.0, 80) for d in STS_DATASETS])
    db.finish_run(run, status="failed", error=EVIL_ERROR)
    db.engine.dispose()
    return path


def open_app(location: str, monkeypatch) -> AppTest:
    monkeypatch.setenv("LENBENCH_DB", location)
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.run()
    assert not at.exception, at.exception
    return at


def rendered_markdown(at: AppTest) -> list[tuple[str, str]]:
    """(Markdown source, the HTML it renders to) of every element that renders Markdown, widget labels included."""
    sources = [str(e.value) for kind in MARKDOWN_ELEMENTS for e in at.get(kind)]
    for kind in ("selectbox", "multiselect", "checkbox", "radio", "number_input", "text_input"):
        sources += [w.label for w in at.get(kind)]
    return [(src, RENDER.render(src)) for src in sources]


def assert_inert(at: AppTest) -> str:
    """No element renders a link, image or HTML; returns the text every Markdown element shows."""
    shown = []
    for source, rendered in rendered_markdown(at):
        assert "<a " not in rendered and "<img" not in rendered, source
        shown.append(html.unescape(re.sub(r"<[^>]+>", "", rendered)))
    return "\n".join(shown)


def literal_texts(at: AppTest) -> str:
    """What text and code elements and tables show: literal, never interpreted."""
    parts = [str(e.value) for kind in ("text", "code") for e in at.get(kind)]
    for frame in at.dataframe:
        value = frame.value
        parts += [str(c) for c in value.columns] + [str(v) for v in value.astype(str).to_numpy().ravel()]
    return "\n".join(parts)


def test_literal_escapes_every_markdown_construct():
    for text in (EVIL_METHOD, EVIL_MODEL, EVIL_ERROR, EVIL_CODE, "**bold** _em_ :red[x] www.evil.com <b>x</b> | a |"):
        rendered = RENDER.render(literal(text))
        assert "<a " not in rendered and "<img" not in rendered and "<strong>" not in rendered and "<b>" not in rendered
        assert html.unescape(re.sub(r"<[^>]+>", "", rendered)).strip().replace("\u200b", "") == text
    assert literal("two\nlines") == "two lines"


# GFM's autolink literals (remark-gfm, as Streamlit renders Markdown) run on the text after escapes are resolved.
GFM_AUTOLINK = re.compile(r"(?:^|[\s(*_~])(https?://|www\.)[-.\w]+|[-.\w+]+@[-\w]+(?:\.[-\w]+)+", re.I)


def test_literal_leaves_no_bare_url_or_address_for_gfm_to_link():
    for text in ("http://evil.com/x", "HTTPS://evil.com", "see www.evil.com now", "mail bob@evil.com", "(https://e.vil)"):
        shown = html.unescape(re.sub(r"<[^>]+>", "", RENDER.render(literal(text)))).strip()
        assert shown.replace("\u200b", "") == text and not GFM_AUTOLINK.search(shown), shown


def test_stored_markdown_is_shown_literally_in_every_view(tmp_path, monkeypatch):
    path = evil_db(tmp_path / "evil.sqlite")
    at = open_app(str(path), monkeypatch)
    at.checkbox(key="main_unfinished").check().run()  # the evil run failed: show it
    assert EVIL_METHOD in {m for d in at.dataframe if str(d.key or "").startswith("main_table") for m in d.value["method"]}  # the name, as typed, in a table
    assert_inert(at)
    assert EVIL_METHOD in [o for o in at.multiselect(key="main_method").options]  # a plain option

    at.radio(key="view").set_value("Run").run()
    at.number_input(key="run_id").set_value(7).run()
    assert not at.exception
    shown = assert_inert(at)
    assert EVIL_METHOD in shown.replace("\u200b", "")  # the title shows the name literally (escaped Markdown)
    assert not GFM_AUTOLINK.search(shown)  # and no bare URL in it for remark-gfm to turn into a link
    texts = literal_texts(at)
    for value in (EVIL_METHOD, EVIL_MODEL, EVIL_ERROR, EVIL_CODE):
        assert value in texts, value

    at.radio(key="view").set_value("Compare").run()
    at.number_input(key="cmp_a").set_value(3).run()
    at.number_input(key="cmp_b").set_value(7).run()
    assert not at.exception
    assert_inert(at)
    assert EVIL_METHOD in literal_texts(at)

    at.radio(key="view").set_value("Robustness").run()
    assert not at.exception
    assert_inert(at)


# ------------------------------------------------------------------------------------------- serving & login
@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.2"])
def test_loopback_needs_nothing(host):
    from bench.commands.leaderboard import check_exposure

    assert check_exposure(host, public=False) == "this machine only"


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.5", "myhost.example.org"])
def test_network_address_is_refused_without_protection(host, tmp_path, monkeypatch, capsys):
    from bench.cli import main
    from bench.commands import leaderboard

    calls = []
    monkeypatch.setattr(leaderboard.os, "execv", lambda exe, argv: calls.append(argv))
    monkeypatch.setattr(leaderboard, "shield_pipes", lambda: [])  # no relays forked in the test process
    db = tmp_path / "r.sqlite"
    assert main(["leaderboard", "--db", str(db), "--host", host]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bench: error: --host") and "--public" in err[0] and auth.PASSWORD_ENV in err[0]
    assert not calls and not db.exists()

    assert main(["leaderboard", "--db", str(db), "--host", host, "--public"]) == 0  # behind a proxy: the operator says so
    assert calls[-1][calls[-1].index("--server.address") + 1] == host
    assert "access: public" in capsys.readouterr().out


def test_network_address_with_a_password(tmp_path, monkeypatch, capsys):
    from bench.cli import main
    from bench.commands import leaderboard

    calls = []
    monkeypatch.setattr(leaderboard.os, "execv", lambda exe, argv: calls.append(argv))
    monkeypatch.setattr(leaderboard, "shield_pipes", lambda: [])  # no relays forked in the test process
    secrets = tmp_path / ".streamlit" / "secrets.toml"  # the folder the server starts in (the test's cwd)
    secrets.parent.mkdir()
    secrets.write_text(f'{auth.SECRET_KEY} = "correct horse"\n')
    assert auth.configured_password() == "correct horse"
    assert main(["leaderboard", "--db", str(tmp_path / "r.sqlite"), "--host", "0.0.0.0"]) == 0
    assert "access: password" in capsys.readouterr().out and len(calls) == 1
    secrets.unlink()
    monkeypatch.setenv(auth.PASSWORD_ENV, "from-env")
    assert auth.configured_password() == "from-env"
    assert leaderboard.check_exposure("10.0.0.1", public=False) == "password"


def test_login_gate(tmp_path, monkeypatch):
    path = fill_db(tmp_path / "results.sqlite")
    monkeypatch.setenv(auth.PASSWORD_ENV, "s3cret")
    at = open_app(str(path), monkeypatch)
    assert not at.dataframe and not at.sidebar.radio  # nothing from the database before logging in
    at.text_input(key="login_password").set_value("wrong")
    at.button[0].click().run()  # a form sends its fields with the submit
    assert not at.dataframe and any("Wrong password" in e.value for e in at.error)
    at.text_input(key="login_password").set_value("s3cret")
    at.button[0].click().run()
    assert not at.exception
    assert sum(len(d.value) for d in at.dataframe if str(d.key or "").startswith("main_table")) == 4  # (one table per backbone)
    at.radio(key="view").set_value("Run").run()  # the session stays logged in
    assert not at.exception and at.dataframe


# ---------------------------------------------------------------------------------------------- SQLAlchemy URL
def test_sqlite_url_opens_as_the_file(tmp_path, monkeypatch):
    path = fill_db(tmp_path / "results.sqlite")
    url = f"sqlite:///{path}"  # sqlite:////abs/path
    assert url.startswith("sqlite:////")
    state = queries.db_state(url)
    assert state.is_file and state.exists and Path(state.location) == path and state.version == queries.db_state(path).version
    at = open_app(url, monkeypatch)
    assert sum(len(d.value) for d in at.dataframe if str(d.key or "").startswith("main_table")) == 4  # (one table per backbone)

    monkeypatch.chdir(tmp_path)
    at = open_app("sqlite:///results.sqlite", monkeypatch)  # relative to the folder the app runs in
    assert sum(len(d.value) for d in at.dataframe if str(d.key or "").startswith("main_table")) == 4

    at = open_app(f"sqlite:///{tmp_path / 'absent.sqlite'}", monkeypatch)
    assert "There is no results database" in "\n".join(str(e.value) for e in at.info)
    assert not (tmp_path / "absent.sqlite").exists()
