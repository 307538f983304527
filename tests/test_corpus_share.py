"""A BEIR corpus read share by share under torchrun (gloo, CPU, 2 and 3 ranks): each rank indexes only the records
whose line starts in its byte range of corpus.jsonl, and the evaluation scores what one process scores, with a
repeated id whose records sit in different ranks' ranges, a blank document and judgements naming documents the
corpus does not have (bench.data.corpus_share, bench.evaluate.sharded_search)."""

from __future__ import annotations

import json
import os
import pickle
import zlib
from pathlib import Path

import numpy as np
import pytest

from tests.test_distributed_train import free_port

pytestmark = pytest.mark.usefixtures("one_thread")

WORDS = "apple banana cherry grape lemon mango olive peach pear plum quince berry melon kiwi lime fig date".split()


class BagEncoder:
    """A deterministic bag-of-words encoder (16 hashed dimensions): cheap, and with ties between documents."""

    name, max_len, device_name = "bag", 64, "cpu"

    def encode(self, texts, desc="", **options):  # noqa: ANN001, ANN003, ANN201, ARG002
        texts = list(texts[0 : len(texts)])
        out = np.zeros((len(texts), 16), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                out[i, zlib.crc32(word.encode()) % 16] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms > 0, norms, 1.0)


def record(doc_id: str, text: str, title: str = "") -> str:
    return json.dumps({"_id": doc_id, "title": title, "text": text}) + "\n"


def write_corpus(folder: Path, bad_line: int | None = None) -> None:
    """36 records: 'dup' at line 3 and last (its last record is what query q1 asks for), 'tri' at lines 5, 18 and
    35, a blank document at line 12; qrels judging two documents the corpus lacks. `bad_line`: that line is not JSON."""
    lines = []
    for i in range(34):
        words = " ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(2 + i % 5))
        lines.append(record(f"d{i}", f"{words} {'filler ' * (i % 4)}", title=f"Title {i}" if i % 3 else ""))
    lines[2] = record("dup", "zebra stripes savanna")  # replaced by the last record
    lines[4] = record("tri", "first record of tri")
    lines[11] = record("blank", "")
    lines[17] = record("tri", "second record of tri")
    lines += [record("tri", "lime fig date last record"), record("dup", "quince quince berry melon")]
    if bad_line is not None:
        lines[bad_line - 1] = "{not json\n"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(lines))
    queries = {"q1": "quince berry melon", "q2": "apple banana", "q3": "lime fig date", "q4": "peach pear plum"}
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries.items()))
    qrels = [("q1", "dup", 2), ("q2", "d7", 1), ("q2", "ghost", 1), ("q3", "tri", 1), ("q3", "ghost2", 1),
             ("q4", "d20", 1), ("q4", "d5", 2)]  # fmt: skip
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{s}\n" for q, d, s in qrels))


def expected_shares(path: Path, world: int) -> list[list[str]]:
    """Each rank's ids, from the bytes: the ids whose first record's line starts in the rank's byte range."""
    raw = path.read_bytes()
    size, seen, shares = len(raw), set(), [[] for _ in range(world)]
    start = 0
    for line in raw.splitlines(keepends=True):
        doc_id = json.loads(line)["_id"]
        if doc_id not in seen:
            seen.add(doc_id)
            shares[max(r for r in range(world) if size * r // world <= start)].append(doc_id)
        start += len(line)
    return shares


def evaluate(folder_root: Path, model):  # noqa: ANN001, ANN201 - (records, what the rank read)
    from bench.data import read_beir
    from bench.data.corpus_share import read_share
    from bench.evaluate.suites.base import EvalContext
    from bench.evaluate.suites.retrieval import RetrievalSuite

    data = read_beir(folder_root / "beir" / "toy", name="toy", corpus_reader=read_share)
    ids = list(data.corpus)
    seen = {"ids": ids, "docs": data.documents(ids), "shard": getattr(data.corpus, "shard", None),
            "duplicates": data.duplicates, "anomalies": data.anomalies}  # fmt: skip
    records = RetrievalSuite(("toy",)).evaluate(model, "toy", EvalContext(data_dir=str(folder_root)))
    return {(r.metric, r.variant): (r.value, r.info, r.items.values) for r in records}, seen


def _worker(rank: int, world: int, port: int, root: str, bad_root: str, out: str) -> None:
    import torch

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world))  # fmt: skip
    torch.set_num_threads(1)
    from bench.data import read_beir
    from bench.data.corpus_share import read_share
    from bench.data.errors import DataError
    from bench.encode.sharded import shard_encoder
    from bench.runtime import distributed

    assert distributed.init_from_env("cpu")
    try:
        scores, seen = evaluate(Path(root), shard_encoder(BagEncoder()))
        try:
            read_beir(Path(bad_root) / "beir" / "toy", corpus_reader=read_share)
            error = None
        except DataError as exc:
            error = str(exc)
        Path(out, f"rank{rank}.pkl").write_bytes(pickle.dumps({"scores": scores, "seen": seen, "error": error}))
    finally:
        distributed.shutdown()


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    """The corpus, and what one process reads and scores from it."""
    root = tmp_path_factory.mktemp("share")
    write_corpus(root / "good" / "beir" / "toy")
    write_corpus(root / "bad" / "beir" / "toy", bad_line=33)
    scores, seen = evaluate(root / "good", BagEncoder())
    return root, scores, seen


