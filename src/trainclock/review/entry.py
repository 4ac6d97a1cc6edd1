"""The review of an entry: one system's runs of one benchmark, scored by the official rules."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from trainclock.review.energy import EnergyScore, energy_score, has_power
from trainclock.review.json_files import accelerator_count, count_problem, scaling_file
from trainclock.review.rcp import RcpCheck, check_convergence
from trainclock.review.rounds import round_of
from trainclock.review.run_review import RunReview
from trainclock.review.scoring import ScoringRule, olympic, scoring_rule

VALID, INVALID, INCOMPLETE = "valid", "invalid", "incomplete"
# how a reason starts when trainclock withholds a score the official summarizer prints (policy: _withheld_reason)
SCORE_WITHHELD = "score withheld by trainclock"


@dataclass(frozen=True)
class EntryContext:
    """What a log's place in a result tree says: <org>/results/<system>/<benchmark>/result_*.txt."""

    folder: Path
    round: str  # "3.1"
    # "path" (a v4.0/ or training_results_v4.0/ folder), "option" (--round), "default" (neither: the
    # round the logs tell, review/round_inference.py; the name is kept for the results store)
    round_source: str
    org: str | None = None
    system: str | None = None
    benchmark_folder: str | None = None  # the folder name: the benchmark, or trainclock's workload
    system_desc: dict[str, Any] | None = None  # systems/<system>.json, when the tree has one
    system_path: Path | None = None


@dataclass(frozen=True)
class SummarizerView:
    """What mlperf_logging's result summarizer prints for the entry, run on a copy of its folder
    (it computes the score first, with the committed scaling.json, then runs its RCP check)."""

    score: float | None  # its time_to_train: olympic mean x scaling factor; None where it prints none
    olympic_mean: float | None
    scaling_factor: float  # its rcp_scaling_factor: the committed scaling.json, else 1
    used: tuple[str, ...]  # the runs averaged, fastest first (file names)
    dropped_fastest: tuple[str, ...]
    dropped_slowest: tuple[str, ...]  # converged runs dropped as the slowest
    not_converged: tuple[str, ...]  # runs that fail review, dropped as the slowest: "path:line: why"
    not_converged_allowed: int
    lines: tuple[str, ...]  # the NOTICE / ERROR lines it prints about the entry
    energy: EnergyScore | None = None  # its Energy column, for an entry with a power/ folder

    def as_json(self) -> dict:
        return {"score": self.score, "olympic_mean": self.olympic_mean, "scaling_factor": self.scaling_factor,
                "energy": None if self.energy is None else self.energy.as_json(),
                "runs_used": list(self.used), "dropped_fastest": list(self.dropped_fastest),
                "dropped_slowest": list(self.dropped_slowest), "not_converged": list(self.not_converged),
                "not_converged_allowed": self.not_converged_allowed, "lines": list(self.lines)}


