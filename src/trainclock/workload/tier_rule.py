"""The rule a CPU tier's target must pass to measure training rather than noise (issue 34), read
from at least 5 reference runs (the evidence in <workload package>/targets/<member>.json), each
trained over the whole budget:

1. learning share = (target - start) / (plateau - start) >= 0.7 for every metric (start: the median
   first evaluation; plateau: the median over seeds of each seed's best evaluation in the budget);
2. flat at the end: the median curve's gain over its last interval <= 0.5 x its mean gain per interval;
3. stable: the coefficient of variation of samples-to-target over seeds (each crossing interpolated
   linearly between evaluations) <= 2x the largest of the benchmark's MLPerf RCPs;
4. no noise crossings: no seed falls back short of the target after first meeting it, and the
   evaluation noise near the target <= 0.1 x |target - start|;
5. not met at the first evaluation, and at least 4 evaluations before the median crossing.

Progress is counted in the run's own units (samples, or tokens where the evidence predates
samples): the CV and the counts of evaluations do not depend on which."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from trainclock.workload.base import QualityTarget

LEARNING_SHARE = 0.7
FLAT_GAIN = 0.5
CV_FACTOR = 2.0
NOISE_SHARE = 0.1
EVALS_BEFORE = 4
SEEDS = 5

Curve = list[tuple[float, dict[str, float]]]  # (progress units, {metric: value}) per evaluation


def curves(runs: Sequence[dict]) -> list[Curve]:
    """Each run's evaluations as (units, metrics), from the evidence rows [time_s, samples, units,
    {metric: value}]."""
    return [[(float(units), {k: float(v) for k, v in metrics.items()}) for _, _, units, metrics in run.get("evals") or []]
            for run in runs]


def _gain(target: QualityTarget, before: float, after: float) -> float:
    """How much closer to better `after` is than `before` (positive is improvement)."""
    return after - before if target.direction == "higher" else before - after


def crossing(curve: Curve, quality: Sequence[QualityTarget]) -> tuple[int, float] | None:
    """(index of the first evaluation meeting every target, progress at which the run crossed it,
    interpolated linearly from the evaluation before), or None if it never does."""
    for i, (units, metrics) in enumerate(curve):
        if all(t.met(metrics[t.metric]) for t in quality):
            if i == 0:
                return 0, units
            before_units, before = curve[i - 1]
            at = before_units
            for t in quality:  # every metric must hold: the crossing is the latest of theirs
                rise = _gain(t, before[t.metric], metrics[t.metric])
                need = _gain(t, before[t.metric], t.threshold)
                share = min(max(need / rise, 0.0), 1.0) if rise > 0 else 1.0
                at = max(at, before_units + share * (units - before_units))
            return i, at
    return None


def noise(curve_values: Sequence[float]) -> float:
    """Evaluation-to-evaluation noise of a curve: the standard deviation of white noise on a
    locally straight trend, from second differences (each is noise x (1, -2, 1): variance 6 s^2)."""
    second = [curve_values[i - 1] - 2 * curve_values[i] + curve_values[i + 1] for i in range(1, len(curve_values) - 1)]
    return math.sqrt(sum(d * d for d in second) / (6 * len(second))) if second else float("nan")


@dataclass(frozen=True)
class Point:
    name: str
    passed: bool
    shown: str  # the measured value against its limit, in a few words
    value: float | None = None  # the figure judged, where one is (the smallest learning share, the CV)


def start_and_plateau(all_curves: Sequence[Curve], target: QualityTarget) -> tuple[float, float]:
    """The median first evaluation and the median over seeds of each seed's best evaluation."""
    start = statistics.median(c[0][1][target.metric] for c in all_curves)
    best = max if target.direction == "higher" else min
    return start, statistics.median(best(m[target.metric] for _, m in c) for c in all_curves)


def judge(runs: Sequence[dict], quality: Sequence[QualityTarget], rcp_cv: float | None) -> list[Point]:
    """The five points of the rule for one tier's reference runs."""
    all_curves = [c for c in curves(runs) if c]
    points = [Point("seeds", len(all_curves) >= SEEDS, f"{len(all_curves)} reference seeds (>= {SEEDS})")]
    shares, flats = [], []
    length = min(map(len, all_curves))
    for t in quality:
        start, plateau = start_and_plateau(all_curves, t)
        span = _gain(t, start, plateau)
        shares.append((t.metric, _gain(t, start, t.threshold) / span if span > 0 else float("-inf")))
        median_curve = [statistics.median(c[i][1][t.metric] for c in all_curves) for i in range(length)]
        gains = [_gain(t, a, b) for a, b in zip(median_curve, median_curve[1:])]
        mean_gain = sum(gains) / len(gains) if gains else 0.0
        flats.append((t.metric, gains[-1] / mean_gain if gains and mean_gain > 0 else float("inf")))
    points.append(Point("learning share", all(s >= LEARNING_SHARE for _, s in shares),
                        ", ".join(f"{m} {s:.2f}" for m, s in shares) + f" (>= {LEARNING_SHARE})",
                        min(s for _, s in shares)))
    points.append(Point("flat at the end", all(f <= FLAT_GAIN for _, f in flats),
                        ", ".join(f"{m} last/mean gain {f:.2f}" for m, f in flats) + f" (<= {FLAT_GAIN})"))
    crossings = [crossing(c, quality) for c in all_curves]
    reached = [x for x in crossings if x is not None]
    if len(reached) < len(crossings):
        points.append(Point("stable", False, f"{len(crossings) - len(reached)} of {len(crossings)} seeds never reach the target"))
    else:
        at = [units for _, units in reached]
        cv = statistics.pstdev(at) / statistics.mean(at)
        limit = CV_FACTOR * rcp_cv if rcp_cv is not None else None
        points.append(Point("stable", limit is not None and cv <= limit,
                            f"CV {cv:.3f} over {len(at)} seeds" + (f" (<= {limit:.3f})" if limit is not None else " (no RCP)"),
                            cv))
    fallbacks = sum(1 for c, x in zip(all_curves, crossings) if x is not None and
                    any(not all(t.met(m[t.metric]) for t in quality) for _, m in c[x[0] + 1:]))
    worst_noise = []
    for t in quality:
        start, _ = start_and_plateau(all_curves, t)
        window = []  # each seed's evaluations around its crossing
        for c, x in zip(all_curves, crossings):
            centre = x[0] if x is not None else len(c) - 1
            window.append(noise([m[t.metric] for _, m in c[max(0, centre - 3):centre + 4]]))
        sigma = statistics.median(w for w in window if not math.isnan(w)) if any(not math.isnan(w) for w in window) else float("nan")
        worst_noise.append((t.metric, sigma / abs(t.threshold - start) if t.threshold != start else float("inf")))
    quiet = all(n <= NOISE_SHARE for _, n in worst_noise)
    points.append(Point("no noise crossings", fallbacks == 0 and quiet,
                        f"{fallbacks} seeds fall back; noise/|target-start| " +
                        ", ".join(f"{m} {n:.2f}" for m, n in worst_noise) + f" (<= {NOISE_SHARE})"))
    first = sum(1 for x in crossings if x is not None and x[0] == 0)
    median_at = statistics.median(units for _, units in reached) if reached else float("inf")
    before = min(sum(1 for units, _ in c if units < median_at) for c in all_curves)
    points.append(Point("not at the start", first == 0 and before >= EVALS_BEFORE,
                        f"{first} seeds meet it at the first evaluation; {before} evaluations before the median "
                        f"crossing (>= {EVALS_BEFORE})"))
    return points
