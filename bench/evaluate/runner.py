"""Run suites over a model and write each dataset's scores to the results database as soon as it is done."""

from __future__ import annotations

import time

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from bench.runtime import distributed
from bench.encode.sharded import shard_encoder
from bench.evaluate import score_info
from bench.evaluate.changed_data import changed_files, dataset_paths
from bench.evaluate.suites.base import EvalContext, Suite, SuiteError
from results_db.records import ScoreRecord

if TYPE_CHECKING:
    from results_db import ResultsDB


def is_embedding_model(model: Any) -> bool:
    return callable(getattr(model, "encode", None))


def check_model(model: Any, suites: list[tuple[Suite, tuple[str, ...]]]) -> None:
    """Fail before anything is written when a suite cannot score this kind of model (bm25 on sts, knn, ...).

    A suite declares `lexical_ok = True` when it can score a model without `encode` (retrieval: BM25's `search`), and
    `needs_tokens = True` when it reads token embeddings (diag), which an object's own encode() does not give.
    """
    if is_embedding_model(model):
        tokenless = [suite.name for suite, _ in suites if getattr(suite, "needs_tokens", False)]
        if tokenless and not callable(getattr(model, "token_embeddings", None)):
            name = getattr(model, "name", type(model).__name__)
            raise SuiteError(f"model {name!r} is scored through its own encode(), which gives no token embeddings, so "
                             f"it cannot run {', '.join(dict.fromkeys(tokenless))}; give it as a SentenceTransformer "
                             "or a transformers model with its tokenizer, or drop that suite")  # fmt: skip
        return
    bad = [suite.name for suite, _ in suites if not getattr(suite, "lexical_ok", False)]
    if bad:
        name = getattr(model, "name", type(model).__name__)
        raise SuiteError(
            f"model {name!r} has no embeddings, so it can only run retrieval suites (beir14, beir:NAME); "
            f"not {', '.join(dict.fromkeys(bad))}"
        )


def locate_datasets(suites: list[tuple[Suite, tuple[str, ...]]], ctx: EvalContext) -> list[Any]:
    """Find every dataset the suites read (a `bench.data.Located` each) before anything is recorded, so a missing
    or unknown dataset is one clear error and no run row. Suites without a `data_kind` (mteb, heldout) find
    their own data. A BEIR set that `--download` may still fetch is left to the suite, once its host is known to be
    reachable. Every missing dataset of every suite is named in one error (not the first one only)."""
    from bench.data import find
    from bench.data.catalog import BEIR_URL, CQADUPSTACK_FORUMS
    from bench.data.download import check_reachable
    from bench.data.errors import DatasetMissingError

    found = []
    missing: list[tuple[str, str, DatasetMissingError]] = []
    to_fetch: list[str] = []
    for suite, _ in suites:
        kind = getattr(suite, "data_kind", None)
        if kind is None:
            continue
        for dataset in suite.datasets():
            names = [f"cqadupstack-{f}" for f in CQADUPSTACK_FORUMS] if dataset == "cqadupstack" else [dataset]
            for name in names:
                try:
                    found.append(find(name, ctx.data_dir, kind=kind))
                except DatasetMissingError as exc:
                    if ctx.fetch and kind == "beir":
                        if dataset not in to_fetch:  # cqadupstack is one download (one zip of its 12 forums)
                            to_fetch.append(dataset)
                    elif name not in {m[0] for m in missing}:
                        missing.append((name, kind, exc))
    paper = paper_sweep_hint(suites)
    if missing:
        error = missing_datasets_error(missing, ctx)
        raise type(error)(f"{error}{paper}")
    if to_fetch:  # offline: one line now, not one timeout per dataset later
        try:
            check_reachable(BEIR_URL.format(name=to_fetch[0]))
        except DatasetMissingError:
            from urllib.parse import urlsplit

            host = urlsplit(BEIR_URL.format(name=to_fetch[0])).hostname
            to_fetch.sort(key=lambda n: n == "cqadupstack")  # listed last, as in the offline error without --download
            names = ", ".join(f"cqadupstack ({len(CQADUPSTACK_FORUMS)} forums)" if n == "cqadupstack" else n for n in to_fetch)
            raise DatasetMissingError(
                f"{len(to_fetch)} BEIR dataset(s) to download ({names}), but {host} cannot be reached (offline?). "
                f"Download them elsewhere and put them in a data folder (`bench data list` shows where).{paper}"
            ) from None
    return found


PAPER_SWEEP = "sweeps/laser3-table2.toml"  # the LA(SER)^3 paper's BEIR-14 experiment with its training settings


def paper_sweep_hint(suites: list[tuple[Suite, tuple[str, ...]]]) -> str:
    """For a suite of the 14 BEIR sets: where the paper's own BEIR experiment is ('' otherwise)."""
    from bench.data.catalog import BEIR14

    if not any(tuple(getattr(suite, "datasets", lambda: ())()) == tuple(BEIR14) for suite, _ in suites):
        return ""
    return (f" The paper's BEIR-14 experiment (its backbone, corpora and training settings) is the sweep "
            f"`bench sweep {PAPER_SWEEP}`.")


