"""Facts about the official MLPerf benchmarks that their logs leave unsaid (rules/benchmarks.yaml):
each one's quality metric(s) with their direction, and what its progress count counts. Logs that
state these themselves (trainclock's: trainclock_target, trainclock_progress_unit) win over them."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import yaml

from trainclock.mllog.progress import ProgressCodec
from trainclock.review.rulebook import OWN_RULES

HIGHER, LOWER = "higher", "lower"
DIRECTIONS = (HIGHER, LOWER)


@dataclass(frozen=True)
class Metric:
    name: str  # as the log names it: a key of a dict value, or metadata "metric"
    direction: str  # HIGHER or LOWER is better
    label: str | None = None  # for people; the name when None
    target: float | None = None  # the threshold, where the log states it

    @property
    def shown(self) -> str:
        return self.label or self.name

    def best(self, values: list[float]) -> float | None:
        """The best of `values` in this metric's direction."""
        return (max if self.direction == HIGHER else min)(values) if values else None

    def as_json(self) -> dict:
        row = {"name": self.name, "direction": self.direction}
        if self.label:
            row["label"] = self.label
        if self.target is not None:
            row["target"] = self.target
        return row


@dataclass(frozen=True)
class BenchmarkFacts:
    key: str  # the MLPerf benchmark key (submission_benchmark)
    progress: str  # "tokens", "samples", "epochs", "steps"
    metrics: tuple[Metric, ...]
    units_per_sample: str | None = None  # header key: progress units in one training sample
    samples_per_unit: str | None = None  # header key: training samples in one progress unit
    # (metadata field, unit): the fields whose count is in a unit of their own (field_units), not `progress`
    counted_by: tuple[tuple[str, str], ...] = ()

    def unit_counted_by(self, field: str | None) -> str:
        """The progress unit of a log whose evaluations carry their count in `field`."""
        return dict(self.counted_by).get(field, self.progress) if field else self.progress

    def progress_codec(self, header: dict[str, Any], counted_in: str | None = None) -> ProgressCodec:
        """How a log of this benchmark that says nothing of its progress counts it: in its unit
        (by the field its evaluations count in), with the header's units_per_sample and
        samples_per_unit keys, where it has them (a positive number), saying how that relates to
        training samples."""
        return ProgressCodec(unit=self.unit_counted_by(counted_in),
                             units_per_sample=_header_number(header, self.units_per_sample),
                             samples_per_unit=_header_number(header, self.samples_per_unit))


@functools.cache
def _file() -> dict:
    return yaml.safe_load((OWN_RULES / "benchmarks.yaml").read_text())


@functools.cache
def _table() -> dict[str, BenchmarkFacts]:
    field_units = tuple(_file()["field_units"].items())
    return {key: BenchmarkFacts(key, row["progress"], tuple(Metric(**m) for m in row["metrics"]),
                                row.get("units_per_sample"), row.get("samples_per_unit"), field_units)
            for key, row in _file()["benchmarks"].items()}


def benchmark_facts(key: object) -> BenchmarkFacts | None:
    """The facts of an MLPerf benchmark key (submission_benchmark), None for any other value."""
    return _table().get(key) if isinstance(key, str) else None


def field_unit(benchmark: str, field: str) -> str | None:
    """The unit of a count in metadata `field` of `benchmark`'s evaluations: the field's own
    (field_units), else the benchmark's progress; None for a benchmark without facts whose field
    has no unit of its own."""
    facts = benchmark_facts(benchmark)
    return facts.unit_counted_by(field) if facts else _file()["field_units"].get(field)


def known_benchmarks() -> list[str]:
    return list(_table())


def with_targets(known: Sequence[Metric], targets: Sequence[tuple[str | None, str | None, float]]) -> tuple[Metric, ...]:
    """The metrics a log's targets (name, direction, threshold) name, else `known` (the
    benchmark's facts). A target without a direction is trainclock's first log form: one target
    whose metric is the benchmark's one metric, or else a lower-is-better one (log perplexity)."""
    found: dict[str, Metric] = {}
    for name, direction, threshold in targets:
        if direction in DIRECTIONS:
            metric = Metric(name or "quality", direction, None, threshold)
        elif len(known) == 1:
            metric = replace(known[0], target=threshold)
        else:
            metric = Metric(name or "quality", LOWER, None, threshold)
        found.setdefault(metric.name, metric)
    return tuple(found.values()) or tuple(known)


def metrics_from_json(rows: object) -> tuple[Metric, ...]:
    """Metrics as stored (Metric.as_json rows); anything malformed is left out."""
    if not isinstance(rows, list):
        return ()
    found = []
    for row in rows:
        if isinstance(row, dict) and isinstance(row.get("name"), str) and row.get("direction") in DIRECTIONS:
            target = row.get("target")
            found.append(Metric(row["name"], row["direction"], row.get("label") if isinstance(row.get("label"), str)
                                else None, float(target) if isinstance(target, int | float) else None))
    return tuple(found)


def describe(metrics: tuple[Metric, ...] | list[Metric]) -> str:
    """"masked-LM accuracy (higher is better)"; several joined with "and"."""
    return " and ".join(f"{m.shown} ({m.direction} is better)" for m in metrics)


def _header_number(header: dict[str, Any], key: str | None) -> float | None:
    """The header's value of `key` as a float, where it is a finite positive number."""
    value = header.get(key) if key else None
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        return float(value) if math.isfinite(value) and value > 0 else None
    except OverflowError:  # an integer past the largest double
        return None
