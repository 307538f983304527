"""What a dataset that is not on this machine yet will cost, from its publishers' figures: documents, test queries,
mean words per document and per query (BEIR's paper, Thakur et al. 2021, Table 1 and its repository's dataset
table), and the size of the file to download (BEIR's zips; approximate: the server's answer at download time is
the truth). `bench eval/run --estimate` uses them where the files are not here, and says what to download.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PublishedSize:
    documents: int
    queries: int  # judged test queries
    doc_words: float  # mean words per document (title + text)
    query_words: float
    download_bytes: int  # the zip (or file) to fetch, approximately


MB = 1_000_000

# name -> figures; cqadupstack's are the whole set (its 12 forums, one zip).
PUBLISHED: dict[str, PublishedSize] = {
    "msmarco": PublishedSize(8_841_823, 6_980, 55.98, 5.96, 1_080 * MB),
    "trec-covid": PublishedSize(171_332, 50, 160.77, 10.60, 74 * MB),
    "nfcorpus": PublishedSize(3_633, 323, 232.26, 3.30, 3 * MB),
    "nq": PublishedSize(2_681_468, 3_452, 78.88, 9.16, 490 * MB),
    "hotpotqa": PublishedSize(5_233_329, 7_405, 46.30, 17.61, 630 * MB),
    "fiqa": PublishedSize(57_638, 648, 132.32, 10.77, 17 * MB),
    "arguana": PublishedSize(8_674, 1_406, 166.80, 192.98, 4 * MB),
    "webis-touche2020": PublishedSize(382_545, 49, 292.37, 6.55, 220 * MB),
    "cqadupstack": PublishedSize(457_199, 13_145, 129.09, 8.59, 460 * MB),
    "quora": PublishedSize(522_931, 10_000, 11.44, 9.53, 16 * MB),
    "dbpedia-entity": PublishedSize(4_635_922, 400, 49.68, 5.39, 620 * MB),
    "scidocs": PublishedSize(25_657, 1_000, 176.19, 9.38, 14 * MB),
    "fever": PublishedSize(5_416_568, 6_666, 84.76, 8.13, 1_200 * MB),
    "climate-fever": PublishedSize(5_416_593, 1_535, 84.76, 20.13, 1_200 * MB),
    "scifact": PublishedSize(5_183, 300, 213.63, 12.37, 3 * MB),
}


def published(name: str) -> PublishedSize | None:
    """The figures of a catalog dataset (a cqadupstack forum: the whole set's, divided over its 12 forums)."""
    if name.startswith("cqadupstack-"):
        whole = PUBLISHED["cqadupstack"]
        return PublishedSize(whole.documents // 12, whole.queries // 12, whole.doc_words, whole.query_words,
                             whole.download_bytes)  # fmt: skip - one zip holds every forum
    return PUBLISHED.get(name)
