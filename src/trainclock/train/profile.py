"""`trainclock run --profile N`: torch.profiler over N training steps after a few unprofiled ones,
a Chrome trace (chrome://tracing, Perfetto) beside the run's log, and where the step's wall time
went: the loop's regions (labelled with record_function), the share outside forward, backward and
the optimizer, and the operators that cost most."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

# The loop's regions, in step order; the first two are the training step proper.
FORWARD_BACKWARD, OPTIMIZER = "forward and backward", "optimizer"
BATCH, LOSS_SYNC, LOGGING = "batch assembly", "loss sync", "logging and progress"
EVALUATION = "evaluation"  # not the step: left out of the step's wall time
REGIONS = (BATCH, FORWARD_BACKWARD, OPTIMIZER, LOSS_SYNC, LOGGING, EVALUATION)
SKIP_STEPS = 2  # the first steps warm caches and allocators: not what a run spends its time on
TOP_OPERATORS = 12
# what Kineto (the profiler's C++ side) writes straight to file descriptor 2: its own bookkeeping
# ("USDT: ... profiler_start") and, on a machine without a GPU, "ERROR: ... gpuGetDeviceCount failed"
_KINETO_LINE = re.compile(r"(USDT|ERROR|WARNING|INFO|STAGE|VERBOSE):\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \d+:\d+ \S+:\d+\] ")


@contextlib.contextmanager
def native_stderr_filtered():
    """Keep Kineto's lines out of the user's output: file descriptor 2 goes to a temporary file
    while the profiler starts, steps and stops, and every other line written meanwhile is passed on."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no file descriptor 2 to borrow
        yield
        return
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            text = capture.read().decode(errors="replace")
            kept = "".join(line for line in text.splitlines(keepends=True) if not _KINETO_LINE.match(line))
            if kept:
                sys.stderr.write(kept)
                sys.stderr.flush()


@dataclass(frozen=True)
class ProfileReport:
    steps: int
    wall_s: float  # the profiled loop iterations end to end, their evaluations excluded
    regions: dict[str, float]  # seconds in each region over the profiled steps
    operators: list[tuple[str, float, int]]  # (name, self CPU seconds, calls), costliest first
    trace: Path

    @property
    def outside_step_s(self) -> float:
        """Wall time not spent in forward, backward or the optimizer."""
        return max(self.wall_s - self.regions.get(FORWARD_BACKWARD, 0.0) - self.regions.get(OPTIMIZER, 0.0), 0.0)

    @property
    def step_s(self) -> float:
        return self.wall_s / self.steps if self.steps else 0.0


class StepProfiler:
    """Profiles loop iterations SKIP_STEPS+1 .. SKIP_STEPS+steps (the one before them warms the
    profiler up, as its schedule wants). `region` labels a part of an iteration; `stepped` ends one."""

    def __init__(self, steps: int, trace: Path) -> None:
        self.steps, self.trace = steps, trace
        with native_stderr_filtered():
            self._profiler = profile(activities=[ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])],
                                     schedule=schedule(wait=SKIP_STEPS - 1, warmup=1, active=steps, repeat=1),
                                     on_trace_ready=self._finish)
            self._profiler.start()
        self._seen, self._wall, self._last = 0, 0.0, time.perf_counter()
        self.report: ProfileReport | None = None

    def region(self, name: str):
        return record_function(name) if self.report is None else contextlib.nullcontext()

    def stepped(self) -> None:
        if self.report is not None:
            return
        now = time.perf_counter()
        self._seen += 1
        if self._seen > SKIP_STEPS:
            self._wall += now - self._last
        with native_stderr_filtered():  # a step starts or stops the profiler, and finishes its report
            self._profiler.step()
        self._last = time.perf_counter()  # the profiler's own bookkeeping is not the loop's

    def close(self) -> None:
        """A run that ends before the profiled steps do reports what it profiled."""
        if self.report is None:
            with native_stderr_filtered():
                self._profiler.stop()

    def _finish(self, prof) -> None:
        averages = prof.key_averages()
        regions = {e.key: e.cpu_time_total / 1e6 for e in averages if e.key in REGIONS}
        operators = sorted(((e.key, e.self_cpu_time_total / 1e6, e.count) for e in averages
                            if e.key not in REGIONS and not e.key.startswith("ProfilerStep")),
                           key=lambda op: op[1], reverse=True)[:TOP_OPERATORS]
        # written whole or not at all: a half-written trace would not load
        fd, tmp = tempfile.mkstemp(dir=self.trace.parent, prefix=f".{self.trace.name}.")
        os.close(fd)
        try:
            prof.export_chrome_trace(tmp)
            os.replace(tmp, self.trace)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        profiled = max(self._seen - SKIP_STEPS, 0)
        wall = max(self._wall - regions.get(EVALUATION, 0.0), 0.0)
        self.report = ProfileReport(profiled, wall, regions, operators, self.trace)


class NoProfiler:
    """What the loop uses when not profiling: labels cost nothing."""

    report = None

    def region(self, name: str):
        return contextlib.nullcontext()

    def stepped(self) -> None:
        pass

    def close(self) -> None:
        pass