@dataclass(frozen=True)
class EntryReview:
    context: EntryContext
    runs: tuple[RunReview, ...]
    benchmark: str | None  # submission_benchmark of the runs (gpt3, bert, ...)
    rule: ScoringRule | None
    scaling_factor: float  # from scaling.json, 1 without one
    # the official score: olympic mean x scaling factor; None unless complete and valid
    score_minutes: float | None
    verdict: str  # "valid", "invalid" or "incomplete" (fewer runs than the rules ask for)
    reasons: tuple[str, ...]  # why the verdict, and anything a reviewer should see
    # a binding RCP failure makes the entry invalid unless the review committee scaled its score
    # (scaling.json); a missing reference (MLPerf asks the submitter for one) and a failure on too
    # few runs to bind are reasons only
    rcp: RcpCheck | None
    summarizer: SummarizerView | None = None  # None for a benchmark without scoring rules
    scaling_path: Path | None = None  # the scaling.json read, if any

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
        """The system description's division, as the summarizer takes it, else the logs'."""
        return system_division(self.context.system_desc) or _most_common(r.division for r in self.runs)

    @property
    def rules_missing(self) -> str | None:
        """Why the round has no rules to score this entry by, in one line; None when it has."""
        found = round_of(self.context.round)
        return found.missing(self.benchmark) if found else f"trainclock has no rules for round {self.context.round}"

    @property
    def summarizer_score(self) -> float | None:
        """The score the official result summarizer prints for the entry (None where it prints none)."""
        return self.summarizer.score if self.summarizer else None

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
    """Score reviewed runs as the result summarizer does: enough runs, at most the allowed number
    failing (each dropped as one of the slowest), olympic mean x scaling.json, and the reference
    convergence check."""
    benchmark = _most_common(r.benchmark for r in runs)
    rule = scoring_rule(benchmark, context.round)
    scaling, scaling_path = scaling_file(context.folder)
    reasons = _consistency_problems(runs)
    verdict = INVALID if reasons else VALID
    failed = [r for r in runs if not r.passed]
    view = _summarizer_view(runs, rule, scaling, _entry_name(context, runs, benchmark)) if rule else None
    if view is not None and view.score is not None and has_power(context.folder):
        used = [run for name in view.used for run in runs if run.path.name == name]
        view = replace(view, energy=energy_score(context.folder, used, scaling))
    if rule is None:
        verdict = INVALID
        found = round_of(context.round)
        reasons.append(f"not scored: {found.missing(benchmark) if found else 'no rules for round ' + context.round}")
    elif len(failed) > rule.not_converged:
        verdict = INVALID
        reasons.append(f"{len(failed)} of {len(runs)} runs failed review (did not converge or broke a rule); at most "
                       f"{rule.not_converged} may for {rule.benchmark}: no score")
    elif len(runs) < rule.runs:
        verdict = INCOMPLETE if verdict == VALID else verdict
        reasons.append(f"{len(runs)} of the {rule.runs} runs a {rule.benchmark} entry needs: no score")
    elif view.score is None:
        verdict = INVALID
        reasons.append("no run left to average after the olympic drops: no score")
    elif verdict == VALID:
        if failed:
            reasons.append(f"{len(failed)} run(s) failed review (did not converge or broke a rule), dropped as the "
                           f"slowest ({rule.not_converged} may)")
        if len(runs) > rule.runs:
            reasons.append(f"{len(runs)} runs where the rules ask for {rule.runs}; all are scored")
    for run in failed if rule else ():  # without rules, their failures are that one reason
        reasons.append(f"{run.where}: not counted: {run.why_not_counted}")
    if scaling != 1.0:
        reasons.append(f"scaled by {scaling:g} ({scaling_path})")
    problem = count_problem(context.system_desc) if context.system_desc else None
    if problem:
        reasons.append(f"system description {context.system_path or ''}: {problem}; its accelerator count is "
                       "shown as unknown until the file is fixed")
    rcp = _rcp(runs, rule, context, rcp_dir) if rule else None
    if rcp and rcp.status in ("fail", "missing"):
        reasons.append(f"RCP {rcp.status}{'' if rcp.binding else ' (hint)'}: {rcp.message}")
        if rcp.status == "fail" and rcp.binding:
            if scaling_path is not None:
                # the summarizer still scores it, and the committee's factor is the ruling on the failure
                reasons.append(f"the review committee's scaling.json ({scaling:g}) applies to the failed RCP check"
                               + (f"; the RCP rules' normalization would be {rcp.normalization:.6f}"
                                  if rcp.normalization > 1.0 else ""))
            elif verdict == VALID:
                verdict = INVALID
                reasons.append(_withheld_reason(rcp, view))
    if rcp and rcp.status == "pass" and rcp.binding and rcp.normalization > 1.0 and scaling_path is None:
        # the summarizer prints the unscaled score, then (set-scaling mode) writes this factor into
        # scaling.json, where a later run and the published score take it from
        reasons.append(f"RCP: faster than the references' mean: the RCP rules scale the score by "
                       f"{rcp.normalization:.6f}, which the official checker writes to scaling.json; "
                       "trainclock never writes it")
    if view is not None and rcp is not None and rcp.failed:
        view = replace(view, lines=(*view.lines, f"ERROR: RCP Test Failed on {_entry_name(context, runs, benchmark)} "
                                                 f"with message: {rcp.official_message}."))
    score = view.score if verdict == VALID and view is not None else None
    return EntryReview(context, tuple(runs), benchmark, rule, scaling, score, verdict, tuple(reasons), rcp,
                       view, scaling_path)


