"""The tables of the results store. One row per system description, per entry (one system's runs of
one benchmark in one round), per run (one log), per evaluation and per compliance finding.

Unknown names in an entry's key are stored as "" rather than NULL: SQL treats NULLs as distinct, so
a NULL would let the same entry in twice. Migrations (migrations.py) bring older databases here.

Nothing here is about one benchmark: progress is counted in the run's own unit (progress_unit:
tokens, samples, epochs, steps, ...) and quality in its own metrics, each with its direction,
stored as JSON rows {"name", "direction": "higher"|"lower", "label"?, "target"?}
(trainclock.review.benchmarks.Metric.as_json).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (JSON, BigInteger, Boolean, DateTime, Double, ForeignKey, Index, Integer, String, Text,
                        UniqueConstraint)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship


# 64-bit integers everywhere; on SQLite spelled INTEGER, which is 64-bit there and, as a primary
# key, the rowid that numbers new rows (a BIGINT primary key would not)
INT64 = BigInteger().with_variant(Integer, "sqlite")


class Base(DeclarativeBase):
    type_annotation_map = {int: INT64, float: Double, str: String, datetime: DateTime(timezone=True),
                           dict[str, Any]: JSON, list[str]: JSON}


class SchemaVersion(Base):
    """One row per schema version applied; the highest is the database's."""

    __tablename__ = "schema_version"
    version: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    applied_at: Mapped[datetime]


class System(Base):
    """A systems/<system>.json as it was when imported; a changed description is a new row."""

    __tablename__ = "systems"
    __table_args__ = (UniqueConstraint("name", "description_sha256"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str]  # the file's name without .json, as the result tree names the system
    description_sha256: Mapped[str] = mapped_column(String(64))  # of the fields, as canonical JSON
    submitter: Mapped[str | None]
    division: Mapped[str | None]
    status: Mapped[str | None]  # as written: "available", "cloud", "Available on premise", ...
    number_of_nodes: Mapped[int | None]
    accelerators_per_node: Mapped[int | None]
    accelerators: Mapped[int | None]  # nodes x accelerators per node; 0 for a CPU-only system
    accelerator_model: Mapped[str | None]
    host_processor_model: Mapped[str | None]
    framework: Mapped[str | None]
    fields: Mapped[dict[str, Any]]  # every field of the file


class Entry(Base):
    __tablename__ = "entries"
    __table_args__ = (UniqueConstraint("round", "org", "system", "benchmark", "division"),
                      Index("ix_entries_benchmark_round", "benchmark", "round"))
    id: Mapped[int] = mapped_column(primary_key=True)
    round: Mapped[str] = mapped_column(String(16))  # MLPerf Training rules applied, as "X.Y"
    org: Mapped[str]
    system: Mapped[str]
    # trainclock's member where the logs name one (<benchmark>-<size>), else the MLPerf key:
    # a small trainclock model is never ranked with the official entries of its benchmark
    benchmark: Mapped[str]
    division: Mapped[str]
    mlperf_benchmark: Mapped[str | None]  # submission_benchmark of the logs
    progress_unit: Mapped[str | None] = mapped_column(String(16))  # its runs' (the most common)
    metrics: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON)  # its runs' quality metrics
    system_id: Mapped[int | None] = mapped_column(ForeignKey("systems.id", ondelete="SET NULL"), index=True)
    availability: Mapped[str | None] = mapped_column(String(16))  # "cloud" or "onprem"
    status: Mapped[str | None]  # where availability came from: the system's status, else submission_status
    score_minutes: Mapped[float | None]  # the official score; None unless complete and valid
    # the score the official result summarizer prints: trainclock's, except where trainclock withholds
    # one (a failed RCP check without scaling.json); None where it prints none
    summarizer_minutes: Mapped[float | None]
    verdict: Mapped[str] = mapped_column(String(16))  # "valid", "invalid", "incomplete"
    reasons: Mapped[list[str]]
    runs_required: Mapped[int | None]  # by the scoring rules of the benchmark
    scaling_factor: Mapped[float]
    rcp_status: Mapped[str | None] = mapped_column(String(16))
    rcp_message: Mapped[str | None] = mapped_column(Text)
    round_source: Mapped[str] = mapped_column(String(16))  # "path", "option" or "default"
    folder: Mapped[str] = mapped_column(Text)  # the benchmark folder last reviewed
    imported_at: Mapped[datetime]
    updated_at: Mapped[datetime]

    system_row: Mapped[System | None] = relationship()
    runs: Mapped[list[Run]] = relationship(back_populates="entry", cascade="all, delete-orphan", passive_deletes=True,
                                           order_by="Run.run_index")


