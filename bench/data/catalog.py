"""Every dataset the suites name, where it lives on disk and where it comes from.

Layout under a data folder (the same as `../shared/data`):
    sts/<file>.tsv                 STS pairs           (sentence1, sentence2, score[, ...])
    beir/<name>/corpus.jsonl ...   BEIR layout         (corpus.jsonl, queries.jsonl, qrels/test.tsv; plain or .gz)
    knn/<file>.jsonl               labelled texts      ({"text", "label"})

Folders searched, in order: --data-dir, $LENBENCH_DATA, ./data, ../shared/data. When a dataset is missing,
BEIR sets are downloaded from BEIR's own URL if the network allows (`fetch=True`); otherwise the error names
the dataset, the folders searched and the exact files expected.
"""

from __future__ import annotations

import os
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

from bench.data.errors import DatasetMissingError

BEIR_URL = "https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/{name}.zip"

CQADUPSTACK_FORUMS = (
    "android", "english", "gaming", "gis", "mathematica", "physics",
    "programmers", "stats", "tex", "unix", "webmasters", "wordpress",
)  # fmt: skip


@dataclass(frozen=True)
class DatasetInfo:
    name: str
    kind: str  # "sts" | "beir" | "labelled"
    relpath: str  # file (sts, labelled) or folder (beir) under a data dir
    source: str  # where it comes from, for people and for the download path
    mteb_task: str = ""
    split: str | None = None  # STS: a value of the 'split' column to keep (None: all rows)
    note: str = ""

    def expected_files(self) -> list[str]:
        if self.kind == "beir":
            return [f"{self.relpath}/corpus.jsonl", f"{self.relpath}/queries.jsonl", f"{self.relpath}/qrels/test.tsv"]
        return [self.relpath]


def _sts(name: str, file: str, mteb: str, source: str, split: str | None = None, note: str = "") -> DatasetInfo:
    return DatasetInfo(name, "sts", f"sts/{file}", source, mteb, split, note)


SENTEVAL = "SentEval STS copy (see ../shared/data/MANIFEST.md); mteb task {}"
CATALOG: dict[str, DatasetInfo] = {
    d.name: d
    for d in [
        _sts("sts12", "sts12.tsv", "STS12", SENTEVAL.format("STS12")),
        _sts("sts13", "sts13.tsv", "STS13", SENTEVAL.format("STS13")),
        _sts("sts14", "sts14.tsv", "STS14", SENTEVAL.format("STS14")),
        _sts("sts15", "sts15.tsv", "STS15", SENTEVAL.format("STS15")),
        _sts("sts16", "sts16.tsv", "STS16", SENTEVAL.format("STS16")),
        _sts("stsb", "stsb-test.tsv", "STSBenchmark", "STS Benchmark test split (Cer et al. 2017)"),
        _sts("stsb-dev", "stsb-dev.tsv", "STSBenchmark", "STS Benchmark dev split"),
        _sts("stsb-train", "stsb-train.tsv", "", "STS Benchmark train split"),
        _sts("sickr", "sickr.tsv", "SICK-R", "SICK relatedness, all 9,927 pairs (MTEB's SICK-R)"),
        _sts("sickr-test", "sickr.tsv", "", "SICK relatedness, test split (SentEval)", split="test"),
        DatasetInfo("agnews", "labelled", "knn/agnews_test.jsonl", "AG News test (Zhang et al. 2015)"),
    ]
}
BEIR14 = (
    "trec-covid", "nfcorpus", "nq", "fiqa", "arguana", "webis-touche2020", "quora", "cqadupstack",
    "dbpedia-entity", "scidocs", "climate-fever", "scifact", "hotpotqa", "fever",
)  # fmt: skip
# The MTEB task of each BEIR set (mteb.get_task names), so `mteb:SciFact` runs on the local copy.
BEIR_MTEB_TASKS = {
    "trec-covid": "TRECCOVID", "nfcorpus": "NFCorpus", "nq": "NQ", "fiqa": "FiQA2018", "arguana": "ArguAna",
    "webis-touche2020": "Touche2020", "quora": "QuoraRetrieval", "dbpedia-entity": "DBPedia", "scidocs": "SCIDOCS",
    "climate-fever": "ClimateFEVER", "scifact": "SciFact", "hotpotqa": "HotpotQA", "fever": "FEVER",
}  # fmt: skip
for _name in BEIR14:
    if _name == "cqadupstack":
        continue
    CATALOG[_name] = DatasetInfo(
        _name, "beir", f"beir/{_name}", BEIR_URL.format(name=_name), mteb_task=BEIR_MTEB_TASKS[_name]
    )
for _forum in CQADUPSTACK_FORUMS:
    CATALOG[f"cqadupstack-{_forum}"] = DatasetInfo(
        f"cqadupstack-{_forum}",
        "beir",
        f"beir/cqadupstack/{_forum}",
        BEIR_URL.format(name="cqadupstack"),
        mteb_task=f"CQADupstack{_forum.capitalize()}Retrieval",
        note="one of the 12 forums averaged as 'cqadupstack'",
    )

