"""An entry's verdict, as pure functions: each rule looks at the entry and returns its finding (a
verdict and the reasons behind it), and one precedence rule (`decide`) combines the findings.

The rules, in the order of precedence:
  consistency  the runs name one benchmark and one trainclock workload
  count        the round has scoring rules for the benchmark; enough runs, at most the allowed number
               failing review, a run left to average (MLPerf's result summarizer)
  notes        what a reviewer should see and no verdict hangs on: each failed run, scaling.json, a
               system description with a bad accelerator count
  RCP          the reference convergence check (closed division): a binding failure without the review
               committee's ruling (a scaling.json) withholds the score (trainclock's policy)

Precedence: the first finding that does not find the entry valid decides its verdict. So runs that
disagree make an entry invalid before its run count is looked at, an incomplete entry stays incomplete
whatever its RCP check says, and the RCP check withholds the score of an otherwise valid entry only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from trainclock.review.rcp import RcpCheck
from trainclock.review.rounds import round_of
from trainclock.review.run_review import RunReview
from trainclock.review.scoring import ScoringRule

VALID, INVALID, INCOMPLETE = "valid", "invalid", "incomplete"
# how a reason starts when trainclock withholds a score the official summarizer prints (policy: withheld_reason)
SCORE_WITHHELD = "score withheld by trainclock"


@dataclass(frozen=True)
class Finding:
    """One rule's finding about an entry."""

    verdict: str = VALID
    reasons: tuple[str, ...] = ()  # shown whatever the entry's verdict
    # shown only where every finding before this one found the entry valid: remarks on a scored
    # entry, or the reason this finding's verdict decides the entry's
    if_valid_before: tuple[str, ...] = ()


def decide(findings: Sequence[Finding]) -> tuple[str, tuple[str, ...]]:
    """The entry's verdict and reasons: the first finding that is not VALID decides the verdict; the
    reasons are every finding's, in order, with a finding's if_valid_before reasons only where every
    finding before it was valid."""
    verdict, reasons = VALID, []
    for finding in findings:
        reasons += finding.reasons
        if verdict == VALID:
            reasons += finding.if_valid_before
            verdict = finding.verdict
    return verdict, tuple(reasons)


def consistency_rule(runs: Sequence[RunReview]) -> Finding:
    """The runs of one entry name one benchmark and one trainclock workload."""
    problems = []
    benchmarks = sorted({r.benchmark for r in runs if r.benchmark})
    if len(benchmarks) > 1:
        problems.append(f"the runs name different benchmarks: {', '.join(benchmarks)}")
    workloads = sorted({r.workload for r in runs if r.workload})
    if len(workloads) > 1:
        problems.append(f"the runs name different trainclock workloads: {', '.join(workloads)}")
    return Finding(INVALID if problems else VALID, tuple(problems))


def count_rule(runs: Sequence[RunReview], rule: ScoringRule | None, score: float | None, benchmark: str | None,
               round_name: str) -> Finding:
    """The result summarizer's count: rules for the benchmark in its round, at most rule.not_converged
    runs failing review, rule.runs runs at least, and a run left after the olympic drops (`score`,
    the summarizer's; None where it prints none)."""
    failed = sum(not r.passed for r in runs)
    if rule is None:
        found = round_of(round_name)
        return Finding(INVALID, (f"not scored: {found.missing(benchmark) if found else 'no rules for round ' + round_name}",))
    if failed > rule.not_converged:
        return Finding(INVALID, (f"{failed} of {len(runs)} runs failed review (did not converge or broke a rule); "
                                 f"at most {rule.not_converged} may for {rule.benchmark}: no score",))
    if len(runs) < rule.runs:
        return Finding(INCOMPLETE, (f"{len(runs)} of the {rule.runs} runs a {rule.benchmark} entry needs: no score",))
    if score is None:
        return Finding(INVALID, ("no run left to average after the olympic drops: no score",))
    remarks = []
    if failed:
        remarks.append(f"{failed} run(s) failed review (did not converge or broke a rule), dropped as the "
                       f"slowest ({rule.not_converged} may)")
    if len(runs) > rule.runs:
        remarks.append(f"{len(runs)} runs where the rules ask for {rule.runs}; all are scored")
    return Finding(VALID, if_valid_before=tuple(remarks))


def notes(runs: Sequence[RunReview], scored: bool, scaling: float, scaling_path: Path | None,
          count_problem: str | None, system_path: Path | None) -> Finding:
    """What a reviewer should see and no verdict hangs on: why each failed run is not counted (where
    the benchmark is `scored` at all: without rules, their failures are the one reason), the
    scaling.json factor, and a system description whose accelerator count is wrong."""
    reasons = [f"{run.where}: not counted: {run.why_not_counted}" for run in runs if scored and not run.passed]
    if scaling != 1.0:
        reasons.append(f"scaled by {scaling:g} ({scaling_path})")
    if count_problem:
        reasons.append(f"system description {system_path or ''}: {count_problem}; its accelerator count is "
                       "shown as unknown until the file is fixed")
    return Finding(VALID, tuple(reasons))


def rcp_rule(rcp: RcpCheck | None, scaling: float, scaling_path: Path | None, score: float | None) -> Finding:
    """The reference convergence check: a failure or a missing reference is a reason; a binding
    failure is ruled on by the review committee's scaling.json where there is one, and without one
    withholds the score (`score`: what the summarizer prints). A pass faster than the references'
    mean is a reason too: the official checker would scale the score."""
    if rcp is None:
        return Finding()
    reasons, withheld = [], ()
    if rcp.status in ("fail", "missing"):
        reasons.append(f"RCP {rcp.status}{'' if rcp.binding else ' (hint)'}: {rcp.message}")
        if rcp.status == "fail" and rcp.binding:
            if scaling_path is not None:
                # the summarizer still scores it, and the committee's factor is the ruling on the failure
                reasons.append(f"the review committee's scaling.json ({scaling:g}) applies to the failed RCP check"
                               + (f"; the RCP rules' normalization would be {rcp.normalization:.6f}"
                                  if rcp.normalization > 1.0 else ""))
            else:
                withheld = (withheld_reason(rcp, score),)
    if rcp.status == "pass" and rcp.binding and rcp.normalization > 1.0 and scaling_path is None:
        # the summarizer prints the unscaled score, then (set-scaling mode) writes this factor into
        # scaling.json, where a later run and the published score take it from
        reasons.append(f"RCP: faster than the references' mean: the RCP rules scale the score by "
                       f"{rcp.normalization:.6f}, which the official checker writes to scaling.json; "
                       "trainclock never writes it")
    return Finding(INVALID if withheld else VALID, tuple(reasons), withheld)


def withheld_reason(rcp: RcpCheck, score: float | None) -> str:
    """trainclock's policy on a binding RCP failure without a scaling.json: the MLPerf rules leave
    such an entry to the review committee, whose ruling is the scaling.json it commits; until then
    trainclock scores nothing, where the summarizer (which never reads a ruling) prints its mean."""
    normalization = (f" (the RCP rules' normalization would be {rcp.normalization:.6f})"
                     if rcp.normalization > 1.0 else "")
    printed = "no score either" if score is None else f"{score:.6f} regardless"
    return (f"{SCORE_WITHHELD}: the RCP check failed and no scaling.json records the review committee's ruling"
            f"{normalization}; the official summarizer prints {printed}")
