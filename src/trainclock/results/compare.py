"""Side-by-side arithmetic for entries of one benchmark: per-accelerator throughput, speedup over
the slowest, and scaling efficiency between sizes of one system family.

Throughput is what the runs converged with: tokens (GPT-3) or samples to the quality target over
time-to-train, averaged over the runs that passed review. Scaling efficiency follows the design
notes, in both of their forms, since a larger global batch may need more data to converge:
  time-to-train:  efficiency(N -> kN) = (T(N) / T(kN)) / k
  throughput:     efficiency(N -> kN) = (throughput(kN) / throughput(N)) / k
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from itertools import pairwise

from trainclock.results.queries import EntryRow, RunStats


@dataclass(frozen=True)
class Compared:
    entry: EntryRow
    unit: str | None  # "tokens" or "samples": what the throughput counts
    throughput: float | None  # units per second, whole system
    speedup: float | None  # over the group's baseline (score over score)

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


def compare(entries: list[EntryRow], runs: dict[int, list[RunStats]]) -> list[Comparison]:
    """One comparison per benchmark, in the order the benchmarks first appear."""
    by_benchmark: dict[str, list[EntryRow]] = defaultdict(list)
    for entry in entries:
        by_benchmark[entry.benchmark].append(entry)
    return [_compare_benchmark(name, group, runs) for name, group in by_benchmark.items()]


def run_throughput(run: RunStats) -> tuple[str, float] | None:
    """(unit, units per second) of a run that passed and converged, else None."""
    amount = run.tokens_to_converge if run.progress_unit == "tokens" else run.samples_to_converge
    if not run.passed or amount is None or not run.time_to_train_ms or run.time_to_train_ms <= 0:
        return None
    return ("tokens" if run.progress_unit == "tokens" else "samples"), amount / (run.time_to_train_ms / 1000)


def _compare_benchmark(benchmark: str, entries: list[EntryRow], runs: dict[int, list[RunStats]]) -> Comparison:
    scored = [e for e in entries if _scored(e)]
    slowest = max(scored, key=lambda e: e.score_minutes, default=None)
    rows = []
    for entry in entries:
        measured = [m for m in map(run_throughput, runs.get(entry.id, [])) if m is not None]
        unit = measured[0][0] if measured else None
        throughput = sum(rate for _, rate in measured) / len(measured) if measured else None
        speedup = slowest.score_minutes / entry.score_minutes if slowest and _scored(entry) else None
        rows.append(Compared(entry, unit, throughput, speedup))
    baseline = next((row for row in rows if row.entry is slowest), None)
    return Comparison(benchmark, rows, baseline, _scaling(rows))


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
