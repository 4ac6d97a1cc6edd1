"""The reference-convergence-point (RCP) check: does an entry converge suspiciously faster than the
MLCommons reference runs at its batch size? The rules are rcp_checker's (mlperf_logging): the
olympic mean of the runs' convergence points must not beat the fastest mean the references
allow; trainclock feeds it the points its review already read and, unlike check_directory, never
writes scaling.json into a result tree."""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from trainclock.errors import DataError
from trainclock.review.rcp_stats import References
from trainclock.review.rulebook import rules_folder
from trainclock.review.scoring import ScoringRule


@dataclass(frozen=True)
class RcpCheck:
    status: str  # "pass", "fail" (converges too fast), "missing" (no reference for this batch size), "n/a"
    message: str
    reference: str | None = None  # e.g. "gpt3_ref_2048", or an interpolation between two
    reference_mean: float | None = None  # the references' olympic mean convergence, in the progress unit
    min_mean: float | None = None  # the fastest submission mean the references allow
    submission_mean: float | None = None
    normalization: float = 1.0  # the score factor the RCP rules call for when faster than reference_mean
    binding: bool = True  # False when the entry has too few runs for the official test: a hint only


def default_rcp_dir() -> Path:
    import mlperf_logging.rcp_checker  # the package only: its checker module imports scipy

    return Path(mlperf_logging.rcp_checker.__file__).parent


def check_convergence(rule: ScoringRule, round_: str, batch_sizes: Sequence[int | None],
                      points: Sequence[float | None], rcp_dir: Path | None = None) -> RcpCheck:
    """RCP check of an entry's runs from their global batch sizes and convergence points (None: did
    not converge). With fewer runs than the rules ask for, the plain mean of the converged runs is
    compared, a non-binding hint of whether they converge suspiciously fast."""
    path = (rcp_dir or default_rcp_dir()) / rules_folder(round_) / f"rcps_{rule.benchmark}.json"
    if not path.is_file():
        return RcpCheck("n/a", f"no reference convergence points for {rule.benchmark} in round {round_} ({path})")
    sizes = set(batch_sizes)
    if len(sizes) != 1 or None in sizes:
        shown = ", ".join(sorted(str(s) for s in sizes))
        return RcpCheck("fail", f"the runs must log one global_batch_size, found {shown}")
    failed = sum(p is None for p in points)
    if failed > rule.drop or failed == len(points):
        return RcpCheck("n/a", f"{failed} of {len(points)} runs did not converge")
    binding = len(points) >= rule.runs
    mean, how = _submission_mean(points, rule.drop) if binding else _plain_mean(points)
    reference, note = _references(path, rule).for_batch_size(sizes.pop())
    if reference is None:
        return RcpCheck("missing", note, binding=binding)
    found = dict(reference=note, reference_mean=reference.mean, min_mean=reference.min_mean,
                 submission_mean=mean, normalization=max(1.0, reference.mean / mean), binding=binding)
    unit = rule.progress
    if mean >= reference.min_mean:
        return RcpCheck("pass", f"{how} {mean:,.0f} {unit} >= {reference.min_mean:,.0f}, the fastest the "
                                f"references allow ({note})", **found)
    return RcpCheck("fail", f"{how} {mean:,.0f} {unit} is faster than the references allow: "
                            f"{reference.min_mean:,.0f} at the least ({note})", **found)


def _submission_mean(points: Sequence[float | None], drop: int) -> tuple[float, str]:
    # a run that did not converge is the slowest (rcp_checker counts it as 1e9, which for gpt3's
    # token counts would be among the fastest: infinity is what it means)
    done = sorted(math.inf if p is None else p for p in points)
    kept = done[drop:len(done) - drop]
    return sum(kept) / len(kept), "olympic mean"


def _plain_mean(points: Sequence[float | None]) -> tuple[float, str]:
    converged = [p for p in points if p is not None]
    return sum(converged) / len(converged), f"mean of {len(converged)} run(s) (too few for the official test)"


@functools.cache
def _references(path: Path, rule: ScoringRule) -> References:
    try:
        records = json.loads(path.read_text())
        return References(records, rule.runs, rule.drop)
    except OSError as e:
        raise DataError(f"cannot read reference convergence points {path}: {e.strerror}") from None
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise DataError(f"reference convergence points {path} are not in MLCommons' rcps_*.json format "
                        f"({type(e).__name__}: {e}); point --rcp-dir at a folder laid out as "
                        "mlperf_logging's rcp_checker") from None