def _withheld_reason(rcp: RcpCheck, view: SummarizerView | None) -> str:
    """trainclock's policy on a binding RCP failure without a scaling.json: the MLPerf rules leave
    such an entry to the review committee, whose ruling is the scaling.json it commits; until then
    trainclock scores nothing, where the summarizer (which never reads a ruling) prints its mean."""
    normalization = (f" (the RCP rules' normalization would be {rcp.normalization:.6f})"
                     if rcp.normalization > 1.0 else "")
    printed = "no score either" if view is None or view.score is None else f"{view.score:.6f} regardless"
    return (f"{SCORE_WITHHELD}: the RCP check failed and no scaling.json records the review committee's ruling"
            f"{normalization}; the official summarizer prints {printed}")


def _summarizer_view(runs: Sequence[RunReview], rule: ScoringRule, scaling: float, name: str) -> SummarizerView:
    result = olympic([r.minutes if r.passed else None for r in runs], rule.drop, rule.not_converged)
    names = [r.path.name for r in runs]
    lines = []
    if len(result.failed) > rule.not_converged:
        lines += [f"CRITICAL ERROR: Too many non-converging runs for {name}",
                  f"** CRITICAL ERROR ** Results in the table for {name} are NOT correct"]
    elif result.failed:
        lines.append(f"NOTICE: Dropping non-converged run(s) for {name} using olympic scoring.")
    return SummarizerView(
        score=None if result.mean is None else result.mean * scaling,
        olympic_mean=result.mean,
        scaling_factor=scaling,
        used=tuple(names[i] for i in result.used),
        dropped_fastest=tuple(names[i] for i in result.fastest),
        dropped_slowest=tuple(names[i] for i in result.slowest),
        not_converged=tuple(f"{runs[i].where}: {runs[i].why_not_counted}" for i in result.failed),
        not_converged_allowed=rule.not_converged,
        lines=tuple(lines),
    )


def _entry_name(context: EntryContext, runs: Sequence[RunReview], benchmark: str | None) -> str:
    """<submitter> <system>/<benchmark>, as the summarizer names an entry in what it prints."""
    desc = context.system_desc or {}
    submitter = desc.get("submitter") if isinstance(desc.get("submitter"), str) else context.org
    system = context.system or _most_common(r.platform for r in runs)
    return f"{submitter}/{system}/{context.benchmark_folder or benchmark}"


def _consistency_problems(runs: Sequence[RunReview]) -> list[str]:
    problems = []
    benchmarks = sorted({r.benchmark for r in runs if r.benchmark})
    if len(benchmarks) > 1:
        problems.append(f"the runs name different benchmarks: {', '.join(benchmarks)}")
    workloads = sorted({r.workload for r in runs if r.workload})
    if len(workloads) > 1:
        problems.append(f"the runs name different trainclock workloads: {', '.join(workloads)}")
    return problems


def _rcp(runs: Sequence[RunReview], rule: ScoringRule, context: EntryContext, rcp_dir: Path | None) -> RcpCheck:
    # as the result summarizer: reference convergence points bind the closed division only, and
    # the division is the system description's (the logs' where the tree has none)
    division = system_division(context.system_desc) or _most_common(r.division for r in runs)
    if division != "closed":
        return RcpCheck("n/a", f"the {division or 'unknown'} division has no reference convergence points")
    # rcp_checker reads its own convergence points (a run_stop with status success, whatever the
    # compliance check says) and the batch size wherever the log names it
    return check_convergence(rule, context.round, [r.rcp_batch_size for r in runs], [r.rcp_point for r in runs],
                             rcp_dir)


def system_division(desc: dict[str, Any] | None) -> str | None:
    """systems/<system>.json's division, where the summarizer reads it (None without one)."""
    division = (desc or {}).get("division")
    return division if isinstance(division, str) and division else None


def _most_common(values) -> Any:
    counts = Counter(v for v in values if v is not None)
    return counts.most_common(1)[0][0] if counts else None
