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
from trainclock.review.rcp_stats import BELOW_ALL, INTERPOLATED, NONE, Reference, References
from trainclock.review.rulebook import rules_folder
from trainclock.review.scoring import ScoringRule


@dataclass(frozen=True)
class RcpCheck:
    status: str  # "pass", "fail" (converges too fast), "missing" (no reference for this batch size), "n/a"
    message: str
    reference: str | None = None  # e.g. "<benchmark>_ref_<batch>", or an interpolation between two
    reference_mean: float | None = None  # the references' olympic mean convergence, in the progress unit
    min_mean: float | None = None  # the fastest submission mean the references allow
    submission_mean: float | None = None
    normalization: float = 1.0  # the score factor the RCP rules call for when faster than reference_mean
    binding: bool = True  # False when the entry has too few runs for the official test: a hint only
    # what the result summarizer shows: its RCP column ("Pass", "Fail", "Interp. Fail", "Missing",
    # "No RCP", "Unknown state"; None where it runs no RCP check) and check_directory's message
    official: str | None = None
    official_message: str | None = None
    batch_size: int | None = None  # the one global_batch_size of the runs

    @property
    def failed(self) -> bool:
        """The summarizer prints "ERROR: RCP Test Failed" for this entry."""
        return self.official not in (None, "Pass")

    def as_json(self) -> dict:
        return {"status": self.status, "official": self.official, "official_message": self.official_message,
                "message": self.message, "binding": self.binding, "batch_size": self.batch_size,
                "reference": self.reference, "reference_mean": self.reference_mean, "min_mean": self.min_mean,
                "submission_mean": self.submission_mean, "normalization": self.normalization}


UNKNOWN = "Unknown state"  # the summarizer's RCP column where check_directory fails before comparing


def default_rcp_dir() -> Path:
    import mlperf_logging.rcp_checker  # the package only: its checker module imports scipy

    return Path(mlperf_logging.rcp_checker.__file__).parent


def check_convergence(rule: ScoringRule, round_: str, batch_sizes: Sequence[object],
                      points: Sequence[float | None], rcp_dir: Path | None = None) -> RcpCheck:
    """RCP check of an entry's runs from their global batch sizes and convergence points (None: did
    not converge), case for case as rcp_checker.check_directory with the pruned references. With
    fewer runs than the rules ask for, the plain mean of the converged runs is compared, a
    non-binding hint of whether they converge suspiciously fast."""
    path = (rcp_dir or default_rcp_dir()) / rules_folder(round_) / f"rcps_{rule.benchmark}.json"
    if not path.is_file():
        return RcpCheck("n/a", f"no reference convergence points for {rule.benchmark} in round {round_} ({path})")
    # a damaged log can log a list or an object: compared by its text, never hashed
    sizes = {s if s is None or isinstance(s, int | float | str) else repr(s) for s in batch_sizes}
    size = next(iter(sizes)) if len(sizes) == 1 else None
    if not (isinstance(size, int) and not isinstance(size, bool) and 0 < size < 2**63):
        shown = ", ".join(sorted(str(s) for s in sizes))
        return RcpCheck("fail", f"the runs must log one global_batch_size, found {shown}",
                        official=UNKNOWN, official_message="Could not detect global_batch_size")
    failed = sum(p is None for p in points)
    if failed > rule.not_converged or failed == len(points):
        return RcpCheck("fail", f"{failed} of {len(points)} runs did not converge; at most {rule.not_converged} may",
                        official=UNKNOWN, official_message="Insufficient convergence", batch_size=size)
    binding = len(points) >= rule.runs
    mean, how = _submission_mean(points, rule.drop) if binding else _plain_mean(points)
    reference, note, kind = references(path, rule).pick(size)
    if reference is None:
        message = "Cannot find any RCPs" if kind == NONE else f"Missing RCP, please submit RCP with BS = {size}"
        return RcpCheck("missing", note, binding=binding, official="No RCP" if kind == NONE else "Missing",
                        official_message=message, batch_size=size)
    min_mean = _min_mean(reference, rule.rcp_slack)
    # the summarizer's column always comes from the olympic mean, even of too few runs to bind
    # (of none left after the drops it is NaN, which fails every comparison)
    official, message = _official(_submission_mean(points, rule.drop)[0], min_mean, kind, size)
    found = dict(reference=note, reference_mean=reference.mean, min_mean=min_mean,
                 submission_mean=mean, normalization=max(1.0, reference.mean / mean), binding=binding,
                 batch_size=size, official=official, official_message=message)
    unit = rule.progress
    if mean >= min_mean:
        return RcpCheck("pass", f"{how} {mean:,.6g} {unit} >= {min_mean:,.6g}, the fastest the "
                                f"references allow ({note})", **found)
    return RcpCheck("fail", f"{how} {mean:,.6g} {unit} is faster than the references allow: "
                            f"{min_mean:,.6g} at the least ({note})", **found)


