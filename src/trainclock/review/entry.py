"""The review of an entry: one system's runs of one benchmark, scored by the official rules."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainclock.review.json_files import accelerator_count, count_problem, scaling_factor
from trainclock.review.rcp import RcpCheck, check_convergence
from trainclock.review.run_review import RunReview
from trainclock.review.scoring import ScoringRule, olympic_mean, scoring_rule

VALID, INVALID, INCOMPLETE = "valid", "invalid", "incomplete"


@dataclass(frozen=True)
class EntryContext:
    """What a log's place in a result tree says: <org>/results/<system>/<benchmark>/result_*.txt."""

    folder: Path
    round: str  # "3.1"
    round_source: str  # "path" (a v3.1/ folder), "option" (given), "default" (neither)
    org: str | None = None
    system: str | None = None
    benchmark_folder: str | None = None  # the folder name: the benchmark, or trainclock's workload
    system_desc: dict[str, Any] | None = None  # systems/<system>.json, when the tree has one
    system_path: Path | None = None


@dataclass(frozen=True)
class EntryReview:
    context: EntryContext
    runs: tuple[RunReview, ...]
    benchmark: str | None  # submission_benchmark of the runs (gpt3, bert, ...)
    rule: ScoringRule | None
    scaling_factor: float  # from scaling.json, 1 without one
    score_minutes: float | None  # olympic mean x scaling factor; None unless complete and valid
    verdict: str  # "valid", "invalid" or "incomplete" (fewer runs than the rules ask for)
    reasons: tuple[str, ...]  # why the verdict, and anything a reviewer should see
    # a binding RCP failure makes the entry invalid; a missing reference (MLPerf asks the
    # submitter for one) and a failure on too few runs to bind are reasons only
    rcp: RcpCheck | None

    @property
    def name(self) -> str:
        """The benchmark as the table shows it: the tree's folder name (trainclock: the workload)."""
        return self.context.benchmark_folder or self.workload or self.benchmark or "?"

    @property
    def org(self) -> str | None:
        """The submitter as the system description names it, else as the logs do, else the tree's folder."""
        desc = self.context.system_desc or {}
        submitter = desc.get("submitter")
        return submitter if isinstance(submitter, str) and submitter else (
            _most_common(r.org for r in self.runs) or self.context.org)

    @property
    def system(self) -> str | None:
        """The tree's system folder name, else the logs' submission_platform."""
        return self.context.system or _most_common(r.platform for r in self.runs)

    @property
    def workload(self) -> str | None:
        return _most_common(r.workload for r in self.runs)

    @property
    def division(self) -> str | None:
        return _most_common(r.division for r in self.runs)

    @property
    def accelerators(self) -> int | None:
        return accelerator_count(self.context.system_desc)

    @property
    def failed_runs(self) -> list[RunReview]:
        return [r for r in self.runs if not r.passed]

    @property
    def ok(self) -> bool:
        """Nothing failed: a valid entry, or an incomplete one whose runs all pass."""
        return self.verdict == VALID or (self.verdict == INCOMPLETE and not self.failed_runs)


def review_entry(context: EntryContext, runs: Sequence[RunReview], rcp_dir: Path | None = None) -> EntryReview:
    """Score reviewed runs by the rules of their benchmark: enough runs, at most `drop` failures,
    olympic mean x scaling.json, and the reference convergence check."""
    benchmark = _most_common(r.benchmark for r in runs)
    rule = scoring_rule(benchmark)
    scaling = scaling_factor(context.folder)
    reasons = _consistency_problems(runs)
    verdict = INVALID if reasons else VALID
    score = None
    failed = sum(not r.passed for r in runs)
    if rule is None:
        verdict = INVALID
        reasons.append(f"no scoring rule for benchmark {benchmark!r}" if benchmark else "the logs name no benchmark")
    elif failed > rule.drop:
        verdict = INVALID
        reasons.append(f"{failed} of {len(runs)} runs failed review; at most {rule.drop} may")
    elif len(runs) < rule.runs:
        verdict = INCOMPLETE if verdict == VALID else verdict
        reasons.append(f"{len(runs)} of the {rule.runs} runs a {rule.benchmark} entry needs: no score")
    elif verdict == VALID:
        mean = olympic_mean([r.minutes if r.passed else None for r in runs], rule.drop)
        score = None if mean is None else mean * scaling
        if failed:
            reasons.append(f"{failed} run(s) failed review and count as the slowest")
        if len(runs) > rule.runs:
            reasons.append(f"{len(runs)} runs where the rules ask for {rule.runs}; all are scored")
    if scaling != 1.0:
        reasons.append(f"scaled by {scaling:g} (scaling.json)")
    problem = count_problem(context.system_desc) if context.system_desc else None
    if problem:
        reasons.append(f"system description {context.system_path or ''}: {problem}; its accelerator count is "
                       "shown as unknown until the file is fixed")
    rcp = _rcp(runs, rule, context.round, rcp_dir) if rule else None
    if rcp and rcp.status in ("fail", "missing"):
        reasons.append(f"RCP {rcp.status}{'' if rcp.binding else ' (hint)'}: {rcp.message}")
        if rcp.status == "fail" and rcp.binding:
            verdict, score = INVALID, None
    return EntryReview(context, tuple(runs), benchmark, rule, scaling, score, verdict, tuple(reasons), rcp)


def _consistency_problems(runs: Sequence[RunReview]) -> list[str]:
    problems = []
    benchmarks = sorted({r.benchmark for r in runs if r.benchmark})
    if len(benchmarks) > 1:
        problems.append(f"the runs name different benchmarks: {', '.join(benchmarks)}")
    workloads = sorted({r.workload for r in runs if r.workload})
    if len(workloads) > 1:
        problems.append(f"the runs name different trainclock workloads: {', '.join(workloads)}")
    return problems


def _rcp(runs: Sequence[RunReview], rule: ScoringRule, round_: str, rcp_dir: Path | None) -> RcpCheck:
    # as the result summarizer: reference convergence points bind the closed division only
    division = _most_common(r.division for r in runs)
    if division != "closed":
        return RcpCheck("n/a", f"the {division or 'unknown'} division has no reference convergence points")
    points = [r.converged_at if r.passed else None for r in runs]
    return check_convergence(rule, round_, [r.global_batch_size for r in runs], points, rcp_dir)


def _most_common(values) -> Any:
    counts = Counter(v for v in values if v is not None)
    return counts.most_common(1)[0][0] if counts else None