STS_SUITE = ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr")

# Training corpora of LA(SER)^3 (shared/papers/000 §4), kind "corpus": `bench run --corpus wiki1m|msmarco` reads
# them from a data folder; `--download` fetches them from these sources (needs network).
WIKI1M_URL = "https://huggingface.co/datasets/princeton-nlp/datasets-for-simcse/resolve/main/wiki1m_for_simcse.txt"
TRAIN_CORPORA = ("wiki1m", "msmarco")
CATALOG["wiki1m"] = DatasetInfo(
    "wiki1m", "corpus", "corpora/wiki1m_for_simcse.txt", WIKI1M_URL,
    note="training corpus: SimCSE's 1M Wikipedia sentences, one per line (LA(SER)^3 training-wiki)",
)
CATALOG["msmarco"] = DatasetInfo(
    "msmarco", "corpus", "beir/msmarco/corpus.jsonl", BEIR_URL.format(name="msmarco"),
    note="training corpus: the 8.8M MS MARCO passages, BEIR layout (LA(SER)^3 training-msmarco)",
)


def search_dirs(data_dir: str | os.PathLike[str] | None = None) -> list[Path]:
    dirs: list[Path] = []
    if data_dir:
        dirs.append(Path(data_dir))
    if os.environ.get("LENBENCH_DATA"):
        dirs.append(Path(os.environ["LENBENCH_DATA"]))
    dirs += [Path("data"), Path("..") / "shared" / "data"]
    seen: list[Path] = []
    for d in dirs:
        d = d.expanduser().resolve()
        if d not in seen:
            seen.append(d)
    return seen


def get_info(name: str) -> DatasetInfo:
    try:
        return CATALOG[name]
    except KeyError:
        raise DatasetMissingError(f"unknown dataset {name!r}; known: {', '.join(sorted(CATALOG))}") from None


def _present(info: DatasetInfo, root: Path) -> bool:
    target = root / info.relpath
    if info.kind == "beir":
        return all(
            (root / f).exists() or (root / f"{f}.gz").exists() for f in info.expected_files()
        )
    return target.exists() or Path(f"{target}.gz").exists()


def locate(name: str, data_dir: str | os.PathLike[str] | None = None, fetch: bool = False) -> Path:
    """Path of a dataset (file or BEIR folder); fetched from its source if `fetch` and it is downloadable."""
    info = get_info(name)
    dirs = search_dirs(data_dir)
    for root in dirs:
        if _present(info, root):
            target = root / info.relpath
            return target if target.exists() else Path(f"{target}.gz")
    reason = f"source: {info.source}"
    if fetch and info.kind in ("beir", "corpus"):
        try:
            return download_corpus(info, dirs[0]) if info.kind == "corpus" else download_beir(info, dirs[0])
        except OSError as exc:
            reason = f"downloading {info.source} failed ({exc})"
    searched = ", ".join(str(d) for d in dirs)
    expected = ", ".join(info.expected_files())
    raise DatasetMissingError(
        f"dataset {name!r} not found. Searched: {searched}. Expected under one of them: {expected}. "
        f"{reason}. Point --data-dir (or LENBENCH_DATA) at a folder holding it."
    )


def download_beir(info: DatasetInfo, root: Path) -> Path:  # pragma: no cover - needs network
    """BEIR's own zip, unpacked under root/beir/ (what beir.util.download_and_unzip does)."""
    root = root / "beir"
    root.mkdir(parents=True, exist_ok=True)
    zip_name = info.source.rsplit("/", 1)[1]
    zip_path = root / zip_name
    if not zip_path.exists():
        tmp = zip_path.with_suffix(".part")
        with urllib.request.urlopen(info.source, timeout=60) as resp, open(tmp, "wb") as out:
            while chunk := resp.read(1 << 20):
                out.write(chunk)
        tmp.rename(zip_path)
    with zipfile.ZipFile(zip_path) as zf:
        zf.extractall(root)
    return root.parent / info.relpath


def download_corpus(info: DatasetInfo, root: Path) -> Path:  # pragma: no cover - needs network
    """A training corpus: the file itself (wiki1m), or BEIR's zip unpacked under root/beir/ (msmarco)."""
    if info.source.endswith(".zip"):
        return download_beir(info, root)
    target = root / info.relpath
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".part")
    with urllib.request.urlopen(info.source, timeout=60) as resp, open(tmp, "wb") as out:
        while chunk := resp.read(1 << 20):
            out.write(chunk)
    tmp.rename(target)
    return target


def status(data_dir: str | os.PathLike[str] | None = None) -> list[tuple[DatasetInfo, Path | None]]:
    """(dataset, where it is or None) for every catalog entry: what `bench data list` prints."""
    out = []
    for info in CATALOG.values():
        try:
            out.append((info, locate(info.name, data_dir)))
        except DatasetMissingError:
            out.append((info, None))
    return out
