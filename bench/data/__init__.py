"""Datasets: on-disk readers and the catalog of what each suite needs."""

from bench.data.catalog import (
    BEIR14, CATALOG, STS_SUITE, DatasetInfo, Located, find, get_info, local_info, locate, search_dirs,
)  # fmt: skip
from bench.data.errors import DataError, DatasetMissingError
from bench.data.beir import RetrievalData, read_beir
from bench.data.labelled import LabelledData, read_labelled
from bench.data.lines import read_jsonl
from bench.data.sts import STS_FORMATS, STSData, read_sts, read_stsb_release

__all__ = [
    "BEIR14", "CATALOG", "STS_FORMATS", "STS_SUITE", "DataError", "DatasetInfo", "DatasetMissingError",
    "LabelledData", "Located", "RetrievalData", "STSData", "find", "get_info", "local_info", "locate", "read_beir",
    "read_jsonl", "read_labelled", "read_sts", "read_stsb_release", "search_dirs",
]  # fmt: skip
