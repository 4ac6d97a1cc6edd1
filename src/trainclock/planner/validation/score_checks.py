"""`plan --validate` for every benchmark but submissions.toml's: each published entry predicted from a fit
on the other entries of its benchmark and accelerator (leave-one-out), the fits on all entries,
and the floor no model of accelerator and count can go below: entries on the same accelerators in
the same number, by different submitters, differ among themselves."""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from trainclock.planner.calibration import published_scores
from trainclock.planner.model.hardware import Accelerator


EXTRAPOLATION_GAP = 4  # fit on systems this many times smaller than those predicted


@dataclass(frozen=True)
class BenchmarkReport:
    key: str
    fits: dict[str, published_scores.GroupFit]  # by accelerator id, on every entry
    leave_one_out: list[published_scores.SuiteCheck]
    extrapolation: list[published_scores.SuiteCheck]  # fitted on systems of at most 1/EXTRAPOLATION_GAP of the largest
    same_hardware_spread: float | None  # mean |log| distance of an entry from its group's geometric mean
    timing: published_scores.EvalTiming | None

    @property
    def error_summary(self) -> tuple[float, float] | None:
        return summary(self.leave_one_out)

    @property
    def extrapolation_summary(self) -> tuple[float, float] | None:
        return summary(self.extrapolation)


def summary(rows: list[published_scores.SuiteCheck]) -> tuple[float, float] | None:
    """(mean, worst) absolute error of the rows, as fractions."""
    errors = [abs(r.error) for r in rows]
    return (statistics.fmean(errors), max(errors)) if errors else None


@dataclass(frozen=True)
class SuiteReport:
    benchmarks: list[BenchmarkReport]
    left_out: Counter


def same_hardware_spread(bench: published_scores.Benchmark) -> float | None:
    """How far, on average, an entry's score is from the geometric mean of the entries on the same
    accelerator in the same number (as a fraction): what the software and host alone change."""
    groups = defaultdict(list)
    for entries in bench.groups.values():
        for e in entries:
            groups[(e.accelerator.id, e.row.count)].append(math.log(e.row.score_minutes))
    distances = [abs(x - statistics.fmean(logs)) for logs in groups.values() if len(logs) > 1 for x in logs]
    return math.expm1(statistics.fmean(distances)) if distances else None


def validate_suite(folder: Path, catalogue: dict[str, Accelerator], mlperf_dir: Callable[[], Path]) -> SuiteReport:
    data = published_scores.load_suite(folder, catalogue, mlperf_dir)
    reports = [BenchmarkReport(key, published_scores.fitted(bench), published_scores.leave_one_out(bench),
                               published_scores.extrapolation(bench, EXTRAPOLATION_GAP), same_hardware_spread(bench), bench.timing)
               for key, bench in sorted(data.benchmarks.items())]
    return SuiteReport(reports, data.left_out)
