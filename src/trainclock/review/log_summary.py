"""What a review keeps of a log besides its compliance findings, gathered event by event so that
a log of any size costs the same memory: the header, run_start/run_stop, the eval curve (its
first MAX_EVALS points; a stuck process can log millions) and trainclock's own header events."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from typing import Any

from trainclock.mllog.progress import UNIT_KEY, count_field, logged_count
from trainclock.mllog.reader import Event
from trainclock.mllog.time_to_train import eval_spans

MAX_EVALS = 10_000  # real logs have tens to a few hundred evaluations
MAX_HEADER_KEYS = 1_000
MAX_HEADER_VALUE = 4_000  # characters of JSON: hyperparameters are short
OWN_KEYS = ("trainclock_target", UNIT_KEY)  # read by log_quality
MAX_OWN_EVENTS = 100
MAX_STEPS = 10_000  # distinct step_num (or samples_count) values kept for a first-pass RCP reading
RCP_COUNT_KEYS = ("epoch_num", "samples_count")  # whose last value before run_stop rcp_checker may read
RCP_STEP_KEYS = ("step_num", "samples_count")  # what a first-pass benchmark's evaluations are keyed by, by round
RCP_EVAL_KEYS = ("eval_accuracy", "eval_error")  # the keys rcp_checker reads a convergence point from


@dataclass(frozen=True)
class RcpReading:
    """What rcp_checker.read_submission_file reads of a log: its last global_batch_size, and at the
    last run_stop whether the run converged (status success) and the progress it had logged then."""

    batch_size: Any = None  # the last global_batch_size logged anywhere (some benchmarks log it after run_start)
    converged: bool = False  # the last run_stop has status success
    last_epoch_num: Any = None  # epoch_num of the last eval line before that run_stop
    train_samples: Any = None  # the last train_samples value before that run_stop
    steps: dict | None = None  # step_num -> {metric: value} of the eval lines before it (first-pass benchmarks)
    stop_line: int | None = None  # that run_stop's line
    last_samples_count: Any = None  # samples_count of the last eval line before that run_stop
    samples_steps: dict | None = None  # as steps, keyed by samples_count (in later rounds)

    def last(self, key: str) -> Any:
        """The last eval line's `key` ("epoch_num", "samples_count") before the run_stop."""
        return self.last_samples_count if key == "samples_count" else self.last_epoch_num

    def evaluations(self, key: str) -> dict:
        """Count -> {metric: value} of the eval lines before the run_stop, by `key` ("step_num", "samples_count")."""
        return (self.samples_steps if key == "samples_count" else self.steps) or {}


@dataclass(frozen=True)
class EvalPoint:
    progress: int | float | None  # in the benchmark's progress unit (tokens, samples, epochs, steps)
    value: Any  # the metric as logged (a number; a dict for multi-metric benchmarks)
    metric: str | None  # metadata "metric" where one log mixes metrics (a line per metric)
    time_ms: int | float
    lineno: int


