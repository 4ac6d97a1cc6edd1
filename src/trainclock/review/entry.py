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
from trainclock.review.verdict import (INCOMPLETE, INVALID, SCORE_WITHHELD, VALID, consistency_rule, count_rule,
                                       decide, notes, rcp_rule)

# the verdicts and the withheld score's reason, where the review's users have always imported them
__all__ = ["INCOMPLETE", "INVALID", "SCORE_WITHHELD", "VALID", "EntryContext", "EntryReview", "SummarizerView",
           "review_entry", "system_division"]


@dataclass(frozen=True)
class EntryContext:
    """What a log's place in a result tree says: <org>/results/<system>/<benchmark>/result_*.txt."""

    folder: Path
    round: str  # "X.Y"
    # "path" (a vX.Y/ or training_results_vX.Y/ folder), "option" (--round), "default" (neither: the
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
    benchmark: str | None  # submission_benchmark of the runs (an MLPerf key)
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
    convergence check. The verdict: review/verdict.py's rules, combined by its precedence."""
    benchmark = _most_common(r.benchmark for r in runs)
    rule = scoring_rule(benchmark, context.round)
    scaling, scaling_path = scaling_file(context.folder)
    name = _entry_name(context, runs, benchmark)
    view = _summarizer_view(runs, rule, scaling, name) if rule else None
    if view is not None and view.score is not None and has_power(context.folder):
        used = [run for used_name in view.used for run in runs if run.path.name == used_name]
        view = replace(view, energy=energy_score(context.folder, used, scaling))
    rcp = _rcp(runs, rule, context, rcp_dir) if rule else None
    printed = view.score if view is not None else None
    verdict, reasons = decide([
        consistency_rule(runs),
        count_rule(runs, rule, printed, benchmark, context.round),
        notes(runs, rule is not None, scaling, scaling_path,
              count_problem(context.system_desc) if context.system_desc else None, context.system_path),
        rcp_rule(rcp, scaling, scaling_path, printed),
    ])
    if view is not None and rcp is not None and rcp.failed:
        view = replace(view, lines=(*view.lines, f"ERROR: RCP Test Failed on {name} with message: {rcp.official_message}."))
    score = printed if verdict == VALID else None
    return EntryReview(context, tuple(runs), benchmark, rule, scaling, score, verdict, reasons, rcp, view, scaling_path)


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