def missing_datasets_error(missing: list[tuple[str, str, Exception]], ctx: EvalContext) -> Exception:
    """One error for every missing dataset: their names, where they were looked for, and what gets them."""
    from bench.data.catalog import search_dirs
    from bench.data.errors import DatasetMissingError

    fetchable = any(kind in ("beir", "corpus") for _, kind, _ in missing)
    hint = ("`bench data list` shows each dataset's expected files and source"
            + ("; --download (or LENBENCH_DOWNLOAD=1) fetches the missing BEIR sets from BEIR's URLs" if fetchable
               else ""))  # fmt: skip
    if len(missing) == 1:
        return DatasetMissingError(f"{missing[0][2]} {hint[0].upper()}{hint[1:]}.")
    try:
        searched = ", ".join(str(d) for d in search_dirs(ctx.data_dir))
    except Exception:  # noqa: BLE001 - the folder list is a courtesy; the names matter
        searched = "(the data folders)"
    listed = [name for name, _, _ in missing]
    forums = [n for n in listed if n.startswith("cqadupstack-")]
    if len(forums) > 1:  # one BEIR set of 12 forums: named once
        listed = [n for n in listed if not n.startswith("cqadupstack-")] + [f"cqadupstack ({len(forums)} forums)"]
    names = ", ".join(listed)
    return DatasetMissingError(f"{len(listed)} datasets not found: {names}. Searched: {searched}. {hint[0].upper()}"
                               f"{hint[1:]}; or point --data-dir (or LENBENCH_DATA) at a folder holding them.")  # fmt: skip


def suite_variants(suite: Suite, ctx: EvalContext) -> list[str]:
    """The variants a suite will score: its own list when it has one (diag always attacks), else the context's."""
    own = getattr(suite, "variants", None)
    return list(own(ctx)) if callable(own) else ctx.variants()


def evaluate(
    model: Any,
    suites: list[tuple[Suite, tuple[str, ...]]],
    ctx: EvalContext,
    db: ResultsDB | None = None,
    run_id: int | None = None,
    on_dataset: Callable[[str, list[ScoreRecord]], None] | None = None,
    earlier_fingerprint: dict[str, str] | None = None,
    say: Callable[[str], None] = print,
) -> list[ScoreRecord]:
    """Score every dataset of every suite; each dataset is one transaction, so a crash keeps finished ones.

    Datasets the run already has scores for (a resumed run) are not evaluated again, unless one of their files
    changed since the earlier attempt read it (`earlier_fingerprint`, the row's data fingerprint): those are scored
    again, and a line says so (through `say`, the caller's).

    Under torchrun every rank calls this with the same arguments, rank 0 alone with `db`: texts to encode are
    shared out over the ranks (bench.encode.sharded), rank 0's list of finished datasets is every rank's, and every rank
    returns the same records.
    """
    check_model(model, suites)
    model = shard_encoder(model)
    done = db.scored_datasets(run_id) if db is not None and run_id is not None else set()
    done = distributed.broadcast_from_main(done)
    earlier_fingerprint = distributed.broadcast_from_main(earlier_fingerprint or {})  # every rank skips alike
    records: list[ScoreRecord] = []
    for suite, families in suites:
        sub = replace(ctx, attacked=bool(families), families=tuple(families) or ctx.families)
        for dataset in suite.datasets():
            wanted = {(suite.name, dataset, v) for v in suite_variants(suite, sub)}
            if wanted <= done:
                changed = changed_files(dataset_paths(suite, dataset, sub), earlier_fingerprint or {})
                if not changed:
                    continue
                if distributed.is_main():
                    say(f"{suite.name}:{dataset}: {', '.join(changed)} changed since this run scored it; scored again")
            started = time.monotonic()
            before = score_info.start(model)
            mine = replace(sub, files_read=set())  # the files this dataset reads (its fingerprint)
            recs = suite.evaluate(model, dataset, mine)
            seconds = time.monotonic() - started
            ctx.files_read |= mine.files_read
            ctx.sources.update({k: v for k, v in mine.sources.items() if k not in ctx.sources})
            measured = score_info.measure(model, before, suite.name, mine.files_read)
            for rec in recs:  # what each score carries (bench.evaluate.score_info); a suite's own keys win
                rec.info = {**measured, **(rec.info or {})}
            if sub.limit:  # a subset is never mistaken for the full set, nor the full set for a subset
                key = "limit" if mine.limit_applies is not False else "limit_above_size"
                for rec in recs:
                    rec.info = {**(rec.info or {}), key: sub.limit}
            if db is not None and run_id is not None:
                db.add_scores(run_id, recs)
                record_seconds(db, run_id, f"{suite.name}/{dataset}", seconds)
            records.extend(recs)
            if on_dataset is not None:
                on_dataset(dataset, recs)
    return records


def record_seconds(db: ResultsDB, run_id: int, key: str, seconds: float) -> None:
    """Run.runtime["evaluation_seconds"][SUITE/DATASET]: the wall time one dataset's scoring took (all its variants),
    what `bench export --format mteb` writes as evaluation_time (training and loading are not in it)."""
    db.merge_runtime(run_id, {key: round(seconds, 3)}, section="evaluation_seconds")
