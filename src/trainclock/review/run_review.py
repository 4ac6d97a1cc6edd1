"""The review of one run's log: compliance, time-to-train, convergence point and eval curve."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from trainclock.errors import DataError
from trainclock.mllog.progress import UNIT_KEY, ProgressCodec, count_field
from trainclock.mllog.reader import Event, LogSource
from trainclock.review import compliance
from trainclock.review.benchmarks import HIGHER, BenchmarkFacts, Metric, benchmark_facts, with_targets
from trainclock.review.compliance import Finding, LogLine, line_progress
from trainclock.review.log_summary import MAX_EVALS, EvalPoint, LogSummary, RcpReading
from trainclock.review.scoring import FIRST_PASS, ScoringRule, scoring_rule

__all__ = ["EvalPoint", "LogQuality", "RunReview", "log_quality", "review_log"]

# trainclock's own header keys: one target event per quality metric, and the progress unit (mllog.progress)
TARGET_KEY = "trainclock_target"
UNKNOWN_PROGRESS = ProgressCodec(unit=None, units_per_sample=None)


def _header_text(key: str) -> property:
    return property(lambda self: _str_or_none(self.header.get(key)), doc=f"The log's {key}, if a string.")


@dataclass(frozen=True)
class RunReview:
    path: Path
    round: str  # the rules it was checked against ("X.Y")
    size_bytes: int
    header: dict[str, Any]  # first value of each key logged before run_start: submission_*, hyperparameters
    status: str  # run_stop's metadata status ("success", "aborted"), or "unfinished"
    time_to_train_ms: int | float | None  # run_stop - run_start; None unless exactly one of each
    findings: tuple[Finding, ...]
    evals: tuple[EvalPoint, ...]  # the eval curve, in progress order
    converged_at: int | float | None  # progress at the first evaluation that met the quality target, in units
    # what progress is counted in ("tokens", "samples", "steps", "epochs"; unit None for an unknown
    # benchmark) and how it relates to training samples, where known
    progress: ProgressCodec = UNKNOWN_PROGRESS
    # the quality metric(s) and their direction: the log's trainclock_target events, else the
    # benchmark's facts (review/rules/benchmarks.yaml); empty for an unknown benchmark
    metrics: tuple[Metric, ...] = ()
    events: int = -1  # readable MLLOG events in the log (-1: not counted)
    # the RCP check's reading (rcp_checker.read_submission_file): the convergence point in its
    # progress count, None where the run did not converge (no run_stop with status success)
    rcp_point: float | None = None
    rcp_batch_size: Any = None  # the last global_batch_size the log names, wherever it logs it
    start_line: int | None = None  # the first run_start's line
    stop_line: int | None = None  # the last run_stop's line
    last_line: int = 0  # the last MLLOG line read
    # (training samples before it, start, stop) of each evaluation, times in seconds from run_start,
    # in progress order (samples None where the log does not say how its count relates to them);
    # None where eval_start and eval_stop do not pair up
    eval_spans: tuple[tuple[float | None, float, float], ...] | None = None

    @property
    def where(self) -> str:
        """file:line of what decides whether the run counts: its first error with a line, else
        its run_stop, else its run_start, else the end of the log."""
        line = next((f.lineno for f in self.errors if f.lineno), None) or self.stop_line or self.start_line \
            or self.last_line
        return f"{self.path}:{line}" if line else str(self.path)

    @property
    def why_not_counted(self) -> str | None:
        """Why the run does not count toward the score, in one line; None when it counts."""
        if self.passed:
            return None
        if self.time_to_train_ms is None and not any(f.key in ("run_start", "run_stop") for f in self.errors):
            return "no time-to-train: it needs exactly one run_start and one run_stop"
        first = next((f for f in self.errors if f.lineno), None) or (self.errors[0] if self.errors else None)
        return first.text if first else "no time-to-train: it needs exactly one run_start and one run_stop"

    @property
    def passed(self) -> bool:
        """Counts toward a score: complies with every rule and has a time-to-train."""
        return self.time_to_train_ms is not None and not self.errors

    @property
    def minutes(self) -> float | None:
        # the result summarizer's arithmetic (ms / 60 / 1000), for the very same float
        return None if self.time_to_train_ms is None else self.time_to_train_ms / 60 / 1000

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "warning"]

    @property
    def error_count(self) -> int:
        """Errors found, the listed and the counted ones."""
        return sum(f.repeats for f in self.errors)

    @property
    def warning_count(self) -> int:
        return sum(f.repeats for f in self.warnings)

    benchmark = _header_text("submission_benchmark")
    division = _header_text("submission_division")
    org = _header_text("submission_org")
    platform = _header_text("submission_platform")
    workload = _header_text("trainclock_workload")  # trainclock's own workload (a member); not in official logs

    @property
    def global_batch_size(self) -> int | None:
        return _positive_int(self.header.get("global_batch_size"))

    @property
    def progress_unit(self) -> str | None:
        """"tokens", "samples", "steps", "epochs"; None for an unknown benchmark."""
        return self.progress.unit

    @property
    def units_to_converge(self) -> int | float | None:
        """Progress at the convergence point, in progress_unit."""
        return self.converged_at if self.progress_unit else None

    @property
    def samples_to_converge(self) -> float | None:
        """Training samples (sequences, images) at the convergence point, where the log says
        how its progress unit relates to samples."""
        return self.progress.samples(self.converged_at)

    @property
    def tokens_to_converge(self) -> int | float | None:
        """Tokens at the convergence point, for benchmarks that count in tokens."""
        return self.converged_at if self.progress_unit == "tokens" else None


def review_log(path: Path, round_: str) -> RunReview:
    """Review one log under the rules of `round_` ("X.Y"), streaming it: memory does not
    grow with the log."""
    summary = LogSummary()
    try:
        size = path.stat().st_size
        report = compliance.check(LogSource(path), round_, observe=summary.observe)
    except OSError as e:
        raise DataError(f"cannot read log {path}: {e.strerror}; check that it is a readable file") from None
    header = summary.header
    rule = scoring_rule(header.get("submission_benchmark"), round_)
    reading = summary.rcp_reading()
    quality = log_quality(summary.own_events, header, summary.progress_field)
    findings = report.findings
    if summary.evals_left_out:
        findings = [*findings, Finding("log size", "eval_accuracy", f"{summary.evals_left_out:,} eval_accuracy lines "
                                       f"past the first {MAX_EVALS:,} are left out of the eval curve",
                                       severity="warning", repeats=summary.evals_left_out)]
    evals = summary.eval_curve()
    return RunReview(
        path=path,
        round=round_,
        size_bytes=size,
        header=header,
        status=summary.status,
        time_to_train_ms=summary.time_to_train_ms,
        findings=tuple(findings),
        evals=evals,
        converged_at=quality.progress.units(_converged_at(report.target_met, evals, quality.metrics)),
        # a benchmark whose facts say nothing of its unit: its scoring rule's
        progress=replace(quality.progress, unit=quality.progress_unit or (rule.progress if rule else None)),
        metrics=quality.metrics,
        events=report.events,
        rcp_point=rcp_point(reading, rule),
        rcp_batch_size=reading.batch_size,
        start_line=summary.first_start_line,
        stop_line=reading.stop_line,
        last_line=summary.last_line,
        eval_spans=_spans_in_samples(summary.eval_spans(), quality),
    )


def rcp_point(reading: RcpReading, rule: ScoringRule | None) -> float | None:
    """A run's convergence point as rcp_checker reads it; None where it did not converge (it counts
    such a run as 1e9, i.e. the slowest) or logged no usable progress."""
    if rule is None or not reading.converged:
        return None
    if rule.rcp_progress == FIRST_PASS:
        passing = [step for step, results in reading.evaluations(rule.rcp_key).items()
                   if all(_passes(results.get(metric), op, limit) for metric, op, limit in rule.rcp_pass)]
        return float(min(passing)) if passing else None
    value = reading.last(rule.rcp_key)
    if not _finite(value):
        return None
    # rcp_checker: round(conv_epoch, 3) for epoch_num; samples_count as logged
    return float(value if rule.rcp_decimals is None else round(value, rule.rcp_decimals))


def _passes(value: Any, op: str, limit: float) -> bool:
    return _finite(value) and (value <= limit if op == "<=" else value >= limit)


@dataclass(frozen=True)
class LogQuality:
    """What a log says (or its benchmark's facts say) its progress and quality are measured in."""

    progress: ProgressCodec  # how its counts are written, and their unit
    metrics: tuple[Metric, ...]

    @property
    def progress_unit(self) -> str | None:
        return self.progress.unit


def log_quality(events: list[Event], header: dict[str, Any] | None = None,
                counted_in: str | None = None) -> LogQuality:
    """The progress unit and quality metrics of one log's events: its own trainclock keys, else
    the facts of its submission_benchmark. `counted_in`: the metadata field its evaluations count
    progress in (samples_count, ...), where `events` holds only the header."""
    header = _header(events) if header is None else header
    facts = benchmark_facts(header.get("submission_benchmark"))
    counted_in = counted_in or next((count_field(e.metadata) for e in events
                                     if e.key == "eval_accuracy" and isinstance(e.metadata, dict)), None)
    return LogQuality(_progress_codec(events, header, facts, counted_in), _metrics(events, facts))


def _progress_codec(events: list[Event], header: dict[str, Any], facts: BenchmarkFacts | None,
                    counted_in: str | None) -> ProgressCodec:
    """How the log counts progress: its trainclock_progress_unit event, read back by the codec that
    wrote it; a unit (and units per sample) it does not name, from the benchmark's facts (trainclock's
    first logs have no unit event)."""
    event = _unit_event(events)
    codec = (ProgressCodec.read(event.value, event.metadata, _positive_int(header.get("global_batch_size")))
             if event is not None else UNKNOWN_PROGRESS)
    known = facts.progress_codec(header, counted_in) if facts else UNKNOWN_PROGRESS
    if codec.unit is None:
        codec = replace(codec, unit=known.unit, units_per_sample=known.units_per_sample)
    return replace(codec, samples_per_unit=known.samples_per_unit)


def _unit_event(events: list[Event]) -> Event | None:
    return next((e for e in _before_run_start(events) if e.key == UNIT_KEY), None)


def _before_run_start(events: list[Event]) -> Iterator[Event]:
    """The header's events: those before run_start."""
    for e in events:
        if e.key == "run_start":
            return
        yield e


def _metrics(events: list[Event], facts: BenchmarkFacts | None) -> tuple[Metric, ...]:
    """The log's own quality targets (trainclock_target: one event per metric, all to hold at one
    evaluation), else the benchmark's facts."""
    targets = [(_str_or_none(e.metadata.get("metric")), _str_or_none(e.metadata.get("direction")), float(e.value))
               for e in _before_run_start(events) if e.key == TARGET_KEY and _finite(e.value)]
    return with_targets(facts.metrics if facts else (), targets)


def _finite(value: Any) -> bool:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer past the largest double
        return False


def _header(events: list[Event]) -> dict[str, Any]:
    header: dict[str, Any] = {}
    for e in events:
        if e.key == "run_start":
            break
        if e.event_type == "POINT_IN_TIME":
            header.setdefault(e.key, e.value)
    return header


def _spans_in_samples(spans, quality: LogQuality) -> tuple[tuple[float | None, float, float], ...] | None:
    """The evaluations' spans with their logged progress counted in training samples."""
    if spans is None:
        return None
    codec = quality.progress
    return tuple((codec.samples(codec.units(count)), start, stop) for count, start, stop in spans)


def _converged_at(target_met: dict[str, list[LogLine]], evals: tuple[EvalPoint, ...],
                  metrics: tuple[Metric, ...]) -> int | float | None:
    """Progress at which every quality target (usually one: eval_accuracy's) was first met: the
    log's own targets where it states them (a trainclock tier's), else the rules' target checks."""
    own = [m for m in metrics if m.target is not None]
    if own:
        for progress, values in _evaluations(evals, own):
            if all(_meets(values.get(m.name), m) for m in own):
                return progress
        return None
    if not target_met:
        return None
    firsts = []
    for lines in target_met.values():
        reached = [p for p in (line_progress(line.value) for line in lines) if p is not None]
        if not reached:
            return None
        firsts.append(min(reached))
    return max(firsts)


def _evaluations(evals: tuple[EvalPoint, ...], own: list[Metric]) -> list[tuple[Any, dict[str, Any]]]:
    """(progress, {metric: value}) per evaluation, in progress order: a dict-valued line is one
    evaluation; lines naming their metric (metadata "metric") join those at the same
    progress; a bare number is the one metric's value."""
    grouped: dict[Any, dict[str, Any]] = {}
    out: list[tuple[Any, dict[str, Any]]] = []
    for point in evals:
        if isinstance(point.value, dict):
            out.append((point.progress, point.value))
        elif point.metric is not None:
            if point.progress not in grouped:
                grouped[point.progress] = {}
                out.append((point.progress, grouped[point.progress]))
            grouped[point.progress][point.metric] = point.value
        elif len(own) == 1:
            out.append((point.progress, {own[0].name: point.value}))
    return out


def _meets(value: Any, metric: Metric) -> bool:
    if not _finite(value):
        return False
    return value >= metric.target if metric.direction == HIGHER else value <= metric.target


def _positive_int(value: Any) -> int | None:
    # past 2**63 no batch size is meant, and the RCP arithmetic in floats would overflow
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 2**63 else None


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None
