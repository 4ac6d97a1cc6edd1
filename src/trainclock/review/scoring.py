"""MLPerf's scoring rules (runs per entry, olympic mean, non-converged runs allowed, how the RCP
check reads convergence) read from rules/scoring.yaml."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import yaml

from trainclock.review.rulebook import OWN_RULES

LAST_EVAL, FIRST_PASS = "last_eval", "first_pass"


@dataclass(frozen=True)
class ScoringRule:
    benchmark: str
    runs: int  # result logs an entry needs
    drop: int  # runs dropped from each end of the sorted times
    not_converged: int  # runs that may fail review, each dropped as one of the slowest
    progress: str  # what eval_accuracy's epoch_num (or samples_count, step_num) counts
    rcp_progress: str = LAST_EVAL  # how the RCP check reads a run's convergence point
    # FIRST_PASS only: (metric, comparison "<=" or ">=", threshold), a tuple to keep the rule hashable
    rcp_pass: tuple[tuple[str, str, float], ...] = ()


@dataclass(frozen=True)
class OlympicMean:
    """The summarizer's olympic mean, with which runs it kept and dropped (indices into the input)."""

    mean: float | None  # None: too many failures, or nothing left to average
    used: tuple[int, ...]
    fastest: tuple[int, ...]  # dropped as the fastest
    slowest: tuple[int, ...]  # converged runs dropped as the slowest (a failed run takes one of these places)
    failed: tuple[int, ...]  # runs that failed review (None), dropped as the slowest


@functools.cache
def _table() -> dict:
    return yaml.safe_load((OWN_RULES / "scoring.yaml").read_text())


def supported_rounds() -> list[str]:
    return list(_table()["rounds"])


def scoring_rule(benchmark: str | None) -> ScoringRule | None:
    row = _table()["benchmarks"].get(benchmark) if isinstance(benchmark, str) else None
    if not row:
        return None
    row = dict(row)
    row["rcp_pass"] = tuple((metric, op, float(limit)) for metric, (op, limit) in (row.get("rcp_pass") or {}).items())
    return ScoringRule(benchmark, **row)


def olympic(minutes: Sequence[float | None], drop: int, allowed: int | None = None) -> OlympicMean:
    """The official score of an entry's runs (None = a run that failed review), as
    result_summarizer._compute_olympic_average: sort, drop the `drop` fastest and, of the slowest,
    as many as failed runs have not already taken. More than `allowed` failures (default `drop`),
    or nothing left to average, gives no mean. Same arithmetic, so the same floating-point result."""
    allowed = drop if allowed is None else allowed
    failed = tuple(i for i, m in enumerate(minutes) if m is None)
    order = sorted((i for i, m in enumerate(minutes) if m is not None), key=lambda i: minutes[i])
    if len(failed) > allowed:
        return OlympicMean(None, (), (), (), failed)
    end = len(order) - max(drop - len(failed), 0)
    used = tuple(order[drop:end])
    kept = [minutes[i] for i in used]
    mean = sum(kept) * 1.0 / len(kept) if kept else None
    return OlympicMean(mean, used, tuple(order[:drop]), tuple(order[max(end, drop):]), failed)


def olympic_mean(minutes: Sequence[float | None], drop: int) -> float | None:
    """The olympic mean alone (see olympic)."""
    return olympic(minutes, drop).mean
