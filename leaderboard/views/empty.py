"""What an empty (or missing) database shows: how to add the first run, not a traceback."""

from __future__ import annotations

import streamlit as st

from leaderboard.queries import DBState
from leaderboard.text import literal

# Commands that work on a fresh machine after ./setup.sh: STS-B ships with a package (the other STS sets need a
# data folder, `bench data list`), and minilm is the packaged all-MiniLM-L6-v2.
FIRST_RUN = "bench eval --model minilm --suite sts:stsb"


def show(state: DBState, reason: str) -> None:
    st.header("lenbench leaderboard")
    st.info(f"{reason} Add the first run, then reload this page:")
    db_option = f" --db {state.shown}" if state.is_file else f" --db '{state.shown}'"
    st.code(FIRST_RUN + db_option, language="bash")
    st.markdown(
        "Then try `bench eval --model minilm --suite sts:stsb@elong` (clean and elongation-attacked scores) or "
        "`bench run --method simcse,laser3-self --suite sts:stsb` (train under a shared budget, then evaluate). "
        "`bench data list` shows which other datasets are present and where the missing ones come from."
    )


def foreign(state: DBState, tables: list[str]) -> None:
    """Another application's database: say so, and the one command that would add lenbench's tables beside them
    (a plain `bench eval --db` refuses such a file)."""
    listed = ", ".join(tables[:6]) + (", ..." if len(tables) > 6 else "")
    st.header("lenbench leaderboard")
    st.error(f"{literal(state.shown)} is not a lenbench results database (it holds other tables: {literal(listed)}); "
             "give the leaderboard another --db.")  # fmt: skip
    st.caption("To keep lenbench's results in this same file, beside the other application's tables:")
    db_option = f" --db {state.shown}" if state.is_file else f" --db '{state.shown}'"
    st.code(FIRST_RUN + db_option + " --db-init-foreign", language="bash")
