"""`diag`: the LA(SER)^3 length diagnostics (paper §3 PoC experiments 1-2, §6.1) on STS-B test (dataset "stsb").

The suite always compares clean texts with attacked ones: its variants are "clean" and one per entry of
`--elong` (default 2,rand), whether or not `@elong` is written; other families named as a suffix
(`diag@pad`) are added after them. The paper attacks with m=100; pass
`--elong 100` for that (every attack is `elongate_within`: copies cut at the model's max_len).

Metrics per variant (cosines in [-1, 1], not x100: they are geometry, not task scores):
    pair_cos_mean       mean cosine of the STS-B pairs (both sentences attacked); per-pair cosines kept as
                        ItemValues so the leaderboard can plot the distribution (PoC 1, Figure 2)
    pair_cos_median, pair_cos_std, pair_cos_p10, pair_cos_p90   distribution summary
    pair_cos_shift      mean over pairs of (attacked cosine - clean cosine); 0 for clean; per-pair items
    intra_sim           mean over texts of the mean cosine between each token embedding (last layer, special
                        tokens included, as mean pooling includes them) and the text's mean-pooled embedding
    token_anisotropy    mean cosine of TOKEN_PAIRS random token pairs drawn from two different texts
    intra_sim_adj       intra_sim - token_anisotropy (the paper's displayed value, PoC 2 / Figure 3)
    anisotropy          mean cosine of SENTENCE_PAIRS random pairs of distinct sentence embeddings (Figure 4)
    positional_jsd      Jensen-Shannon divergence between the pair-cosine histogram with sentence 1 as is and
                        with sentence 1's words shuffled (§6.1); shuffling happens before the attack.
                        Histograms: JSD_BINS equal bins on [-1, 1]; value = scipy's `jensenshannon(p, q, base=2)`,
                        i.e. the Jensen-Shannon *distance* (square root of the divergence) in bits, in [0, 1].
                        The paper does not state its bins or base; see the module constants.
Texts for the token/sentence measures: the unique sentences of both sides of STS-B test.
Each variant runs the model once per distinct sentence (`token_pass`: token vectors, and the sentence embedding
pooled from them) plus once per shuffled sentence 1 (`encode`); on the ONNX backend the token vectors come from
its token-level export. Before, a torch token pass came on top of two pooled encodes and diag took over 50x a
clean STS-B evaluation (benchmarks/diag.py prints the ratio).
`--limit N` uses the first N pairs. Random draws are seeded from ctx.seed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.spatial.distance import jensenshannon

from bench.data.errors import DataError
from bench.evaluate.attacks import shuffle_words
from bench.evaluate.suites.base import CLEAN, EvalContext, SuiteError
from bench.evaluate.suites.sts import load_sts, sts_pool
from bench.evaluate.suites.variants import variant_loop
from results_db.records import ItemValues, ScoreRecord

DATASET = "stsb"
JSD_BINS = 50
JSD_BASE = 2
TOKEN_PAIRS = 20_000
SENTENCE_PAIRS = 20_000
TOKEN_CHUNK = 256  # texts whose token embeddings are held at once


def _normalise(x: np.ndarray) -> np.ndarray:
    return x / np.clip(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12, None)


def cosine_histogram(cos: np.ndarray, bins: int = JSD_BINS) -> np.ndarray:
    counts, _ = np.histogram(np.clip(cos, -1.0, 1.0), bins=bins, range=(-1.0, 1.0))
    return counts / max(1, counts.sum())


def positional_jsd(cos_as_is: np.ndarray, cos_shuffled: np.ndarray, bins: int = JSD_BINS) -> float:
    """Jensen-Shannon distance (base 2, in [0, 1]) between two pair-cosine histograms on fixed bins."""
    p, q = cosine_histogram(cos_as_is, bins), cosine_histogram(cos_shuffled, bins)
    return float(jensenshannon(p, q, base=JSD_BASE))


def random_pairs(n: int, n_pairs: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Indices of n_pairs random pairs of distinct rows out of n."""
    if n < 2:
        raise DataError(f"anisotropy needs at least 2 texts, got {n}")
    i = rng.integers(0, n, n_pairs)
    j = (i + rng.integers(1, n, n_pairs)) % n  # j != i
    return i, j


