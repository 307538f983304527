"""The data side of an estimate (`bench eval/run --estimate`): what each dataset a suite reads holds, counted
cheaply from its files (newlines of a corpus, the judged queries of its qrels; STS and kNN files are small and read
whole), or from the publishers' figures when it is not here (bench.data.published, with what to download); and
small random samples of it written as a dataset of the same kind in a scratch folder, which the real suite then
scores (bench.experiment.estimate.evaluation calibrates on them).

A sample of a missing BEIR set is made of wiki-offline words at the set's published mean lengths.
"""

from __future__ import annotations

import csv
import gzip
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.data.catalog import CQADUPSTACK_FORUMS, DatasetInfo, Located
from bench.data.published import PublishedSize, published


def members(dataset: str) -> list[str]:
    """The catalog datasets one suite dataset reads (cqadupstack: its 12 forums)."""
    return [f"cqadupstack-{f}" for f in CQADUPSTACK_FORUMS] if dataset == "cqadupstack" else [dataset]


def count_lines(path: Path) -> int:
    """Lines of a (gzipped) text file, counted in 16 MiB blocks (a last line without its newline counts)."""
    opener = gzip.open if path.suffix == ".gz" else open
    lines, last = 0, b"\n"
    with opener(path, "rb") as fh:
        while block := fh.read(1 << 24):
            lines += block.count(b"\n")
            last = block[-1:]
    return lines + (last != b"\n")


def sample_lines(path: Path, k: int, rng: random.Random, taken: set[int] | None = None) -> list[bytes]:
    """Up to k distinct non-blank lines from random places of a file (a .gz file: its first k lines), none of those
    starting at an offset (line number for .gz) in `taken`, which gains the chosen ones: the samples of one estimate
    never share a text, since a text an earlier sample encoded would be a cache hit that costs nothing."""
    taken = set() if taken is None else taken
    out: dict[int, bytes] = {}
    if path.suffix == ".gz":
        with gzip.open(path, "rb") as fh:
            for i, line in enumerate(fh):
                if len(out) >= k:
                    break
                if line.strip() and i not in taken:
                    out[i] = line
        taken.update(out)
        return list(out.values())
    size = path.stat().st_size
    with open(path, "rb") as fh:
        for _ in range(3 * k):
            if len(out) >= k or size == 0:
                break
            fh.seek(rng.randrange(size))
            fh.readline()  # the rest of the line the offset fell in
            start = fh.tell()
            line = fh.readline()
            if not line:  # past the last line: the first one
                start, line = 0, (fh.seek(0), fh.readline())[1]
            if line.strip() and start not in taken:
                out[start] = line if line.endswith(b"\n") else line + b"\n"
    taken.update(out)
    return list(out.values())


def file_in(folder: Path, name: str) -> Path:
    plain = folder / name
    return plain if plain.exists() else Path(f"{plain}.gz")


def judged_queries(qrels: Path) -> int:
    """Queries with a positive judgement in a BEIR qrels file (the ones scored; a header line is skipped)."""
    opener = gzip.open if qrels.suffix == ".gz" else open
    positive: set[str] = set()
    with opener(qrels, "rt", encoding="utf-8") as fh:
        for row in csv.reader(fh, delimiter="\t"):
            if len(row) >= 3:
                try:
                    if int(float(row[2])) > 0:
                        positive.add(row[0])
                except ValueError:
                    continue  # the header
    return len(positive)


@dataclass
class Member:
    """One dataset as it is here (`located`) or as published (`figures`): its size in `items` (documents of a BEIR
    set, pairs of an STS set, texts of a labelled set) and, for BEIR, its judged queries."""

    info: DatasetInfo
    located: Located | None
    items: int
    queries: int = 0
    rows: list[Any] | None = None  # an STS or labelled set's rows, read whole (they are small)
    figures: PublishedSize | None = None

    @property
    def texts(self) -> int:
        """Texts encoded for the clean variant: documents and queries, both sentences of a pair, each text."""
        return self.items + self.queries if self.info.kind == "beir" else self.items * (2 if self.info.kind == "sts" else 1)


