"""MLPerf's scoring rules of each round (runs per entry, olympic mean, non-converged runs allowed,
how the RCP check reads convergence): review/rounds.py builds them from mlperf_logging and
rules/scoring.yaml."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from trainclock.review.round_rules import FIRST_PASS, LAST_EVAL, ScoringRule
from trainclock.review.rounds import all_rounds

__all__ = ["FIRST_PASS", "LAST_EVAL", "OlympicMean", "ScoringRule", "olympic", "olympic_mean", "scoring_rule",
           "supported_rounds"]


@dataclass(frozen=True)
class OlympicMean:
    """The summarizer's olympic mean, with which runs it kept and dropped (indices into the input)."""

    mean: float | None  # None: too many failures, or nothing left to average
    used: tuple[int, ...]
    fastest: tuple[int, ...]  # dropped as the fastest
    slowest: tuple[int, ...]  # converged runs dropped as the slowest (a failed run takes one of these places)
    failed: tuple[int, ...]  # runs that failed review (None), dropped as the slowest


def supported_rounds() -> list[str]:
    """The rounds trainclock reviews: those the installed mlperf_logging has rules for, oldest first."""
    return list(all_rounds())


def scoring_rule(benchmark: str | None, round_: str | None = None) -> ScoringRule | None:
    """The rules of `benchmark` in `round_`; None where the round has none for it. Without a
    round (the planner's runs per result, the same in every round) the oldest round that has it."""
    if not isinstance(benchmark, str):
        return None
    if round_ is not None:
        found = all_rounds().get(round_)
        return found.rules.get(benchmark) if found else None
    return next((r.rules[benchmark] for r in all_rounds().values() if benchmark in r.rules), None)


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
