"""A review as data (`trainclock review --json`): per entry the verdict and official score, what the
result summarizer would print (score, runs used and dropped, RCP column, scaling factor), the RCP
check, and per run its time-to-train, convergence and errors."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from trainclock.mllog.reader import without_surrogates
from trainclock.review.entry import EntryReview
from trainclock.review.run_review import RunReview

FORMAT = "trainclock-review/1"


def entry_as_json(entry: EntryReview) -> dict[str, Any]:
    c = entry.context
    rule = entry.rule
    return {
        "round": c.round,
        "round_source": c.round_source,
        "org": entry.org,
        "system": entry.system,
        "benchmark": entry.benchmark,
        "name": entry.name,
        "division": entry.division,
        "folder": str(c.folder),
        "accelerators": entry.accelerators,
        "runs_required": rule.runs if rule else None,
        "runs_found": len(entry.runs),
        "verdict": entry.verdict,
        "ok": entry.ok,
        "score_minutes": entry.score_minutes,
        # what the official summarizer prints, beside trainclock's score: they differ where trainclock
        # withholds a score (a reason starting "score withheld by trainclock" says why)
        "summarizer_score_minutes": entry.summarizer_score,
        "scaling_factor": entry.scaling_factor,
        "scaling_json": None if entry.scaling_path is None else str(entry.scaling_path),
        "reasons": list(entry.reasons),
        "summarizer": entry.summarizer.as_json() if entry.summarizer else None,
        "rcp": entry.rcp.as_json() if entry.rcp else None,
        "runs": [run_as_json(run) for run in entry.runs],
    }


def run_as_json(run: RunReview) -> dict[str, Any]:
    return {
        "file": str(run.path),
        "minutes": run.minutes,
        "counted": run.passed,
        "status": run.status,
        "not_counted_because": run.why_not_counted,
        "where": None if run.passed else run.where,
        "converged_at": run.converged_at,
        "progress_unit": run.progress_unit,
        "rcp_point": run.rcp_point,
        "global_batch_size": run.rcp_batch_size if isinstance(run.rcp_batch_size, int | float) else None,
        "errors": [str(f) for f in run.errors],
        "warnings": run.warning_count,
    }


def review_as_json(entries: Sequence[EntryReview]) -> str:
    """The whole review as one JSON document."""
    data = {"format": FORMAT, "ok": all(e.ok for e in entries), "entries": [entry_as_json(e) for e in entries]}
    # lone surrogates (a file name that is not UTF-8) cannot be encoded; NaN is not JSON
    return json.dumps(_finite(without_surrogates(data)), indent=2, allow_nan=False, default=str)


def _finite(value: Any) -> Any:
    """NaN and infinities (which JSON lacks) as null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value
