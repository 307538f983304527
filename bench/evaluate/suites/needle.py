"""`needle`: synthetic passkey and needle retrieval at growing context lengths (LongEmbed's synthetic tasks, Zhu et al.
2024), built offline and deterministically from local text.

Two datasets, each scored at every context length L (default 64, 128, 256, 512, 1024 tokens; `--needle-lengths`):
    passkey  documents of neutral filler sentences with one line "{Name}'s pass key is {N}. Remember it. {N} is the
             pass key for {Name}." at a random depth; query "What is the pass key for {Name}?".
    needle   documents cut from the packaged wiki-offline corpus (Wikipedia summaries) with one templated fact
             sentence about a generated name inserted at a random depth; query a question about that fact.
Per length: 100 candidate documents (each with its own generated name, absent from every haystack), 50 of them
queried; each query's one relevant document is the one holding its name, so it is answerable only from that
document. Scored like LongEmbed: nDCG@1 (x100: the share of queries whose document ranks first) per length, variant
`len-L`, and their mean, variant `len-mean` (per item: the query's mean over lengths). Each score's info keeps the
depth of every item's needle (`depths`, in [0, 1], aligned with the item ids), so scores can be split by
(length, depth), and the mean length actually built (`tokens_mean`).

Lengths are counted in the evaluated model's own tokens (its fast tokenizer), so "L tokens" is what that model
reads; a model reads at most its max_len of them, so a needle placed beyond it cannot be found (that is the point).
A model without a tokenizer (BM25) counts in the packaged all-MiniLM-L6-v2's tokens (bert-base-uncased WordPiece)
when that package is installed, else in words and punctuation marks (BERT's pre-tokenizer, from the tokenizers
library lenbench depends on): the suite never needs a particular model installed. Which tokenizer counted is in
every score's info (`length_tokenizer`). Randomness comes from the evaluation seed only. BM25 runs it too (its own
search). `--limit N` uses N queries (and 2N candidates) per length.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
import pytrec_eval

from bench.evaluate.attacks import split_sentences
from bench.evaluate.attacks.base import cut_each, token_counts
from bench.evaluate.suites.base import EvalContext, NamedDatasets, SuiteError
from results_db.records import ItemValues, ScoreRecord

DATASETS = ("passkey", "needle")
LENGTHS = (64, 128, 256, 512, 1024)
N_QUERIES = 50
N_DOCS = 100
METRIC = "ndcg_at_1"
MEAN_VARIANT = "len-mean"

FILLER = ("The grass is green.", "The sky is blue.", "The sun is yellow.", "Here we go.", "There and back again.")
PASSKEY_LINE = "{name}'s pass key is {key}. Remember it. {key} is the pass key for {name}."
PASSKEY_QUERY = "What is the pass key for {name}?"
# (fact sentence, question): the answer is only in the fact; slots filled from SLOTS
NEEDLE_FACTS = (
    ("{name} grew up in a village called {place}.", "In which village did {name} grow up?"),
    ("{name}'s favourite musical instrument is the {instrument}.", "What is {name}'s favourite musical instrument?"),
    ("{name} keeps a pet {animal} named {pet}.", "What pet does {name} keep?"),
    ("The secret password of {name} is {word}.", "What is the secret password of {name}?"),
)
SLOTS = {
    "instrument": ("cello", "banjo", "oboe", "harp", "accordion", "trombone", "ukulele", "bagpipe"),
    "animal": ("tortoise", "parrot", "ferret", "goat", "hedgehog", "lizard", "rabbit", "owl"),
}
_SYLLABLES = ("ka", "lo", "mi", "ra", "ven", "tor", "qui", "zel", "dra", "nu", "bex", "sil", "mor", "tha", "gri",
              "pel", "vo", "xan", "jul", "ek", "ban", "ori", "sta", "fen")  # fmt: skip


def made_up_word(rng: random.Random, parts: int) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(parts))


@dataclass(frozen=True)
class LengthCounter:
    """Counts tokens of texts (no special tokens) and cuts a text after N tokens, in one tokenizer's tokens."""

    tokenizer: Any  # a transformers fast tokenizer (character offsets are needed to cut)
    name: str

    def count(self, texts: list[str]) -> list[int]:
        return token_counts(texts, self.tokenizer, 1 << 30) if texts else []

    def cut(self, text: str, budget: int) -> str:
        return cut_each([text], [budget], self.tokenizer, budget)[0]