def pairs_cosine(emb: np.ndarray, pairs: tuple[np.ndarray, np.ndarray]) -> float:
    e = _normalise(emb.astype(np.float64))
    return float(np.einsum("ij,ij->i", e[pairs[0]], e[pairs[1]]).mean())


def random_pair_cosine(emb: np.ndarray, n_pairs: int, rng: np.random.Generator) -> float:
    """Mean cosine of random pairs of distinct rows (the anisotropy estimate)."""
    return pairs_cosine(emb, random_pairs(len(emb), n_pairs, rng))


def token_statistics(model: Any, texts: list[str], n_pairs: int, rng: np.random.Generator) -> tuple[float, float]:
    """(intra-document similarity, token anisotropy) from the model's last-layer token embeddings.

    Token pairs for the anisotropy are drawn from a reservoir of up to 64 tokens per text, always from two
    different texts, so the estimate is not dominated by within-text similarity.
    """
    _, intra, aniso = token_pass(model, texts, n_pairs, rng)
    return intra, aniso


def token_pass(model: Any, texts: list[str], n_pairs: int, rng: np.random.Generator, pooling: str = "mean",
               desc: str = "") -> tuple[np.ndarray, float, float]:  # fmt: skip
    """One forward pass over the texts' tokens, chunk by chunk: (their pooled, normalised embeddings, intra-document
    similarity, token anisotropy). The sentence embedding is pooled from the same token vectors (the mean over
    real tokens, or the first token for CLS), so the diagnostics run the model once per text, not twice."""
    from bench.runtime import progress

    intra: list[float] = []
    pool_tokens: list[np.ndarray] = []
    pool_doc: list[np.ndarray] = []
    pooled: list[np.ndarray] = []
    bar = progress.bar(total=len(texts), desc=desc or "diag tokens", unit="text", disable=len(texts) < 256)
    try:
        for start in range(0, len(texts), TOKEN_CHUNK):
            for d, tokens in enumerate(model.token_embeddings(texts[start : start + TOKEN_CHUNK]), start):
                raw = tokens.astype(np.float64)
                tok = _normalise(raw)
                mean = raw.mean(axis=0)
                doc = _normalise(mean)
                pooled.append(raw[0] if pooling == "cls" else mean)
                intra.append(float((tok @ doc).mean()))
                keep = rng.choice(len(tok), size=min(64, len(tok)), replace=False)
                pool_tokens.append(tok[keep])
                pool_doc.append(np.full(len(keep), d))
            bar.update(min(TOKEN_CHUNK, len(texts) - start))
    finally:
        bar.close()
    tokens = np.concatenate(pool_tokens)
    owner = np.concatenate(pool_doc)
    if len(set(owner.tolist())) < 2:
        raise DataError("token anisotropy needs at least 2 texts")
    i = rng.integers(0, len(tokens), n_pairs)
    j = rng.integers(0, len(tokens), n_pairs)
    other = owner[i] != owner[j]
    cos = np.einsum("ij,ij->i", tokens[i[other]], tokens[j[other]])
    return _normalise(np.stack(pooled)).astype(np.float32), float(np.mean(intra)), float(cos.mean())


