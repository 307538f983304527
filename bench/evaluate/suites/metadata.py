"""What each suite declares about its scores, in one place: the metric it is ranked by, the averages its papers
report, the items a score rests on (what a paired bootstrap resamples) and whether a higher value is better.

Read by the CLI report (`bench.report.tables`) and the leaderboard (`leaderboard.main_board`); kept free of the suites'
own imports (models, data readers) so both can read it cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.data.catalog import BEIR14, CQADUPSTACK_FORUMS, STS_SUITE


@dataclass(frozen=True)
class SuiteMeta:
    main_metric: str  # the score it is ranked by when nobody picked one (SPEC §3)
    item: str  # what one item of a score is: the unit a paired bootstrap resamples
    averages: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (column name, datasets) its papers average
    ranked: bool = True  # False: the values describe geometry; none is "best"
    plot_metrics: tuple[str, ...] = ()  # the measures worth plotting (diag)


SUITES: dict[str, SuiteMeta] = {
    "sts": SuiteMeta("spearman", "sentence pairs", averages=((f"STS avg ({len(STS_SUITE)})", tuple(STS_SUITE)),)),
    "beir": SuiteMeta("ndcg_at_10", "queries", averages=(("BEIR-14 avg", tuple(BEIR14)),)),
    "heldout": SuiteMeta("ndcg_at_10", "queries"),
    "knn": SuiteMeta("knn_acc_euclidean", "test texts"),
    "mteb": SuiteMeta("main_score", "task items"),
    "needle": SuiteMeta("ndcg_at_1", "queries"),  # variants are context lengths (len-64 ...), no clean
    # pair_cos_shift is 0 on the clean variant by definition: the attacked variants are what it is read on.
    "diag": SuiteMeta("intra_sim_adj", "sentence pairs", ranked=False,
                      plot_metrics=("pair_cos_shift", "intra_sim_adj", "anisotropy", "positional_jsd")),
}  # fmt: skip
CQADUPSTACK_PARTS = tuple(f"cqadupstack-{f}" for f in CQADUPSTACK_FORUMS)
DATASET_ORDER = (*STS_SUITE,)  # STS first in the papers' order; the rest follow the catalog


def suite_meta(suite: str) -> SuiteMeta | None:
    """The metadata of a suite name as stored ("sts", "beir", "mteb:STS12" -> mteb), or None for an unknown one."""
    return SUITES.get(suite) or SUITES.get(suite.split(":", 1)[0].split("@", 1)[0])


def main_metric(suite: str, metrics: list[str]) -> str | None:
    """The metric to show first among those present: the suite's own, else MTEB's main_score, else the first."""
    if not metrics:
        return None
    meta = suite_meta(suite)
    if meta is not None and meta.main_metric in metrics:
        return meta.main_metric
    if "main_score" in metrics:
        return "main_score"
    return sorted(metrics)[0]


def items_word(suites: list[str]) -> str:
    """'pairs/queries/test items' style wording of what the bootstrap resamples for these suites."""
    words = []
    for suite in suites:
        meta = suite_meta(suite)
        word = meta.item if meta is not None else "items"
        if word not in words:
            words.append(word)
    return "/".join(words) or "items"