@pytest.mark.parametrize("world", [2, 3])
def test_ranks_index_their_byte_ranges_and_score_as_one_process(single, world, tmp_path):
    import torch.multiprocessing as mp

    from bench.data import read_beir
    from bench.data.errors import DataError

    root, one_scores, one = single
    assert one["duplicates"] == {"corpus": 3} and one["anomalies"] == {"qrels_unknown_docs": 2, "blank_docs": 1}
    assert one["docs"][one["ids"].index("dup")]["text"] == "quince quince berry melon"  # the last record, row 2
    assert one["ids"].index("dup") == 2 and one["shard"] is None
    mp.spawn(_worker, args=(world, free_port(), str(root / "good"), str(root / "bad"), str(tmp_path)), nprocs=world,
             join=True)  # fmt: skip
    ranks = [pickle.loads((tmp_path / f"rank{r}.pkl").read_bytes()) for r in range(world)]

    shares = expected_shares(root / "good" / "beir" / "toy" / "corpus.jsonl", world)
    assert [r["seen"]["ids"] for r in ranks] == shares  # a rank holds its share only
    assert all(0 < len(s) < len(one["ids"]) for s in shares)
    assert [i for r in ranks for i in r["seen"]["ids"]] == one["ids"]  # in file order: the corpus-wide rows
    assert [d for r in ranks for d in r["seen"]["docs"]] == one["docs"]  # 'dup' and 'tri': their last records
    assert "dup" in shares[0] and "tri" in shares[0]  # kept where they first appear; their last records are elsewhere
    for r, part in enumerate(ranks):
        shard = part["seen"]["shard"]
        assert (shard.rank, shard.world, shard.total) == (r, world, len(one["ids"]))
        assert shard.first_row == sum(len(s) for s in shares[:r])
        assert part["seen"]["duplicates"] == one["duplicates"] and part["seen"]["anomalies"] == one["anomalies"]
        assert part["scores"].keys() == one_scores.keys()
        for key, (value, info, items) in one_scores.items():
            assert part["scores"][key] == (value, info, items), key  # to the digit, per query too
    assert one_scores[("ndcg_at_10", "clean")][0] > 0
    assert ranks[0]["scores"][("ndcg_at_10", "clean")][2][0] == pytest.approx(100.0)  # q1 finds dup's last record

    with pytest.raises(DataError) as one_error:
        read_beir(root / "bad" / "beir" / "toy")
    assert ":33: not valid JSON" in str(one_error.value)
    assert [r["error"] for r in ranks] == [str(one_error.value)] * world  # every rank: the line one process names


def test_a_ranks_progress_note_covers_its_byte_range(tmp_path):
    """A rank reading bytes [start, ...) of the corpus keeps its own note, whose digest starts at `start`: a change
    before its range is another rank's business, a change inside it is refused in one line."""
    from bench.data.errors import DataError
    from bench.evaluate.corpus_progress import CorpusProgress

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_bytes(b"".join(record(f"d{i}", f"text number {i}").encode() for i in range(20)))
    start = corpus.read_bytes().index(b'{"_id": "d10"')
    progress = CorpusProgress(corpus, "model|bytes", tmp_path / "cache", start=start)
    progress.read_up_to(start + 100)
    note = json.loads(progress.note.read_text())
    assert (note["start"], note["read_bytes"]) == (start, start + 100)
    raw = bytearray(corpus.read_bytes())
    raw[5] = ord("X")  # before this rank's range
    corpus.write_bytes(bytes(raw))
    CorpusProgress(corpus, "model|bytes", tmp_path / "cache", start=start).check()
    raw[start + 50] = ord("X")  # inside what it read
    corpus.write_bytes(bytes(raw))
    with pytest.raises(DataError, match=rf"its bytes {start:,} to {start + 100:,} differ"):
        CorpusProgress(corpus, "model|bytes", tmp_path / "cache", start=start).check()