@dataclass
class LogSummary:
    header: dict[str, Any] = field(default_factory=dict)  # first value of each POINT_IN_TIME key before run_start
    own_events: list[Event] = field(default_factory=list)  # trainclock_* header events, before run_start
    starts: int = 0
    stops: int = 0
    first_start_ms: int | float | None = None
    first_stop_ms: int | float | None = None
    status: str = "unfinished"  # the last run_stop's metadata status
    evals: list[EvalPoint] = field(default_factory=list)
    evals_left_out: int = 0
    progress_field: str | None = None  # the metadata field the first evaluation counts progress in
    first_start_line: int | None = None
    last_line: int = 0
    rcp: RcpReading = field(default_factory=RcpReading)
    _running: bool = False
    _batch_size: Any = None
    _last: dict = field(default_factory=dict)  # RCP_COUNT_KEYS -> the last eval line's value
    _train_samples: Any = None
    _steps: dict = field(default_factory=lambda: {key: {} for key in RCP_STEP_KEYS})
    # where training resumes (block_start, epoch_start) ends an evaluation scored in the background
    _eval_marks: dict = field(default_factory=lambda: {"eval_start": [], "eval_stop": [], "block_start": [],
                                                       "epoch_start": []})

    def observe(self, e: Event) -> None:
        self.last_line = e.lineno
        if e.key in self._eval_marks and len(self._eval_marks[e.key]) < MAX_EVALS:
            self._eval_marks[e.key].append(e)
        if e.key in RCP_EVAL_KEYS:
            self._rcp_eval(e)
        elif e.key == "global_batch_size":
            self._batch_size = e.value
        elif e.key == "train_samples":
            self._train_samples = e.value
        if e.key == "run_start":
            self._running = True
            self.starts += 1
            if self.first_start_ms is None:
                self.first_start_ms = e.time_ms
                self.first_start_line = e.lineno
        elif e.key == "run_stop":
            self.stops += 1
            if self.first_stop_ms is None:
                self.first_stop_ms = e.time_ms
            self.status = str(e.metadata.get("status", "unknown"))[:100]
            # rcp_checker takes the state at the last run_stop, whatever came before it
            success = e.metadata.get("status") == "success"
            steps, samples = (dict(self._steps[k]) or None if success else None for k in RCP_STEP_KEYS)
            self.rcp = RcpReading(None, success, self._last.get("epoch_num") if success else None,
                                  self._train_samples if success else None, steps, e.lineno,
                                  self._last.get("samples_count") if success else None, samples)
        elif e.key == "eval_accuracy":
            if self.progress_field is None:
                self.progress_field = count_field(e.metadata)
            if len(self.evals) < MAX_EVALS:
                metric = e.metadata.get("metric")
                self.evals.append(EvalPoint(logged_count(e.metadata), e.value, metric if isinstance(metric, str) else None,
                                            e.time_ms, e.lineno))
            else:
                self.evals_left_out += 1
        if self._running:
            return
        if e.event_type == "POINT_IN_TIME" and e.key not in self.header and len(self.header) < MAX_HEADER_KEYS:
            self.header[e.key] = _bounded(e.value)
        if e.key in OWN_KEYS and len(self.own_events) < MAX_OWN_EVENTS:
            self.own_events.append(e)

    def _rcp_eval(self, e: Event) -> None:
        for key in RCP_COUNT_KEYS:
            if key in e.metadata:
                self._last[key] = e.metadata[key]
        metric = e.metadata.get("metric")
        if not isinstance(metric, str):
            return
        for key in RCP_STEP_KEYS:
            step, steps = e.metadata.get(key), self._steps[key]
            if _number(step) and (step in steps or len(steps) < MAX_STEPS):
                steps.setdefault(step, {})[metric] = e.value

    def rcp_reading(self) -> RcpReading:
        """The RCP reading of the whole log: the batch size is the last one logged, after run_stop too."""
        return replace(self.rcp, batch_size=self._batch_size)

    @property
    def time_to_train_ms(self) -> int | float | None:
        """run_stop - run_start; None unless exactly one of each."""
        if self.starts != 1 or self.stops != 1:
            return None
        return self.first_stop_ms - self.first_start_ms

    def eval_spans(self) -> tuple[tuple[float, float, float], ...] | None:
        """(progress as logged, start, stop) of each evaluation, times in seconds from run_start,
        in progress order: where the timed region went besides training. None without one
        run_start or where eval_start and eval_stop do not pair up."""
        marks = self._eval_marks
        spans = eval_spans(marks["eval_start"], marks["eval_stop"], marks["block_start"] + marks["epoch_start"])
        if spans is None or self.starts != 1:
            return None
        return tuple((tag, (a - self.first_start_ms) / 1000, (b - self.first_start_ms) / 1000) for tag, a, b in spans)

    def eval_curve(self) -> tuple[EvalPoint, ...]:
        # file order is not time order: sort by progress, then by time
        return tuple(sorted(self.evals, key=lambda p: (p.progress is None, p.progress or 0, p.time_ms)))


def _bounded(value: Any) -> Any:
    """The value, or the start of its text where it is too long to be a header value."""
    if isinstance(value, str):
        return value if len(value) <= MAX_HEADER_VALUE else value[:MAX_HEADER_VALUE] + "…"
    if isinstance(value, dict | list):
        try:
            text = json.dumps(value, default=str)
        except (ValueError, RecursionError):
            return "…"
        return value if len(text) <= MAX_HEADER_VALUE else text[:MAX_HEADER_VALUE] + "…"
    return value


def _number(value: Any) -> bool:
    # a step key must compare with itself: no NaN, which json reads from a log's NaN literal
    return isinstance(value, int) and not isinstance(value, bool) or isinstance(value, float) and math.isfinite(value)