def _min_mean(reference: Reference, slack: float) -> float:
    """The fastest mean allowed; with slack, rcp_checker's `Max Speedup = mean / (Min Epochs - slack)`
    compared as mean / Max Speedup, in its arithmetic for the same float."""
    if not slack:
        return reference.min_mean
    return reference.mean / (reference.mean / (reference.min_epochs - slack))


def _official(mean: float, min_mean: float, kind: str, size: int) -> tuple[str, str]:
    """check_directory's verdict as the summarizer shows it: (RCP column, message)."""
    if mean >= min_mean:
        return "Pass", ("RCP not found but slower convergence on smaller batch size" if kind == BELOW_ALL else
                        "RCP Interpolation" if kind == INTERPOLATED else "RCP found")
    if kind == BELOW_ALL:
        return "Missing", f"Missing RCP, please submit RCP with BS = {size}"
    return ("Interp. Fail", "RCP Interpolation") if kind == INTERPOLATED else ("Fail", "RCP found")


def _submission_mean(points: Sequence[float | None], drop: int) -> tuple[float, str]:
    # a run that did not converge is the slowest (rcp_checker counts it as 1e9, which for a benchmark
    # that counts tokens would be among the fastest: infinity is what it means)
    done = sorted(math.inf if p is None else p for p in points)
    kept = done[drop:len(done) - drop]
    return (sum(kept) / len(kept) if kept else math.nan), "olympic mean"


def _plain_mean(points: Sequence[float | None]) -> tuple[float, str]:
    converged = [p for p in points if p is not None]
    return sum(converged) / len(converged), f"mean of {len(converged)} run(s) (too few for the official test)"


@functools.cache
def references(path: Path, rule: ScoringRule) -> References:
    try:
        records = json.loads(path.read_text())
        return References(records, rule.runs, rule.drop)
    except OSError as e:
        raise DataError(f"cannot read reference convergence points {path}: {e.strerror}") from None
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise DataError(f"reference convergence points {path} are not in MLCommons' rcps_*.json format "
                        f"({type(e).__name__}: {e}); point --rcp-dir at a folder laid out as "
                        "mlperf_logging's rcp_checker") from None


def largest_cv(benchmark: str, ruleset: str) -> float | None:
    """The largest coefficient of variation (population stdev / olympic mean of the runs'
    convergence) among the reference points of `benchmark` in `ruleset` ("X.Y.0"): how far apart
    MLPerf's own reference runs land, the yardstick a CPU tier's stability is held to. None where
    the round has no RCPs for it."""
    from trainclock.review.scoring import scoring_rule

    rule = scoring_rule(benchmark)
    path = default_rcp_dir() / f"training_{ruleset}" / f"rcps_{benchmark}.json"
    if rule is None or not path.is_file():
        return None
    return max(r.stdev / r.mean for r in references(path, rule).all)
