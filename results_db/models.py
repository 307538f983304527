"""SQLAlchemy tables of the results database.

One `Run` row per `bench eval` / `bench run` invocation (and per method of a comparison), with everything needed
to reproduce it; `Score` rows per (suite, dataset, variant, metric); `ScoreItems` holds the per-item values a
paired bootstrap needs (kept out of `Score` so listing thousands of runs never loads them); `TrainLog` holds
the training curve; `CurvePoint` the scores of an encoder evaluated during training (`bench run --eval-every`).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import JSON, DateTime, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship, validates

from results_db.redact import redact

SCHEMA_VERSION = 8


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


class Base(DeclarativeBase):
    pass


class Run(Base):
    __tablename__ = "runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), default="eval")  # eval | train
    model: Mapped[str] = mapped_column(Text)  # what was evaluated: hub id, folder, "bm25", trained output dir
    method: Mapped[str] = mapped_column(String(64), default="vanilla")
    backbone: Mapped[str] = mapped_column(Text, default="")
    suite: Mapped[str] = mapped_column(Text, default="")
    train_corpus: Mapped[str] = mapped_column(Text, default="")
    budget_label: Mapped[str] = mapped_column(Text, default="")  # canonical "steps=100,seconds=600"
    budget_asked: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    budget_consumed: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    config: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    config_hash: Mapped[str] = mapped_column(String(64), default="", index=True)
    seed: Mapped[int] = mapped_column(Integer, default=0)
    code_version: Mapped[str] = mapped_column(Text, default="")
    package_versions: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    data_fingerprint: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    command: Mapped[str] = mapped_column(Text, default="")
    output_dir: Mapped[str] = mapped_column(Text, default="")
    status: Mapped[str] = mapped_column(String(16), default="running", index=True)  # running|finished|failed
    error: Mapped[str] = mapped_column(Text, default="")
    started_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    finished_at: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    # Schema 2. Liveness of a "running" row: which process holds it and when it last reported (a row whose
    # process is gone is stale, not running).
    host: Mapped[str] = mapped_column(Text, default="")
    pid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    heartbeat_at: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    # How the run was executed, outside the config hash (a resume may change it): world size, per-rank batch,
    # device, backend...
    runtime: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    # What was evaluated, read from the model: parameters, embedding dim, max tokens.
    model_info: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    # The sweep this run is a point of (`bench sweep`), and the point's key inside it.
    sweep: Mapped[str] = mapped_column(Text, default="")
    sweep_point: Mapped[str] = mapped_column(Text, default="")

    scores: Mapped[list["Score"]] = relationship(back_populates="run", cascade="all, delete-orphan")

    @validates("command", "error", "model", "output_dir")
    def _no_password(self, _key: str, value: str | None) -> str | None:
        """A database URL's password never reaches a row, whichever command or message carries it."""
        return redact(value) if isinstance(value, str) else value


class Score(Base):
    __tablename__ = "scores"
    __table_args__ = (
        UniqueConstraint("run_id", "suite", "dataset", "variant", "metric", name="uq_score"),
        # Covers the leaderboard's main query (filter by suite/metric/variant, read run/dataset/value) so it
        # reads the index instead of scanning every score.
        Index("ix_scores_board", "suite", "metric", "variant", "run_id", "dataset", "value"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    suite: Mapped[str] = mapped_column(String(64))
    dataset: Mapped[str] = mapped_column(String(128))
    variant: Mapped[str] = mapped_column(String(32), default="clean")  # clean | elong-2 | elong-rand | change-...
    metric: Mapped[str] = mapped_column(String(64))
    value: Mapped[float] = mapped_column(Float)
    n: Mapped[int] = mapped_column(Integer, default=0)
    # Schema 2. What a reader needs to judge the number (None: nothing to flag). Keys:
    #   "limit": N           a `--limit N` subset (the first N items), not the full dataset
    #   "changed_frac": x    attacked variants: share of texts whose model input (token ids cut at max_len) the
    #                        attack changed; under 0.5 the "attacked" score is mostly the clean one
    #   "truncated_frac": y  share of the clean texts longer than max_len (clean rows too)
    #   other keys may say why a metric is undefined...
    info: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)

    run: Mapped[Run] = relationship(back_populates="scores")


class ScoreItems(Base):
    """Per-item values behind one score, for paired bootstrap.

    `aggregate` says how the score is rebuilt from a resample: "mean" (values = per-query nDCG, per-example
    correctness...) or "spearman" (values = predicted cosine, gold = gold score; score = 100 * spearman).
    """

    __tablename__ = "score_items"

    score_id: Mapped[int] = mapped_column(ForeignKey("scores.id", ondelete="CASCADE"), primary_key=True)
    aggregate: Mapped[str] = mapped_column(String(16))
    item_ids: Mapped[list[str]] = mapped_column(JSON)
    values: Mapped[list[float]] = mapped_column(JSON)
    gold: Mapped[list[float] | None] = mapped_column(JSON, nullable=True)


class TrainLog(Base):
    __tablename__ = "train_log"
    __table_args__ = (UniqueConstraint("run_id", "step", name="uq_train_step"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    step: Mapped[int] = mapped_column(Integer)
    loss: Mapped[float] = mapped_column(Float)
    lr: Mapped[float] = mapped_column(Float)
    examples_per_s: Mapped[float] = mapped_column(Float, default=0.0)
    extra: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class CurvePoint(Base):
    """Schema 3. One score of a learning curve: the encoder of run `run_id` after `step` training steps, scored during
    training (`bench run --eval-every N`). Kept apart from `Score`, which holds a run's final scores only, so no
    reader of the final scores ever sees an intermediate one. `items` holds the per-item values (the `ScoreItems`
    fields aggregate, item_ids, values, gold) for a bootstrap interval of the point, when the suite gives them."""

    __tablename__ = "curve_points"
    __table_args__ = (UniqueConstraint("run_id", "step", "suite", "dataset", "variant", "metric", name="uq_curve_point"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    step: Mapped[int] = mapped_column(Integer)
    suite: Mapped[str] = mapped_column(String(64))
    dataset: Mapped[str] = mapped_column(String(128))
    variant: Mapped[str] = mapped_column(String(32), default="clean")
    metric: Mapped[str] = mapped_column(String(64))
    value: Mapped[float] = mapped_column(Float)
    n: Mapped[int] = mapped_column(Integer, default=0)
    info: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    items: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)


class ClaimVerdict(Base):
    """Schema 6. One `bench claim FILE --scale S` verdict: the claim (its file's name), the scale, the overall verdict
    (holds / does not hold / incomplete) and one row per (comparator, dataset, variant) in `rows` (difference,
    interval, p, Holm-adjusted p, seeds, verdict), with the runs it read. A call on other runs (or with another
    verdict) adds a row, the same verdict on the same runs is stored once; readers show the newest per (claim, scale)."""

    __tablename__ = "claim_verdicts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    claim: Mapped[str] = mapped_column(String(128), index=True)
    scale: Mapped[str] = mapped_column(String(32))
    statement: Mapped[str] = mapped_column(Text, default="")
    treatment: Mapped[str] = mapped_column(String(128), default="")
    verdict: Mapped[str] = mapped_column(String(32))  # holds | does not hold | incomplete
    summary: Mapped[str] = mapped_column(Text, default="")  # the one line `bench claim` prints
    rows: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    run_ids: Mapped[list[int]] = mapped_column(JSON, default=list)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)


class Meta(Base):
    __tablename__ = "meta"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)