def measure_member(info: DatasetInfo, located: Located | None) -> Member:
    """Count a dataset that is here, or take its published figures (items 0 when it has none)."""
    from bench.data.labelled import read_labelled
    from bench.data.sts import STS_FORMATS

    if located is None:
        figures = published(info.name)
        return Member(info, None, figures.documents if figures else 0, figures.queries if figures else 0,
                      figures=figures)  # fmt: skip
    if info.kind == "beir":
        folder = located.path
        return Member(info, located, count_lines(file_in(folder, "corpus.jsonl")),
                      judged_queries(file_in(folder, "qrels/test.tsv")))  # fmt: skip
    if info.kind == "sts":
        data = STS_FORMATS[located.format](located.path, name=info.name, split=info.split)
        rows = list(zip(data.sentences1, data.sentences2, data.scores))
    else:
        data = read_labelled(located.path, name=info.name)
        rows = list(zip(data.texts, data.labels))
    random.Random(info.name).shuffle(rows)  # once: the samples are slices of one order, so they never overlap
    return Member(info, located, len(rows), rows=rows)


# ------------------------------------------------------------------------------- samples
def write_sample(member: Member, root: Path, items: int, rng: random.Random, words: list[str], skip: int = 0,
                 taken: dict[str, set[int]] | None = None) -> int:  # fmt: skip
    """Write `items` random items of `member` under `root` in its catalog layout (a kind the suite reads from a data
    folder), an STS or labelled set's after its first `skip`, a BEIR set's lines none of which is in `taken` (per
    file; it gains them): samples that do not overlap. Returns the texts written (documents and queries,
    sentences, texts)."""
    target = root / member.info.relpath
    target.parent.mkdir(parents=True, exist_ok=True)
    if member.info.kind == "sts":
        chosen = (member.rows or [])[skip : skip + items]
        with open(target, "w", newline="", encoding="utf-8") as fh:
            out = csv.writer(fh, delimiter="\t")
            out.writerow(["sentence1", "sentence2", "score", "split"])
            out.writerows([s1, s2, score, member.info.split or ""] for s1, s2, score in chosen)
        return 2 * len(chosen)
    if member.info.kind != "beir":
        chosen = (member.rows or [])[skip : skip + items]
        target.write_text("".join(json.dumps({"text": t, "label": label}) + "\n" for t, label in chosen))
        return len(chosen)
    n_queries = max(1, min(member.queries, round(items * member.queries / max(member.items, 1))))
    if member.located is not None:
        taken = {} if taken is None else taken
        corpus, query_file = file_in(member.located.path, "corpus.jsonl"), file_in(member.located.path, "queries.jsonl")
        docs = sample_lines(corpus, items, rng, taken.setdefault(str(corpus), set()))
        queries = sample_lines(query_file, n_queries, rng, taken.setdefault(str(query_file), set()))
    else:
        figures = member.figures or PublishedSize(1, 1, 100.0, 10.0, 0)
        docs = _made_up(words, items, figures.doc_words, rng, "d")
        queries = _made_up(words, n_queries, figures.query_words, rng, "q")
    return _write_beir(target, docs, queries, rng)


def _made_up(words: list[str], n: int, mean_words: float, rng: random.Random, prefix: str) -> list[bytes]:
    lines = []
    for i in range(n):
        length = max(1, int(rng.expovariate(1 / mean_words))) if mean_words > 0 else 1
        start = rng.randrange(max(1, len(words) - length))
        text = " ".join(words[start : start + length])
        lines.append((json.dumps({"_id": f"{prefix}{i}", "title": "", "text": text}) + "\n").encode())
    return lines


def _write_beir(folder: Path, docs: list[bytes], queries: list[bytes], rng: random.Random) -> int:
    doc_ids = [str(json.loads(line)["_id"]) for line in docs]
    query_ids = [str(json.loads(line)["_id"]) for line in queries]
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    (folder / "corpus.jsonl").write_bytes(b"".join(docs))
    (folder / "queries.jsonl").write_bytes(b"".join(queries))
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{rng.choice(doc_ids)}\t1\n" for q in query_ids)
    )
    return len(docs) + len(queries)


def filler_words() -> list[str]:
    """Words of real text for the samples of sets that are not here (wiki-offline; a fixed sentence without it)."""
    try:
        from bench.data.corpus import wiki_offline_articles

        words = " ".join(a.text for a in wiki_offline_articles()[:400]).split()
    except Exception:  # noqa: BLE001 - the package is optional; any real-looking words will do
        words = []
    return words or ("the quick brown fox jumps over the lazy dog while a researcher waits for numbers " * 50).split()
