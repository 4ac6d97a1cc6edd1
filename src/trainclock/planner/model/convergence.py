"""How far a run trains to reach its quality target, as a function of the global batch size: the
workload's convergence points (MLPerf's RCPs, or trainclock's own reference runs), interpolated
linearly between batch sizes as MLPerf's RCP checker does. A run stops at the first evaluation
past the target, so what it trains rounds up to a whole number of evaluation intervals; the points,
means over such runs, are what a submission's runs train on average (expected_samples).

Points come in the benchmark's progress unit (tokens, samples, epochs); the planner counts samples."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from trainclock.errors import UsageError
from trainclock.workload.cost_model import WorkloadCost


@dataclass(frozen=True)
class ConvergenceModel:
    member: str
    points: tuple[tuple[int, float], ...]  # (global batch size, mean units to target), sorted
    source: str
    unit: str  # the progress unit of the points, e.g. "tokens"
    units_per_sample: float

    @property
    def batch_range(self) -> tuple[int, int]:
        return self.points[0][0], self.points[-1][0]

    def units_needed(self, global_batch_size: int) -> float:
        low, high = self.batch_range
        if not low <= global_batch_size <= high:
            span = f"global batch size {low}" if low == high else f"global batch sizes {low} to {high}"
            raise UsageError(f"{self.member}'s convergence data ({self.source}) cover only {span}; "
                             f"choose --gbs there, or give --tokens N to set the {self.unit} to train")
        sizes, units = zip(*self.points)
        return float(np.interp(global_batch_size, sizes, units))

    def extended_to(self, global_batch_size: int) -> ConvergenceModel:
        """The model with a point at `global_batch_size` past its largest batch: the progress to
        target extrapolated along the line through its last two points, as the RCP checker
        interpolates between points (past the critical batch, a larger batch needs proportionally
        more samples), never below the last point. For scales where no batch inside the data can
        run; the source says so."""
        (b0, u0), (b1, u1) = self.points[-2] if len(self.points) > 1 else self.points[-1], self.points[-1]
        if global_batch_size <= b1:
            return self
        slope = max(0.0, (u1 - u0) / (b1 - b0)) if b1 > b0 else 0.0
        units = u1 + slope * (global_batch_size - b1)
        return replace(self, points=(*self.points, (global_batch_size, units)),
                       source=f"{self.source}, extrapolated from global batch {b1:,} to {global_batch_size:,} along "
                              f"its last two points")

    def expected_samples(self, global_batch_size: int) -> int:
        """Samples the runs of a submission train on average, in whole steps: the points are already
        means over reference runs that each stopped at an evaluation (4.15 epochs: some runs
        stopped at the 4th, some at the 5th), so their mean is not rounded up to a whole interval
        again, which would charge a partial evaluation interval (a fifth of the training for 4.15
        epochs) that the average run does not train."""
        needed = self.units_needed(global_batch_size) / self.units_per_sample
        return math.ceil(needed / global_batch_size - 1e-9) * global_batch_size

    def samples_to_target(self, global_batch_size: int, interval_samples: int) -> int:
        """Samples trained until the first evaluation at or past the target."""
        needed = self.units_needed(global_batch_size) / self.units_per_sample
        return math.ceil(needed / interval_samples - 1e-9) * interval_samples


def eval_interval_samples(cost: WorkloadCost, global_batch_size: int) -> int:
    """Samples between evaluations: every eval_every_samples, at whole steps."""
    return math.ceil(cost.eval_every_samples / global_batch_size) * global_batch_size


def load_convergence(cost: WorkloadCost, mlperf_dir: Callable[[], Path]) -> ConvergenceModel:
    """The member's convergence model; `mlperf_dir` locates the MLPerf data when it is needed."""
    found = cost.convergence(mlperf_dir)
    if found is None or not found.points:
        raise UsageError(f"no convergence data for {cost.name}: neither MLPerf reference points nor recorded "
                         f"reference runs reach its target; give --tokens N to set the {cost.progress_unit} to train")
    return ConvergenceModel(cost.name, found.points, found.source, cost.progress_unit, cost.units_per_sample)
