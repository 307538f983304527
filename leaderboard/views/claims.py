"""Claims: the verdicts `bench claim` stored, one row per claim and scale (the newest), and its comparisons: the
treatment against the reference row, the paper's baseline and the controls, each holds / contradicted /
inconclusive after the Holm correction over the claim's comparisons (bench.report.verdicts)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from bench.report.verdicts import verdict_frame
from leaderboard import cache
from leaderboard.queries import DBState
from leaderboard.text import literal
from leaderboard.views.common import csv_button

ABOUT = ("A claim holds only if the treatment beats (or, for a not-lower test, stays within the margin of) every "
         "comparator on every dataset and variant it names: the reference row, the paper's baseline and the controls "
         "(trivial augmentations with the treatment's anchor and budget). Intervals are seeds+items at each "
         "comparison's Holm step-down level. A cpu-scale verdict checks the mechanism on this machine's budget; it is "
         "not the paper's number.")  # fmt: skip


@st.cache_data(show_spinner=False, max_entries=cache.MAX_ENTRIES)
def stored(location: str, version: tuple[int, ...]) -> list[dict]:
    return cache._open(location, version).claim_verdicts()


def overview(verdicts: list[dict]) -> pd.DataFrame:
    rows = []
    for v in verdicts:
        got = [r["verdict"] for r in v["rows"]]
        rows.append({"claim": v["claim"], "scale": v["scale"], "verdict": v["verdict"], "treatment": v["treatment"],
                     "holds": f"{got.count('holds')} of {len(got)}", "contradicted": got.count("contradicted"),
                     "controls": ", ".join(sorted({r["comparator"] for r in v["rows"] if r.get("role") == "control"})),
                     "when (UTC)": f"{v['created_at']:%Y-%m-%d %H:%M}"})  # fmt: skip
    return pd.DataFrame(rows)


def show(state: DBState) -> None:
    st.header("Claims")
    st.caption(ABOUT)
    verdicts = stored(state.location, state.version)
    if not verdicts:
        st.info("No claim has been checked in this database yet: `bench claim claims/laser3-length.toml` runs one.")
        return
    summary = overview(verdicts)
    st.dataframe(summary, hide_index=True, width="stretch", key="claims-overview")
    csv_button(summary, "claims", key="claims_csv")
    labels = [f"{v['claim']} [{v['scale']}]" for v in verdicts]
    chosen = verdicts[labels.index(st.selectbox("Claim", labels, key="claim-pick"))]
    st.markdown(f"**{literal(chosen['verdict'].upper())}**: {literal(chosen['summary'])}")
    if chosen.get("statement"):
        st.caption(literal(chosen["statement"]))
    rows = verdict_frame(chosen["rows"], chosen["treatment"])
    st.dataframe(rows, hide_index=True, width="stretch", key="claims-rows")
    csv_button(rows, f"claim-{chosen['claim']}-{chosen['scale']}", key="claim_rows_csv")
