"""Datasets: on-disk readers and the catalog of what each suite needs."""

from bench.data.catalog import BEIR14, CATALOG, STS_SUITE, DatasetInfo, get_info, locate, search_dirs
from bench.data.errors import DataError, DatasetMissingError
from bench.data.readers import LabelledData, RetrievalData, STSData, read_beir, read_jsonl, read_labelled, read_sts

__all__ = [
    "BEIR14", "CATALOG", "STS_SUITE", "DataError", "DatasetInfo", "DatasetMissingError", "LabelledData",
    "RetrievalData", "STSData", "get_info", "locate", "read_beir", "read_jsonl", "read_labelled", "read_sts",
    "search_dirs",
]  # fmt: skip
