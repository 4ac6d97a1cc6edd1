"""Side-by-side arithmetic for entries of one benchmark: per-accelerator throughput, speedup over
the slowest, and scaling efficiency between sizes of one system family.

Throughput is what the runs converged with: the progress to the quality target in the run's own
unit (tokens, samples, ...) over time-to-train, averaged over the runs that passed review; for
runs that count epochs or steps, which are no amount of data by themselves, samples where the log
says how many. Quality is per metric, best in its direction (max where higher is better). Scaling efficiency follows the design
notes, in both of their forms, since a larger global batch may need more data to converge:
  time-to-train:  efficiency(N -> kN) = (T(N) / T(kN)) / k
  throughput:     efficiency(N -> kN) = (throughput(kN) / throughput(N)) / k
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from itertools import pairwise

from trainclock.mllog.progress import PASS_UNITS
from trainclock.review.benchmarks import Metric
from trainclock.results.queries import EntryRow, RunStats


@dataclass(frozen=True)
class Compared:
    entry: EntryRow
    unit: str | None  # "tokens", "samples", ...: what the throughput counts
    throughput: float | None  # units per second, whole system
    speedup: float | None  # over the group's baseline (score over score)
    best: dict[str, float] = field(default_factory=dict)  # best quality reached, by metric name

    @property
    def per_accelerator(self) -> float | None:
        n = self.entry.accelerators
        return self.throughput / n if self.throughput is not None and n else None


@dataclass(frozen=True)
class Scaling:
    family: str  # "<org> <accelerator> v<round>"
    small: Compared
    large: Compared

    @property
    def k(self) -> float:
        return self.large.entry.accelerators / self.small.entry.accelerators

    @property
    def time_efficiency(self) -> float:
        return self.small.entry.score_minutes / self.large.entry.score_minutes / self.k

    @property
    def throughput_efficiency(self) -> float | None:
        if self.small.throughput is None or self.large.throughput is None:
            return None
        return self.large.throughput / self.small.throughput / self.k


@dataclass(frozen=True)
class Comparison:
    benchmark: str
    rows: list[Compared]
    baseline: Compared | None  # the slowest scored entry, speedup 1
    scaling: list[Scaling]
    metrics: tuple[Metric, ...] = ()  # the benchmark's quality metrics, with their direction
    progress_unit: str | None = None


def compare(entries: list[EntryRow], runs: dict[int, list[RunStats]],
            best: dict[int, dict[str, float]] | None = None) -> list[Comparison]:
    """One comparison per benchmark, in the order the benchmarks first appear; `best` is each
    entry's best quality (queries.best_quality), where read."""
    by_benchmark: dict[str, list[EntryRow]] = defaultdict(list)
    for entry in entries:
        by_benchmark[entry.benchmark].append(entry)
    return [_compare_benchmark(name, group, runs, best or {}) for name, group in by_benchmark.items()]


def run_throughput(run: RunStats) -> tuple[str, float] | None:
    """(unit, units per second) of a run that passed and converged, else None."""
    if not run.passed or not run.time_to_train_ms or run.time_to_train_ms <= 0:
        return None
    seconds = run.time_to_train_ms / 1000
    if run.progress_unit and run.progress_unit not in PASS_UNITS and run.units_to_converge is not None:
        return run.progress_unit, run.units_to_converge / seconds
    if run.samples_to_converge is not None:
        return "samples", run.samples_to_converge / seconds
    return None


def _compare_benchmark(benchmark: str, entries: list[EntryRow], runs: dict[int, list[RunStats]],
                       best: dict[int, dict[str, float]]) -> Comparison:
    scored = [e for e in entries if _scored(e)]
    slowest = max(scored, key=lambda e: e.score_minutes, default=None)
    rows = []
    for entry in entries:
        measured = [m for m in map(run_throughput, runs.get(entry.id, [])) if m is not None]
        unit = measured[0][0] if measured else None
        measured = [m for m in measured if m[0] == unit]  # rates in one unit only are averaged
        throughput = sum(rate for _, rate in measured) / len(measured) if measured else None
        speedup = slowest.score_minutes / entry.score_minutes if slowest and _scored(entry) else None
        rows.append(Compared(entry, unit, throughput, speedup, best.get(entry.id, {})))
    baseline = next((row for row in rows if row.entry is slowest), None)
    described = next((e for e in entries if e.quality), None)
    unit = next((e.progress_unit for e in entries if e.progress_unit), None)
    return Comparison(benchmark, rows, baseline, _scaling(rows), described.quality if described else (), unit)


def _scaling(rows: list[Compared]) -> list[Scaling]:
    """Consecutive sizes within each family (same org, accelerator and round): at each size the
    fastest scored entry stands for it."""
    families: dict[tuple, dict[int, Compared]] = defaultdict(dict)
    for row in rows:
        e = row.entry
        if not (_scored(e) and e.accelerators and e.accelerator_model):
            continue
        sizes = families[(e.org, e.accelerator_model, e.round)]
        if e.accelerators not in sizes or e.score_minutes < sizes[e.accelerators].entry.score_minutes:
            sizes[e.accelerators] = row
    found = []
    for (org, model, round_), sizes in families.items():
        ordered = [sizes[n] for n in sorted(sizes)]
        found += [Scaling(f"{org} {model} v{round_}", small, large) for small, large in pairwise(ordered)]
    return found


def _scored(entry: EntryRow) -> bool:
    return entry.score_minutes is not None and entry.score_minutes > 0
