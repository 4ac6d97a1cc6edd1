"""MLPerf's scoring rules (runs per entry, olympic mean) read from rules/scoring.yaml."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import yaml

from trainclock.review.rulebook import OWN_RULES


@dataclass(frozen=True)
class ScoringRule:
    benchmark: str
    runs: int  # result logs an entry needs
    drop: int  # runs dropped from each end of the sorted times; also how many may fail
    progress: str  # what eval_accuracy's epoch_num (or samples_count, step_num) counts


@functools.cache
def _table() -> dict:
    return yaml.safe_load((OWN_RULES / "scoring.yaml").read_text())


def supported_rounds() -> list[str]:
    return list(_table()["rounds"])


def scoring_rule(benchmark: str | None) -> ScoringRule | None:
    row = _table()["benchmarks"].get(benchmark) if isinstance(benchmark, str) else None
    return ScoringRule(benchmark, **row) if row else None


def olympic_mean(minutes: Sequence[float | None], drop: int) -> float | None:
    """The official score of an entry's runs (None = a run that failed review): sort, drop the
    `drop` fastest and slowest, average the rest. A failed run counts as one of the slowest, so
    it is dropped first; more than `drop` failures, or nothing left to average, gives None.
    Same arithmetic as mlperf_logging's result summarizer, so the same floating-point result."""
    done = sorted(m for m in minutes if m is not None)
    failed = len(minutes) - len(done)
    if failed > drop:
        return None
    kept = done[drop:len(done) - (drop - failed)]
    return sum(kept) * 1.0 / len(kept) if kept else None
