"""Calibration: what the step-time model cannot know from datasheets (the fraction of peak the
matmuls reach, the fixed costs of a step, an evaluation, a run), fitted for a question's workload
and accelerator by one protocol: sources tried in order, the first that applies answering.

1. own_runs: this machine's CPU, from trainclock's own stored runs (or, with none stored, the
   MFU its reference runs recorded);
2. the user's --efficiency, with the habits current frameworks have by default;
3. published_scores: every benchmark's published scores (shared/mlperf-suite), per
   accelerator, for the benchmarks result_files does not cover;
4. result_files: a benchmark's published results table and result logs, per software stack
   (submissions.toml names the benchmark and how each stack ran); it answers any accelerator it
   or its `like` has a stack for, and says why where none has, so it comes last.

A source that does not apply returns None and the next is tried. The Planner (planner/plan.py)
builds the sources with what they need and loads their data only when one is asked."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from trainclock.errors import UsageError
from trainclock.planner.model.convergence import ConvergenceModel
from trainclock.planner.model.hardware import Accelerator
from trainclock.planner.model.parallel_plan import Plan
from trainclock.planner.model.step_time import Efficiency
from trainclock.workload.cost_model import WorkloadCost

# Used when no calibrated stack says otherwise: what current frameworks do by default.
GENERIC_LAYOUT = {"sequence_parallel": True, "recompute": "selective", "zero": 1, "overlap": True}


@dataclass(frozen=True)
class Calibrated:
    """The efficiency and layout template a plan uses, and where they come from."""

    efficiency: Efficiency
    template: Plan  # precision, overlap, sharding... of the software stack
    source: str
    # what a plan keeps of how the calibration runs ran, unless --layout says otherwise (this CPU's
    # stored runs: their micro-batch, at which their efficiency was measured)
    fixed: dict[str, object] = field(default_factory=dict)
    convergence: ConvergenceModel | None = None  # the calibration runs' progress to target, where it stands


@dataclass(frozen=True)
class Request:
    """What a plan asks its calibration for."""

    cost: WorkloadCost
    accelerator: Accelerator
    stack: str | None = None  # --stack: one software stack of result_files, by id
    efficiency: float | None = None  # --efficiency: the matmuls' fraction of peak, overriding the fit


class Source(Protocol):
    def calibrate(self, request: Request) -> Calibrated | None:
        """The calibration for `request`, or None where this source does not apply."""


class GivenEfficiency:
    """The user's --efficiency, without a stack to take the rest from: the generic habits."""

    def calibrate(self, request: Request) -> Calibrated | None:
        if request.stack is not None or request.efficiency is None:
            return None
        return Calibrated(Efficiency(request.efficiency), generic_template(request.accelerator), "given (--efficiency)")


def generic_template(accelerator: Accelerator) -> Plan:
    precision = "bf16" if "bf16" in accelerator.peak_flops else "fp32"
    return replace(Plan(), precision=precision, **GENERIC_LAYOUT)


def calibrate(request: Request, sources: Sequence[Source]) -> Calibrated:
    """The first answer of `sources`, in order."""
    if request.efficiency is not None and not 0 < request.efficiency <= 1:
        raise UsageError(f"--efficiency {request.efficiency}: give the fraction of peak FLOP/s the matmuls reach, "
                         "in (0, 1]")
    for source in sources:
        found = source.calibrate(request)
        if found is not None:
            return found
    raise UsageError(f"no calibration applies to {request.cost.name} on {request.accelerator.id}; give --efficiency F")
