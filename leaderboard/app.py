"""lenbench leaderboard (Streamlit). Start it with `bench leaderboard [--db PATH_OR_URL]`, or
`streamlit run leaderboard/app.py -- --db PATH_OR_URL`; without --db it shows $LENBENCH_DB, else ./lenbench.sqlite.

The database is opened read-only: nothing this app runs can write to it. Text read from it is shown literally,
never as Markdown or HTML (`leaderboard.text`). With a password configured (`leaderboard.auth`) the app shows a
login form first.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):
    # `streamlit run leaderboard/app.py` runs this file as a script: make the checkout importable.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import streamlit as st  # noqa: E402
from sqlalchemy.exc import SQLAlchemyError  # noqa: E402

from leaderboard import auth, cache, queries  # noqa: E402
from leaderboard.text import literal  # noqa: E402
from leaderboard.views import claims, compare, empty, main, robustness, run  # noqa: E402
from results_db.redact import redact  # noqa: E402

VIEWS = {
    "Leaderboard": main.show,
    "Robustness": robustness.show,
    "Run": run.show,
    "Compare": compare.show,
    "Claims": claims.show,
}


LAYOUT_CSS = """<style>
[data-testid="stMainBlockContainer"] { padding-left: 2rem; padding-right: 2rem; padding-top: 2.5rem; }
</style>"""


def db_argument(argv: list[str]) -> str | None:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--db", default=None)
    # parse_known_args: under AppTest / pytest, argv holds the test runner's own arguments.
    args, _ = parser.parse_known_args(argv)
    return args.db


def render() -> None:
    st.set_page_config(page_title="lenbench leaderboard", layout="wide")
    # Streamlit's default side padding (~6rem) takes 190 px of a 1280 px window from the tables: keep 2rem.
    st.markdown(LAYOUT_CSS, unsafe_allow_html=True)
    if not auth.login_gate():
        return
    state = queries.db_state(db_argument(sys.argv[1:]))
    st.sidebar.title("lenbench")
    st.sidebar.caption(f"database (read-only): {literal(state.shown)}")
    if state.is_file and not state.exists:
        empty.show(state, f"There is no results database at {literal(state.shown)} yet.")
        return
    try:
        refusal = cache.schema_refusal(state.location, state.version, state.shown)
        if refusal:  # the CLI refuses it too
            st.error(literal(refusal))
            return
        foreign = cache.foreign_tables(state.location, state.version)
        if foreign:
            empty.foreign(state, foreign)
            return
        if not cache.has_results(state.location, state.version):
            empty.show(state, f"{literal(state.shown)} is not a lenbench results database yet (no runs table).")
            return
        runs = cache.runs(state.location, state.version)
    except SQLAlchemyError as exc:
        reason = f"{type(exc).__name__}: {exc.orig if hasattr(exc, 'orig') else exc}"
        st.error(f"Cannot read the results database {literal(state.shown)}: {literal(redact(reason))}")
        return
    if runs.empty:
        empty.show(state, "The results database has no runs yet.")
        return
    if "goto_run" in st.session_state:  # a row clicked in the main table: its run, in the Run view
        st.session_state["view"] = "Run"
        st.session_state["run_id"] = st.session_state.pop("goto_run")
    view = st.sidebar.radio("View", list(VIEWS), key="view")
    st.sidebar.divider()
    VIEWS[view](state)


render()
