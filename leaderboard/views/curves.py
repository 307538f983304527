"""Learning curves in the Run and Compare views: score vs training step (`bench run --eval-every N`) with a 95%
percentile-bootstrap band over each point's items (bench.report.curves), one line per run."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from leaderboard import cache
from leaderboard.queries import DBState
from leaderboard.text import literal
from leaderboard.views.common import csv_button


def curve_note(frame: pd.DataFrame, dataset: str) -> str:
    """What each curve rests on, beside the run's reported score: 'run 3: curve on the first 200 items of
    wiki-offline-heldout (n = 200); final score 13.56 on the whole dataset (n = 448)' (Markdown-safe)."""
    notes = []
    for run_id, part in frame.groupby("run_id", sort=True):
        last = part.sort_values("step").iloc[-1]
        subset = last.get("subset")
        on = (f"the first {int(subset)} items of {literal(dataset)}" if subset == subset and subset
              else f"the whole {literal(dataset)}")  # fmt: skip
        text = f"run {int(run_id)}: curve on {on} (n = {int(last['n'])})"
        final = last.get("final_value")
        if final == final and final is not None:
            fsub = last.get("final_subset")
            where = f"its first {int(fsub)} items" if fsub == fsub and fsub else "the whole dataset"
            text += f"; final score {float(final):.2f} on {where} (n = {int(last['final_n'])})"
        notes.append(text)
    return " · ".join(notes)


@st.cache_data(show_spinner=False, max_entries=cache.MAX_ENTRIES)
def curve_points(location: str, version: tuple[int, ...], run_ids: tuple[int, ...]) -> pd.DataFrame:
    """The runs' curve points with a bootstrap interval each (low, high); items are dropped once used."""
    from bench.report.curves import _limit, with_final, with_intervals

    db = cache._open(location, version)
    points = db.curve_points(list(run_ids), with_items=True)
    if points.empty:
        return points
    points["subset"] = [_limit(i) for i in points["info"]]
    return with_final(with_intervals(points).drop(columns=["items", "info"], errors="ignore"), db)


def show(state: DBState, run_ids: list[int], key: str) -> None:
    """A 'Learning curve' section for these runs (nothing when none of them has curve points)."""
    points = curve_points(state.location, state.version, tuple(int(r) for r in run_ids))
    st.markdown("**Learning curve**")
    if points.empty:
        st.caption("No learning-curve points: train with `bench run --eval-every N` to score the encoder during training.")
        return
    combos = points[["suite", "dataset", "metric", "variant"]].drop_duplicates()
    labels = [f"{r.suite} · {r.dataset} · {r.metric} · {r.variant}" for r in combos.itertuples()]
    # option labels are plain text (no Markdown): escaping them would show the backslashes
    choice = st.selectbox("Curve", range(len(labels)), format_func=lambda i: labels[i], key=f"{key}_curve")
    chosen = combos.iloc[int(choice or 0)]
    keep = (points[["suite", "dataset", "metric", "variant"]] == chosen.to_numpy()).all(axis=1)
    frame = points[keep].copy()
    frame["run"] = "run " + frame["run_id"].astype(str)
    base = alt.Chart(frame).encode(x=alt.X("step:Q", title="training step"), color=alt.Color("run:N", title=None))
    band = base.mark_area(opacity=0.2).encode(y=alt.Y("low:Q", title=f"{chosen['metric']} (95% CI)", scale=alt.Scale(zero=False)),
                                              y2="high:Q")  # fmt: skip
    line = base.mark_line(point=True).encode(y="value:Q", tooltip=["run", "step", "value", "low", "high", "n"])
    st.altair_chart((band + line).properties(height=260), width="stretch")
    st.caption("Each point: the encoder after that many training steps (step 0: untrained), scored on the curve suite; "
               "the band is a 95% percentile bootstrap over the point's items (queries, pairs or test examples).")  # fmt: skip
    st.caption(curve_note(frame, chosen["dataset"]))
    csv_button(frame.drop(columns="run"), f"curves-{'-'.join(map(str, run_ids))}", key=f"{key}_curve_csv")