@dataclass
class DiagSuite:
    name: str = "diag"
    needs_tokens: bool = True  # token embeddings: an object scored through its own encode has none
    data_kind: str = "sts"  # datasets are catalog entries or local files of this kind

    def datasets(self) -> list[str]:
        return [DATASET]

    def attacks(self, ctx: EvalContext):  # noqa: ANN201 - list[Attack]
        """elong always (its own --elong parameters), then the other families of the suffix."""
        others = tuple(f for f in ctx.families if f != "elong") if ctx.attacked else ()
        return ctx.attacks(("elong", *others))

    def variants(self, ctx: EvalContext) -> list[str]:
        return [CLEAN] + [a.name for a in self.attacks(ctx)]

    def evaluate(self, model: Any, dataset: str, ctx: EvalContext) -> list[ScoreRecord]:
        if not callable(getattr(model, "token_embeddings", None)):
            raise SuiteError("the diag suite needs a transformer encoder (token embeddings); bm25 has none")
        data = load_sts(dataset, ctx)
        n = len(data.scores)
        if n < 2:
            raise DataError(f"diag: {dataset!r} has {n} pair(s); the diagnostics need at least 2")
        ids = [str(i) for i in range(n)]
        shuffle_rng = ctx.rng("diag|shuffle")
        s1_shuffled = [shuffle_words(s, shuffle_rng) for s in data.sentences1]
        records: list[ScoreRecord] = []
        clean_cos: np.ndarray | None = None

        loop = variant_loop(model, ctx, measured=data.sentences1 + data.sentences2, pool=sts_pool(data),
                            attacks=self.attacks(ctx), measure=True, dataset="diag")  # fmt: skip
        info: dict = {}

        def add(variant: str, metric: str, value: float, items: ItemValues | None = None, count: int = n) -> None:
            records.append(ScoreRecord(self.name, dataset, metric, float(value), n=count, variant=variant, items=items,
                                       info=dict(info)))  # fmt: skip

        for v in loop:
            variant = v.name
            s1 = list(v.texts(data.sentences1, salt=f"diag|{variant}|1"))
            s2 = list(v.texts(data.sentences2, salt=f"diag|{variant}|2"))
            # the same seed draws the same m for each shuffled sentence as for its original
            s1_shuf = list(v.texts(s1_shuffled, salt=f"diag|{variant}|1"))
            info = v.info(s1 + s2)  # what the attack changed (Score.info)
            # One token pass over the distinct sentences gives their embeddings and the token measures; the random
            # sentence pairs are drawn first, as when the embeddings came from a separate encode (same seeded draws).
            texts = list(dict.fromkeys(list(s1) + list(s2)))
            row = {t: k for k, t in enumerate(texts)}
            rng = np.random.default_rng(ctx.rng(f"diag|{variant}|sample").getrandbits(32))
            sentence_pairs = random_pairs(len(texts), SENTENCE_PAIRS, rng)
            emb, intra, token_aniso = token_pass(model, texts, TOKEN_PAIRS, rng, getattr(model, "pooling", "mean"),
                                                 desc=f"diag {variant}")  # fmt: skip
            e1, e2 = emb[[row[t] for t in s1]], emb[[row[t] for t in s2]]
            cos = np.einsum("ij,ij->i", e1, e2)
            if clean_cos is None:
                clean_cos = cos
            cos_shuffled = np.einsum("ij,ij->i", model.encode(s1_shuf, desc=f"diag {variant} shuffled"), e2)
            shift = cos - clean_cos

            add(variant, "pair_cos_mean", cos.mean(), ItemValues("mean", ids, cos.tolist()))
            add(variant, "pair_cos_median", np.median(cos))
            add(variant, "pair_cos_std", cos.std())
            add(variant, "pair_cos_p10", np.percentile(cos, 10))
            add(variant, "pair_cos_p90", np.percentile(cos, 90))
            add(variant, "pair_cos_shift", shift.mean(), ItemValues("mean", ids, shift.tolist()))
            add(variant, "positional_jsd", positional_jsd(cos, cos_shuffled))

            add(variant, "anisotropy", pairs_cosine(emb, sentence_pairs), count=len(texts))
            add(variant, "intra_sim", intra, count=len(texts))
            add(variant, "token_anisotropy", token_aniso, count=len(texts))
            add(variant, "intra_sim_adj", intra - token_aniso, count=len(texts))
        return records


def make_suite(arg: str | None) -> DiagSuite:
    if arg and arg.strip() != DATASET:
        raise SuiteError(f"diag runs on STS-B test only (diag or diag:{DATASET}), got diag:{arg}")
    return DiagSuite()
