"""A run's progress unit and quality metrics as the store keeps them, and an entry's from its runs.
Used by the importer (records.py) for new rows and by the version-2 migration for rows that version
1 stored without them (from their header, convergence point and benchmark)."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from trainclock.review.benchmarks import Metric, benchmark_facts, with_targets

TARGET_KEY = "trainclock_target"  # the first value of which a version-1 header kept


def metrics_json(metrics: Sequence[Metric]) -> list[dict[str, Any]]:
    return [m.as_json() for m in metrics]


def run_facts(header: dict[str, Any], mlperf_benchmark: str | None, progress_unit: str | None,
              units_to_converge: float | None, samples_to_converge: float | None) -> dict[str, Any]:
    """progress_unit, units_per_sample and metrics (JSON rows) of a run stored by version 1."""
    facts = benchmark_facts(mlperf_benchmark if mlperf_benchmark else header.get("submission_benchmark"))
    unit = progress_unit or (facts.progress if facts else None)
    per_sample = None
    if unit and unit != "samples" and _positive(units_to_converge) and _positive(samples_to_converge):
        per_sample = units_to_converge / samples_to_converge  # what version 1 divided by
    elif facts:  # as the review reads a log that does not say: its benchmark's header key
        per_sample = facts.progress_codec(header).units_per_sample
    target = header.get(TARGET_KEY)
    targets = [(None, None, float(target))] if _positive(target) else []
    metrics = with_targets(facts.metrics if facts else (), targets)
    return {"progress_unit": unit, "units_per_sample": per_sample, "metrics": metrics_json(metrics)}


def entry_facts(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """An entry's progress unit and metrics: those most of its runs have."""
    units = Counter(r["progress_unit"] for r in runs if r.get("progress_unit"))
    metrics = Counter(json.dumps(r["metrics"], sort_keys=True) for r in runs if r.get("metrics"))
    return {"progress_unit": units.most_common(1)[0][0] if units else None,
            "metrics": json.loads(metrics.most_common(1)[0][0]) if metrics else []}


def _positive(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0