class Run(Base):
    __tablename__ = "runs"
    id: Mapped[int] = mapped_column(primary_key=True)
    entry_id: Mapped[int] = mapped_column(ForeignKey("entries.id", ondelete="CASCADE"), index=True)
    sha256: Mapped[str] = mapped_column(String(64), unique=True)  # of the log file: a log is stored once
    file_name: Mapped[str]
    path: Mapped[str] = mapped_column(Text)  # where it was imported from
    run_index: Mapped[int | None]  # the <i> of result_<i>.txt
    size_bytes: Mapped[int]
    status: Mapped[str]  # run_stop's status, or "unfinished"
    passed: Mapped[bool] = mapped_column(Boolean)  # complies with every rule and has a time-to-train
    time_to_train_ms: Mapped[float | None]
    minutes: Mapped[float | None]
    progress_unit: Mapped[str | None] = mapped_column(String(16))  # "tokens", "samples", "epochs", "steps", ...
    # progress (in progress_unit) at the first evaluation that met every quality target
    units_to_converge: Mapped[float | None]
    units_per_sample: Mapped[float | None]  # progress units in one training sample, where known (tokens: 2048)
    samples_to_converge: Mapped[float | None]  # where the log says how its unit relates to samples
    metrics: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON)  # quality metrics, with direction and target
    global_batch_size: Mapped[int | None]
    submission_status: Mapped[str | None]
    errors: Mapped[int]
    warnings: Mapped[int]
    header: Mapped[dict[str, Any]]  # the first value of each key logged before run_start
    # [[samples trained before it, start, stop], ...] of each evaluation, times in seconds from
    # run_start, in progress order: the timed region part by part (training, evaluations, the
    # rest), as the planner calibrates on it
    eval_spans: Mapped[list[list[float]] | None] = mapped_column(JSON)
    imported_at: Mapped[datetime]

    entry: Mapped[Entry] = relationship(back_populates="runs")
    evals: Mapped[list[Eval]] = relationship(cascade="all, delete-orphan", passive_deletes=True, order_by="Eval.seq")
    findings: Mapped[list[Finding]] = relationship(cascade="all, delete-orphan", passive_deletes=True,
                                                   order_by="Finding.seq")


class Eval(Base):
    """A point of a run's eval curve."""

    __tablename__ = "evals"
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    seq: Mapped[int]  # position in progress order
    progress: Mapped[float | None]  # in the run's progress unit
    value: Mapped[float | None]  # the metric, when a finite number
    # the metric otherwise: a dict (several metrics), a string, NaN as text
    value_json: Mapped[Any | None] = mapped_column(JSON(none_as_null=True))
    metric: Mapped[str | None]
    time_ms: Mapped[float | None]
    lineno: Mapped[int]


class Finding(Base):
    """A failed compliance rule (or a warning) of a run."""

    __tablename__ = "findings"
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    seq: Mapped[int]
    severity: Mapped[str] = mapped_column(String(16))
    rule: Mapped[str]
    key: Mapped[str | None]
    message: Mapped[str] = mapped_column(Text)
    lineno: Mapped[int | None]
