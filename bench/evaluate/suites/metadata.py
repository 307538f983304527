"""Every suite declared once: its name, the factory that builds it from a suite string, the metric it is ranked
by, the named sets its papers average (`bench.data.catalog.NAMED_SETS`), the items a score rests on (what a paired
bootstrap resamples) and whether a higher value is better.

`SUITES` is the suite registry (`bench.runtime.plugins.Registry`): lenbench's own suites register through the
`lenbench.suites` entry-point group exactly as a plug-in does (an entry point names a `SuiteMeta`, or a callable
returning one or a list); a checkout installed before the group existed still finds the built-ins below.

Read by the suite-string parser (`bench.evaluate.suites.registry`), the CLI report (`bench.report.tables`) and the
leaderboard (`leaderboard.main_board`); kept free of the suites' own imports (models, data readers) so all of them
read it cheaply.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from bench.data.catalog import CQADUPSTACK_FORUMS, NAMED_SETS, STS_SUITE
from bench.runtime.plugins import Registry

ENTRY_POINT_GROUP = "lenbench.suites"


@dataclass(frozen=True)
class SuiteMeta:
    name: str  # the suite string's prefix, and the suite name its scores are stored under
    factory: str  # "module:function"; function(arg: str | None) -> Suite, arg the text after "NAME:"
    main_metric: str  # the score it is ranked by when nobody picked one (SPEC §3)
    item: str  # what one item of a score is: the unit a paired bootstrap resamples
    sets: tuple[str, ...] = ()  # the named sets (bench.data.catalog.NAMED_SETS) its papers average
    ranked: bool = True  # False: the values describe geometry; none is "best"
    plot_metrics: tuple[str, ...] = ()  # the measures worth plotting (diag)
    summary: str = ""
    # The version of how this suite scores: raise it when a change to the suite changes its scores (items, metric,
    # protocol). Every score records it (Score.info suite_version) and the leaderboard never merges two versions.
    version: int = 1
    usage: str = ""  # how a suite string names it, in help texts (e.g. "beir:NAME[,NAME]"); "" shows the name alone
    metrics: tuple[str, ...] = ()  # every metric its scores are stored under; () when that varies (mteb: per task)
    cite: tuple[str, ...] = ()  # keys of bench/report/references.bib or whole BibTeX entries (bench.report.citations)

    @property
    def averages(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """(column name, datasets) of each average its papers report."""
        return tuple((NAMED_SETS[s].label, NAMED_SETS[s].members) for s in self.sets)


STS = SuiteMeta("sts", "bench.evaluate.suites.sts:make_suite", "spearman", "sentence pairs", sets=("sts7",),
                usage="sts[:NAME]", metrics=("spearman",),
                cite=("muennighoff2023mteb",), summary="STS sets (Spearman x100)")
BEIR = SuiteMeta("beir", "bench.evaluate.suites.retrieval:make_suite", "ndcg_at_10", "queries", sets=("beir14",),
                 usage="beir:NAME[,NAME]", metrics=("ndcg_at_10", "recall_at_100", "mrr_at_10"),
                 cite=("thakur2021beir",), summary="retrieval (nDCG@10, recall@100, MRR@10)")
HELDOUT = SuiteMeta("heldout", "bench.evaluate.suites.heldout:make_suite", "ndcg_at_10", "queries",
                    metrics=("ndcg_at_10", "mrr_at_10"),
                    cite=("lenbench",), summary="constructed known-item task (bench run offline default)")
KNN = SuiteMeta("knn", "bench.evaluate.suites.knn:make_suite", "knn_acc_euclidean", "test texts",
                usage="knn[:NAME]", metrics=("knn_acc_euclidean", "knn_acc_cosine"),
                cite=("anonymous2024crop",), summary="kNN accuracy (k=10)")
MTEB = SuiteMeta("mteb", "bench.evaluate.suites.mteb_suite:make_suite", "main_score", "task items",
                 usage="mteb:TASK[,TASK]",
                 cite=("muennighoff2023mteb",), summary="MTEB tasks run by the mteb package")
NEEDLE = SuiteMeta("needle", "bench.evaluate.suites.needle:make_suite", "ndcg_at_1", "queries", metrics=("ndcg_at_1",),
                   cite=("mohtashami2023landmark", "kamradt2023needle"),
                   summary="synthetic passkey / needle retrieval per context length")  # variants: len-64 ..., no clean
POSITION = SuiteMeta("position", "bench.evaluate.suites.position:make_suite", "ndcg_at_1", "queries",
                     usage="position[:passkey|needle]", metrics=("ndcg_at_1",),
                     cite=("mohtashami2023landmark", "kamradt2023needle"),
                     summary="the needle suite's facts at depths 0-1 of a fixed-length context; PSI")  # no clean
# pair_cos_shift is 0 on the clean variant by definition: the attacked variants are what it is read on.
DIAG = SuiteMeta("diag", "bench.evaluate.suites.diag:make_suite", "intra_sim_adj", "sentence pairs", ranked=False,
                 plot_metrics=("pair_cos_shift", "intra_sim_adj", "anisotropy", "positional_jsd"),
                 cite=("xiao2023length",), summary="LA(SER)^3 length diagnostics on STS-B test")
BUILTIN = {meta.name: f"{__name__}:{attr}" for attr, meta in
           (("STS", STS), ("BEIR", BEIR), ("HELDOUT", HELDOUT), ("KNN", KNN), ("MTEB", MTEB), ("NEEDLE", NEEDLE),
            ("POSITION", POSITION), ("DIAG", DIAG))}  # fmt: skip

SUITES: Registry[SuiteMeta] = Registry("suite", SuiteMeta, ENTRY_POINT_GROUP, log=logging.getLogger(__name__))
for _name, _target in BUILTIN.items():
    SUITES.add_lazy(_name, _target)

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


def suite_usages() -> list[str]:
    """How `--suite` names each registered suite (plug-ins included), then the named sets (`beir14`): for help texts."""
    from bench.data.catalog import NAMED_SETS as sets

    return [meta.usage or meta.name for meta in SUITES.values()] + list(sets)
