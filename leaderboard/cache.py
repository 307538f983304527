"""Cached reads for the app. Every cached function takes the DBState's version stamp (mtime and size of the
SQLite file), so a write to the database invalidates what the app shows and nothing else does.

The large frames (the run list, a suite's scores) are cached as shared resources, not copies: st.cache_data
would unpickle 10,000 runs or 70,000 scores on every rerun. Callers treat them as read-only (filters and table
builders work on copies).

Server databases (URLs) have no file to stat; their version stamp is the current minute instead
(`queries.SERVER_REFRESH_S`), so what the app shows is at most that old.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from bench.report import stats
from leaderboard import colours, grouping, queries
from leaderboard.queries import DBState

MAX_ENTRIES = 64


@st.cache_resource(show_spinner=False, max_entries=8)
def _engine(location: str, identity: int):  # noqa: ANN202 - a ResultsDB, one engine per database file
    return queries.open_readonly(location)


def _open(location: str, version: tuple[int, ...]):  # noqa: ANN202
    # The last element of the version stamp names the file itself (its inode): a database replaced by another
    # file (mv, restore) gets a fresh engine instead of pooled connections still reading the old one.
    return _engine(location, version[-1])


def database(state: DBState):  # noqa: ANN201
    return _open(state.location, state.version)


@st.cache_data(show_spinner=False, max_entries=MAX_ENTRIES)
def schema_refusal(location: str, version: tuple[int, ...], shown: str) -> str:
    return queries.schema_refusal(_open(location, version), shown)


@st.cache_data(show_spinner=False, max_entries=MAX_ENTRIES)
def foreign_tables(location: str, version: tuple[int, ...]) -> list[str]:
    return queries.foreign_tables(_open(location, version))


@st.cache_data(show_spinner=False, max_entries=MAX_ENTRIES)
def has_results(location: str, version: tuple[int, ...]) -> bool:
    return queries.has_results_tables(_open(location, version))


@st.cache_resource(show_spinner=False, max_entries=MAX_ENTRIES)
def runs(location: str, version: tuple[int, ...]) -> pd.DataFrame:
    return grouping.group_runs(queries.run_list(_open(location, version)))


@st.cache_data(show_spinner=False, max_entries=MAX_ENTRIES)
def method_colours(location: str, version: tuple[int, ...]) -> dict[str, str]:
    """Each method of the database in its one colour (leaderboard.colours), for every chart of every view."""
    return colours.method_colours(runs(location, version)["method"])


@st.cache_data(show_spinner=False, max_entries=MAX_ENTRIES)
def suite_datasets(location: str, version: tuple[int, ...], suite: str, metric: str, variant: str | None) -> tuple[str, ...]:
    """The datasets a suite has scores of, for one metric (and variant; None: any)."""
    scores = suite_scores(location, version, suite, (metric,), () if variant is None else (variant,))
    return tuple(grouping.order_datasets(scores["dataset"].unique().tolist()))


@st.cache_data(show_spinner=False, max_entries=MAX_ENTRIES)
def score_catalog(location: str, version: tuple[int, ...]) -> pd.DataFrame:
    return queries.score_catalog(_open(location, version))


@st.cache_resource(show_spinner=False, max_entries=MAX_ENTRIES)
def suite_scores(location: str, version: tuple[int, ...], suite: str, metrics: tuple[str, ...], variants: tuple[str, ...]) -> pd.DataFrame:
    return queries.suite_scores(_open(location, version), suite, list(metrics), list(variants))


@st.cache_data(show_spinner=False, max_entries=MAX_ENTRIES)
def suite_versions(location: str, version: tuple[int, ...], suite: str) -> pd.DataFrame:
    return queries.suite_versions(_open(location, version), suite)


@st.cache_resource(show_spinner=False, max_entries=MAX_ENTRIES)
def score_limits(location: str, version: tuple[int, ...], suite: str) -> pd.DataFrame:
    return queries.score_limits(_open(location, version), suite)


@st.cache_resource(show_spinner=False, max_entries=MAX_ENTRIES)
def attack_rates(location: str, version: tuple[int, ...], suite: str) -> pd.DataFrame:
    return queries.attack_rates(_open(location, version), suite)


@st.cache_data(show_spinner=False, max_entries=MAX_ENTRIES)
def score_n(location: str, version: tuple[int, ...], suite: str, metric: str, variant: str, run_ids: tuple[int, ...]) -> pd.DataFrame:
    return queries.score_n(_open(location, version), suite, metric, variant, list(run_ids))


@st.cache_resource(show_spinner=False, max_entries=MAX_ENTRIES)
def item_scores(location: str, version: tuple[int, ...], suite: str, metric: str, variant: str) -> pd.DataFrame:
    return queries.item_scores(_open(location, version), suite, metric, variant)


@st.cache_data(show_spinner=False, max_entries=MAX_ENTRIES)
def run_scores(location: str, version: tuple[int, ...], run_id: int) -> pd.DataFrame:
    return queries.run_scores(_open(location, version), run_id)


@st.cache_data(show_spinner=False, max_entries=MAX_ENTRIES)
def run_detail(location: str, version: tuple[int, ...], run_id: int) -> dict | None:
    return queries.run_detail(_open(location, version), run_id)


@st.cache_data(show_spinner=False, max_entries=MAX_ENTRIES)
def train_log(location: str, version: tuple[int, ...], run_id: int) -> pd.DataFrame:
    return queries.train_log(_open(location, version), run_id)


@st.cache_data(show_spinner=False, max_entries=MAX_ENTRIES)
def items_for_scores(location: str, version: tuple[int, ...], score_ids: tuple[int, ...]) -> dict[int, dict]:
    return queries.items_for_scores(_open(location, version), list(score_ids))


@st.cache_data(show_spinner=False, max_entries=MAX_ENTRIES)
def bootstrap(location: str, version: tuple[int, ...], score_a: int, score_b: int) -> stats.BootstrapCI | str:
    """The CI of score_b - score_a (`bench.report.stats.paired_bootstrap`, the rank's and the CLI's computation),
    or a sentence saying why there is none."""
    items = queries.items_for_scores(_open(location, version), [score_a, score_b])
    if score_a not in items or score_b not in items:
        missing = [name for name, sid in (("A", score_a), ("B", score_b)) if sid not in items]
        return f"no per-item scores stored for run {' and '.join(missing)}"
    try:
        return stats.paired_bootstrap(items[score_a], items[score_b], keys=(score_key(location, version, score_a),
                                                                            score_key(location, version, score_b)))
    except ValueError as exc:
        return str(exc)


def score_key(location: str, version: tuple[int, ...], score_id: int) -> tuple:
    """What names one stored score for `stats.resampled`'s cache: a database change gives new keys."""
    return (location, version, int(score_id))
