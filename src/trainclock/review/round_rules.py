"""The scoring rule of one benchmark in one round, as review/rounds.py builds it."""

from __future__ import annotations

from dataclasses import dataclass

LAST_EVAL, FIRST_PASS = "last_eval", "first_pass"


@dataclass(frozen=True)
class ScoringRule:
    benchmark: str
    runs: int  # result logs an entry needs
    drop: int  # runs dropped from each end of the sorted times
    not_converged: int  # runs that may fail review, each dropped as one of the slowest
    progress: str  # what the count rcp_key holds is in (review/benchmarks.py field_unit)
    rcp_progress: str = LAST_EVAL  # how the RCP check reads a run's convergence point
    # FIRST_PASS only: (metric, comparison "<=" or ">=", threshold), a tuple to keep the rule hashable
    rcp_pass: tuple[tuple[str, str, float], ...] = ()
    rcp_key: str = "epoch_num"  # the eval line's metadata key rcp_checker reads the point from
    rcp_decimals: int | None = 3  # it rounds epoch_num to 3 decimals, samples_count not at all
    rcp_slack: float = 0.0  # subtracted from the fastest mean the references allow (rules/scoring.yaml)
    round: str | None = None  # the round these rules are of ("X.Y")