def length_counter(model: Any = None) -> LengthCounter:
    """The evaluated model's own fast tokenizer; else the packaged all-MiniLM-L6-v2's when installed; else words."""
    tokenizer = getattr(model, "tokenizer", None) if model is not None else None
    if tokenizer is not None and getattr(tokenizer, "is_fast", False):
        return LengthCounter(tokenizer, f"{getattr(model, 'name', 'model')} tokenizer")
    return default_counter()


@lru_cache(maxsize=1)
def default_counter() -> LengthCounter:
    from transformers import AutoTokenizer

    from bench.encode.loading import reference_model_dir

    path = reference_model_dir()
    if path is not None:
        return LengthCounter(AutoTokenizer.from_pretrained(str(path)), "all-MiniLM-L6-v2 tokenizer (packaged)")
    return LengthCounter(word_tokenizer(), WORDS)


WORDS = "words (BERT pre-tokenizer)"


def word_tokenizer() -> Any:
    """A fast tokenizer whose tokens are words and punctuation marks (BERT's normaliser and pre-tokenizer, every word
    one token): built from the tokenizers library alone, no vocabulary file."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from bench.runtime.progress import quiet_transformers

    quiet_transformers()
    words = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    words.normalizer = normalizers.BertNormalizer(lowercase=True)
    words.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return PreTrainedTokenizerFast(tokenizer_object=words, unk_token="[UNK]", model_max_length=1 << 30)


@dataclass
class NeedleSet:
    """One dataset at one length: documents (doc i holds name i), queries for the first n_queries documents."""

    length: int
    docs: list[str]
    queries: list[str]
    names: list[str]
    depths: list[float]  # of each queried document's needle: filler sentences before it / all filler sentences
    tokens: list[int] = field(default_factory=list)  # length of each document in tokens
    needle_ends: list[int] = field(default_factory=list)  # of each queried document: tokens up to its needle's end

    @property
    def query_ids(self) -> list[str]:
        return [f"q{i:03d}" for i in range(len(self.queries))]

    @property
    def doc_ids(self) -> list[str]:
        return [f"d{i:03d}" for i in range(len(self.docs))]


def unique_names(rng: random.Random, n: int, haystack: str) -> list[str]:
    """n distinct made-up two-part names, no part inside another nor a word of `haystack` (so a name, and each of its
    parts, is in one document only)."""
    forbidden = set(re.findall(r"\w+", haystack.lower()))
    names: list[str] = []
    parts: set[str] = set()
    while len(names) < n:
        first, last = made_up_word(rng, 2).capitalize(), made_up_word(rng, 3).capitalize()
        clash = any(a in b or b in a for a in (first, last) for b in parts)  # no name inside another's
        if first == last or clash or first.lower() in forbidden or last.lower() in forbidden:
            continue
        parts |= {first, last}
        names.append(f"{first} {last}")
    return names


def fill(sentences: list[str], counts: list[int], budget: int) -> list[str]:
    """The leading sentences whose tokens fit in `budget` (at least one when any exists)."""
    out, total = [], 0
    for s, c in zip(sentences, counts):
        if out and total + c > budget:
            break
        out.append(s)
        total += c
    return out


def with_needle(haystack: list[str], needle: str, depth: float) -> tuple[str, float, str]:
    """The needle inserted at the sentence boundary nearest `depth`; (text, the depth it got, the text up to the
    needle's end: what a model must read to see the needle whole)."""
    at = round(depth * len(haystack))
    return (" ".join(haystack[:at] + [needle] + haystack[at:]), (at / len(haystack) if haystack else 0.0),
            " ".join(haystack[:at] + [needle]))  # fmt: skip


def build_passkey(length: int, n_docs: int, n_queries: int, rng: random.Random, lengths: LengthCounter,
                  at: float | None = None) -> NeedleSet:
    count = lengths.count
    filler_counts = count(list(FILLER))
    names = unique_names(rng, n_docs, " ".join(FILLER))
    keys = rng.sample(range(10_000, 100_000), n_docs)
    docs, depths, queries, ends = [], [], [], []
    for name, key in zip(names, keys):
        line = PASSKEY_LINE.format(name=name, key=key)
        start = rng.randrange(len(FILLER))
        cycle = [FILLER[(start + i) % len(FILLER)] for i in range(length)]  # more than enough sentences
        cycle_counts = [filler_counts[(start + i) % len(FILLER)] for i in range(length)]
        haystack = fill(cycle, cycle_counts, max(0, length - count([line])[0]))
        drawn = rng.random()  # drawn even when `at` fixes the depth: the same documents at every depth
        text, depth, upto = with_needle(haystack, line, drawn if at is None else at)
        docs.append(text)
        depths.append(depth)
        ends.append(upto)
        queries.append(PASSKEY_QUERY.format(name=name))
    return NeedleSet(length, docs, queries[:n_queries], names, depths[:n_queries], count(docs), count(ends[:n_queries]))


@lru_cache(maxsize=1)
def wiki_sentences() -> tuple[str, ...]:
    """Every sentence of the packaged wiki-offline corpus, in article order."""
    from bench.data.corpus import wiki_offline_articles

    return tuple(s for article in wiki_offline_articles() for s in split_sentences(article.text))


def wiki_window(start: int, tokens: int, count: Any) -> tuple[list[str], list[int]]:
    """Consecutive wiki-offline sentences from `start` (wrapping round) holding at least `tokens` tokens, with counts."""
    sentences = wiki_sentences()
    window: list[str] = []
    counts: list[int] = []
    step = tokens // 16 + 4  # sentences average ~25 tokens: one or two rounds
    while sum(counts) < tokens and len(window) < len(sentences):
        more = [sentences[(start + len(window) + i) % len(sentences)] for i in range(step)]
        window += more
        counts += count(more)
    return window, counts


def build_needle(length: int, n_docs: int, n_queries: int, rng: random.Random, lengths: LengthCounter,
                 at: float | None = None) -> NeedleSet:
    count = lengths.count
    sentences = wiki_sentences()
    windows = [wiki_window(rng.randrange(len(sentences)), length, count) for _ in range(n_docs)]
    names = unique_names(rng, n_docs, " ".join(" ".join(w) for w, _ in windows))
    docs, depths, queries, ends = [], [], [], []
    for name, (window, window_counts) in zip(names, windows):
        fact, question = rng.choice(NEEDLE_FACTS)
        slots = {"name": name, "place": made_up_word(rng, 3).capitalize(), "pet": made_up_word(rng, 2).capitalize(),
                 "word": made_up_word(rng, 3), **{k: rng.choice(v) for k, v in SLOTS.items()}}  # fmt: skip
        line = fact.format(**slots)
        budget = max(0, length - count([line])[0])
        cut = lengths.cut(" ".join(window), budget)  # the last sentence may be cut
        haystack = split_sentences(cut)
        drawn = rng.random()
        text, depth, upto = with_needle(haystack, line, drawn if at is None else at)
        docs.append(text)
        depths.append(depth)
        ends.append(upto)
        queries.append(question.format(**slots))
    return NeedleSet(length, docs, queries[:n_queries], names, depths[:n_queries], count(docs), count(ends[:n_queries]))


BUILDERS = {"passkey": build_passkey, "needle": build_needle}


def build(dataset: str, length: int, seed: int, limit: int | None = None, lengths: LengthCounter | None = None,
          at: float | None = None) -> NeedleSet:
    """One dataset at one length, its lengths counted by `lengths` (default: `default_counter()`). `at`: every
    needle at this depth (the position suite) instead of a random one; the documents, names and facts are the same
    whatever the depth."""
    n_queries = min(N_QUERIES, limit) if limit else N_QUERIES
    n_docs = min(N_DOCS, 2 * limit) if limit else N_DOCS
    rng = random.Random(f"{seed}|needle|{dataset}|{length}")
    return BUILDERS[dataset](length, n_docs, n_queries, rng, lengths or default_counter(), at)


def ndcg_at_1(model: Any, data: NeedleSet, desc: str) -> list[float]:
    """nDCG@1 x100 of every query (one relevant document each: 100 when it ranks first), by pytrec_eval."""
    from bench.evaluate.suites.retrieval import search_run

    qids, dids = data.query_ids, data.doc_ids
    run = search_run(model, data.queries, data.docs, qids, dids, ignore_identical_ids=False, desc=desc)
    qrels = {q: {dids[i]: 1} for i, q in enumerate(qids)}
    result = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.1"}).evaluate(run)
    return [100.0 * result.get(q, {}).get("ndcg_cut_1", 0.0) for q in qids]


def parse_lengths(spec: str | None) -> tuple[int, ...]:
    if not spec:
        return LENGTHS
    try:
        lengths = tuple(int(x) for x in str(spec).split(",") if x.strip())
    except ValueError:
        lengths = ()
    if not lengths or min(lengths) < 8:
        raise SuiteError(f"--needle-lengths {spec!r}: give token counts >= 8, e.g. 64,128,256,512,1024")
    return tuple(sorted(set(lengths)))


@dataclass
class NeedleSuite(NamedDatasets):
    names: tuple[str, ...] = DATASETS
    name: str = "needle"
    lexical_ok: bool = True  # BM25 ranks the documents with its own search

    def lengths(self, ctx: EvalContext) -> tuple[int, ...]:
        return parse_lengths(ctx.options.get("needle_lengths"))

    def variants(self, ctx: EvalContext) -> list[str]:
        return [f"len-{n}" for n in self.lengths(ctx)] + [MEAN_VARIANT]

    def evaluate(self, model: Any, dataset: str, ctx: EvalContext) -> list[ScoreRecord]:
        from bench.data.corpus import wiki_offline_file

        if dataset == "needle":
            ctx.files_read.add(str(wiki_offline_file()))
        records, per_length = [], []
        counter = length_counter(model)  # lengths in the evaluated model's own tokens (see the module docstring)
        limit = ctx.limit_for(dataset, N_QUERIES, "queries per length")
        for length in self.lengths(ctx):
            data = build(dataset, length, ctx.seed, limit, counter)
            values = ndcg_at_1(model, data, desc=f"{dataset} {length} tokens")
            per_length.append(values)
            info = {"depths": [round(d, 4) for d in data.depths], "tokens_mean": float(np.mean(data.tokens)),
                    "candidates": len(data.docs), "length_tokenizer": counter.name}  # fmt: skip
            records.append(ScoreRecord(self.name, dataset, METRIC, float(np.mean(values)), n=len(values),
                                       variant=f"len-{length}", items=ItemValues("mean", data.query_ids, values),
                                       info=info))  # fmt: skip
        mean_items = np.mean(np.asarray(per_length, dtype=float), axis=0).tolist()
        records.append(ScoreRecord(self.name, dataset, METRIC, float(np.mean(mean_items)), n=len(mean_items),
                                   variant=MEAN_VARIANT, items=ItemValues("mean", records[0].items.item_ids, mean_items),
                                   info={"lengths": list(self.lengths(ctx))}))  # fmt: skip
        return records


def make_suite(arg: str | None) -> NeedleSuite:
    if not arg:
        return NeedleSuite()
    names = tuple(n.strip() for n in arg.split(",") if n.strip())
    bad = [n for n in names if n not in DATASETS]
    if bad or not names:
        raise SuiteError(f"needle: datasets are {', '.join(DATASETS)} (e.g. needle:passkey), got {arg!r}")
    return NeedleSuite(names)
