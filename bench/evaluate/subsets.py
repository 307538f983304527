"""Which items `--limit N` scores, and how a score of those items is labelled wherever it is shown.

`--limit N` draws a seeded random sample of N of a dataset's M items (`--limit-mode sample`, the default). The rule,
for a dataset named NAME: `numpy.random.default_rng([limit_seed, zlib.crc32(NAME.encode())]).permutation(M)[:N]`,
the kept items then put back in file order. `limit_seed` is `--limit-seed` (default 0), not the evaluation's
`--seed`, so every model, every run and every training seed under one limit seed and one N scores the same items
(comparisons stay paired, item by item), while two datasets get draws of their own. What an item is: an STS pair, a
kNN text, a retrieval query (kept with its judgements, against the whole corpus), a held-out article. Where a
dataset has classes (kNN) the sample is stratified: each class keeps its share of the N (`class_quotas`: at least
two texts, which the 9:1 split needs), drawn within the class, the classes in label order. `--limit-mode first`
keeps the first N items in file order, as lenbench did before the sample.

A subset score records `limit` (N), `limit_of` (M), `limit_mode` and, for a sample, `limit_seed` in its info, and
is shown as "sample of N of M" ("first N of M"; "first N" for a row older than these keys, which were the first N).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

SAMPLE, FIRST = "sample", "first"
LIMIT_MODES = (SAMPLE, FIRST)
MIN_PER_CLASS = 2  # a stratified sample keeps two texts of each class that has them: kNN's 9:1 split needs two


@dataclass(frozen=True)
class Subset:
    """The items of a dataset a `--limit` scores: their positions in file order, out of `total`."""

    indices: tuple[int, ...]
    total: int
    mode: str
    seed: int

    def take(self, items: Sequence[Any]) -> list[Any]:
        return [items[i] for i in self.indices]

    def info(self) -> dict[str, Any]:
        """What a score of this subset records in its info (the keys `subset_label` reads)."""
        seed = {"limit_seed": self.seed} if self.mode == SAMPLE else {}
        return {"limit": len(self.indices), "limit_of": self.total, "limit_mode": self.mode, **seed}


def generator(seed: int, dataset: str) -> Any:
    """The random generator of one dataset's sample: the same for every model and run under one seed."""
    import numpy as np

    return np.random.default_rng([int(seed), zlib.crc32(dataset.encode("utf-8"))])


def draw(total: int, limit: int, seed: int, dataset: str, mode: str = SAMPLE,
         strata: Sequence[str] | None = None) -> Subset:  # fmt: skip
    """`limit` (< total) of a dataset's `total` items: the first ones, or a seeded sample (stratified by `strata`,
    one class label per item, when given)."""
    if mode not in LIMIT_MODES:
        raise ValueError(f"--limit-mode {mode!r}: choose one of {', '.join(LIMIT_MODES)}")
    if mode == FIRST:
        return Subset(tuple(range(limit)), total, mode, seed)
    rng = generator(seed, dataset)
    if strata is None:
        chosen = rng.permutation(total)[:limit]
    else:
        chosen = _stratified(rng, list(strata), limit)
    return Subset(tuple(sorted(int(i) for i in chosen)), total, mode, seed)


def class_quotas(counts: dict[str, int], limit: int) -> dict[str, int]:
    """How many of each class a stratified sample of `limit` keeps: MIN_PER_CLASS of each class that has them (when
    `limit` allows), the rest in proportion to what each class has left, rounded by largest remainder (ties: the
    class that sorts first)."""
    base = {c: min(n, MIN_PER_CLASS) for c, n in counts.items()}
    if sum(base.values()) > limit:
        base = dict.fromkeys(counts, 0)
    left = {c: counts[c] - base[c] for c in counts}
    spare = limit - sum(base.values())
    pool = sum(left.values())
    exact = {c: spare * left[c] / pool if pool else 0.0 for c in counts}
    quotas = {c: base[c] + int(exact[c]) for c in counts}
    rest = limit - sum(quotas.values())
    for c in sorted(counts, key=lambda c: (-(exact[c] - int(exact[c])), c))[:rest]:
        quotas[c] += 1
    return quotas


def _stratified(rng: Any, labels: list[str], limit: int) -> list[int]:
    by_class: dict[str, list[int]] = {}
    for i, label in enumerate(labels):
        by_class.setdefault(label, []).append(i)
    quotas = class_quotas({c: len(v) for c, v in by_class.items()}, limit)
    chosen: list[int] = []
    for c in sorted(by_class):  # one draw per class, in label order: the sample does not depend on the file's order of classes
        members = by_class[c]
        chosen += [members[j] for j in rng.permutation(len(members))[: quotas[c]]]
    return chosen


def _info(info: Any) -> dict[str, Any]:
    if isinstance(info, str):  # a JSON column as a database returns it
        import json

        try:
            info = json.loads(info)
        except ValueError:
            return {}
    return info if isinstance(info, dict) else {}


def subset_label(info: Any) -> str:
    """A score's subset as every table, file and frame shows it: 'sample of 300 of 1,379' (', seed 4' under a
    --limit-seed other than 0), 'first 300 of 1,379', 'first 300' (a row older than the sample: those were the first
    N), or '' for a whole dataset. Two scores with different labels are on different items: no view pools them."""
    info = _info(info)
    if not info.get("limit"):
        return ""
    limit = int(info["limit"])
    mode = info.get("limit_mode", FIRST)
    of = f" of {int(info['limit_of']):,}" if info.get("limit_of") else ""
    if mode != SAMPLE:
        return f"first {limit:,}{of}"
    seed = int(info.get("limit_seed") or 0)
    return f"sample of {limit:,}{of}" + (f", seed {seed}" if seed else "")


def labelled_dataset(dataset: str, info: Any) -> str:
    """'stsb', or for a --limit subset 'stsb (sample of 300 of 1,379)': a dataset as a table names it."""
    label = subset_label(info)
    return f"{dataset} ({label})" if label else dataset
