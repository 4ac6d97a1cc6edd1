"""The review of one run's log: compliance, time-to-train, convergence point and eval curve."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainclock.errors import DataError
from trainclock.mllog.reader import Event, LogSource
from trainclock.review import compliance
from trainclock.review.benchmarks import HIGHER, BenchmarkFacts, Metric, benchmark_facts, with_targets
from trainclock.review.compliance import Finding, LogLine
from trainclock.review.log_summary import MAX_EVALS, EvalPoint, LogSummary, RcpReading
from trainclock.review.progress import PROGRESS_FIELDS, line_progress, progress_field
from trainclock.review.scoring import FIRST_PASS, ScoringRule, scoring_rule

__all__ = ["PROGRESS_FIELDS", "EvalPoint", "LogQuality", "RunReview", "log_quality", "review_log"]

# trainclock's own header keys: one target event per quality metric, and the progress unit
TARGET_KEY = "trainclock_target"
UNIT_KEY = "trainclock_progress_unit"


def _header_text(key: str) -> property:
    return property(lambda self: _str_or_none(self.header.get(key)), doc=f"The log's {key}, if a string.")


@dataclass(frozen=True)
class RunReview:
    path: Path
    round: str  # the rules it was checked against, e.g. "3.1"
    size_bytes: int
    header: dict[str, Any]  # first value of each key logged before run_start: submission_*, hyperparameters
    status: str  # run_stop's metadata status ("success", "aborted"), or "unfinished"
    time_to_train_ms: int | float | None  # run_stop - run_start; None unless exactly one of each
    findings: tuple[Finding, ...]
    evals: tuple[EvalPoint, ...]  # the eval curve, in progress order
    converged_at: int | float | None  # progress at the first evaluation that met the quality target
    progress_unit: str | None  # "tokens", "samples", "steps", "epochs"; None for an unknown benchmark
    # the quality metric(s) and their direction: the log's trainclock_target events, else the
    # benchmark's facts (review/rules/benchmarks.yaml); empty for an unknown benchmark
    metrics: tuple[Metric, ...] = ()
    units_per_sample: float | None = None  # progress units in one training sample, where known
    samples_per_unit: float | None = None  # training samples in one progress unit, where known
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
    workload = _header_text("trainclock_workload")  # trainclock's own workload (gpt3-mini); not in official logs

    @property
    def global_batch_size(self) -> int | None:
        return _positive_int(self.header.get("global_batch_size"))

    @property
    def units_to_converge(self) -> int | float | None:
        """Progress at the convergence point, in progress_unit."""
        return self.converged_at if self.progress_unit else None

    @property
    def samples_to_converge(self) -> float | None:
        """Training samples (sequences, images) at the convergence point, where the log says
        how its progress unit relates to samples."""
        return units_to_samples(self.converged_at, self.progress_unit, self.units_per_sample, self.samples_per_unit)

    @property
    def tokens_to_converge(self) -> int | float | None:
        """Tokens at the convergence point, for benchmarks that count in tokens."""
        return self.converged_at if self.progress_unit == "tokens" else None


def review_log(path: Path, round_: str) -> RunReview:
    """Review one log under the rules of `round_` ("3.0", "3.1"), streaming it: memory does not
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
        converged_at=_in_units(_converged_at(report.target_met, evals, quality.metrics), quality.units_per_count),
        progress_unit=quality.progress_unit or (rule.progress if rule else None),
        metrics=quality.metrics,
        units_per_sample=quality.units_per_sample,
        samples_per_unit=quality.samples_per_unit,
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

    progress_unit: str | None
    units_per_sample: float | None
    samples_per_unit: float | None
    metrics: tuple[Metric, ...]
    units_per_count: float = 1.0  # progress units per count the log writes (epoch_num in epochs: samples per epoch)


def log_quality(events: list[Event], header: dict[str, Any] | None = None,
                counted_in: str | None = None) -> LogQuality:
    """The progress unit and quality metrics of one log's events: its own trainclock keys, else
    the facts of its submission_benchmark. `counted_in`: the metadata field its evaluations count
    progress in (samples_count, ...), where `events` holds only the header."""
    header = _header(events) if header is None else header
    facts = benchmark_facts(header.get("submission_benchmark"))
    counted_in = counted_in or next((progress_field(e.metadata) for e in events
                                     if e.key == "eval_accuracy" and isinstance(e.metadata, dict)), None)
    unit, units_per_sample = _progress_unit(events, header, facts, counted_in)
    samples_per_unit = _header_number(header, facts.samples_per_unit) if facts and facts.samples_per_unit else None
    return LogQuality(unit, units_per_sample, samples_per_unit, _metrics(events, facts),
                      _units_per_count(events, header))


def _units_per_count(events: list[Event], header: dict[str, Any]) -> float:
    """How many progress units one count of the log is: a trainclock log whose unit is images or
    samples may count epochs or optimizer steps (logged_in, as its benchmark's rules say: a step
    is global_batch_size samples); 1 where the log counts units."""
    event = next((e for e in _before_run_start(events) if e.key == UNIT_KEY), None)
    if event is None:
        return 1.0
    per_sample, per_epoch = event.metadata.get("per_sample", 1), event.metadata.get("samples_per_epoch")
    per_sample = per_sample if _finite(per_sample) and per_sample > 0 else 1
    logged_in = event.metadata.get("logged_in", "units")
    if logged_in == "samples":
        return float(per_sample)
    if logged_in == "epochs" and _finite(per_epoch) and per_epoch > 0:
        return float(per_sample * per_epoch)
    batch = _positive_int(header.get("global_batch_size"))
    if logged_in == "steps" and batch is not None:
        return float(per_sample * batch)
    return 1.0


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


def _progress_unit(events: list[Event], header: dict[str, Any], facts: BenchmarkFacts | None,
                   counted_in: str | None) -> tuple[str | None, float | None]:
    """(unit, units per sample): the log's trainclock_progress_unit, else the benchmark's facts
    (an old trainclock gpt3 log has no unit event: its benchmark counts tokens)."""
    event = next((e for e in _before_run_start(events) if e.key == UNIT_KEY and isinstance(e.value, str)), None)
    if event is not None and event.value:
        per_sample = event.metadata.get("per_sample")
        return event.value, float(per_sample) if _finite(per_sample) and per_sample > 0 else None
    if facts is None:
        return None, None
    unit = facts.unit_counted_by(counted_in)
    return unit, _header_number(header, facts.units_per_sample) if facts.units_per_sample else None


def _header_number(header: dict[str, Any], key: str) -> float | None:
    value = header.get(key)
    return float(value) if _finite(value) and value > 0 else None


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
    return tuple((units_to_samples(_in_units(count, quality.units_per_count), quality.progress_unit,
                                   quality.units_per_sample, quality.samples_per_unit), start, stop)
                 for count, start, stop in spans)


def units_to_samples(units: int | float | None, progress_unit: str | None, units_per_sample: float | None,
                     samples_per_unit: float | None) -> int | float | None:
    """Training samples in `units` of a log's progress unit, where the log says how they relate."""
    if units is None or progress_unit is None:
        return None
    if progress_unit == "samples":
        return units
    if units_per_sample:
        return units / units_per_sample
    if samples_per_unit:
        return units * samples_per_unit
    return None


def _in_units(count: int | float | None, units_per_count: float) -> int | float | None:
    if count is None or units_per_count == 1.0:
        return count
    units = count * units_per_count
    return round(units) if abs(units - round(units)) < 1e-6 * max(1.0, abs(units)) else units


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
    evaluation; lines naming their metric (stable diffusion's FID and CLIP) join those at the same
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
