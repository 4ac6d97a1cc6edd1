"""The cost model's parts that follow from a member's spec alone, the same for every benchmark:
its name, MLPerf key, batch and cadence, the units to its target (the rules' reference points for
a member that follows the rules, its own reference runs for a measured one) and the efficiency
trainclock's recorded runs reached. A benchmark's cost model subclasses SpecCost and writes the
model's own numbers (parameters, FLOPs, activations)."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import replace
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

from trainclock.mllog.progress import ProgressCodec
from trainclock.workload import evidence
from trainclock.workload.base import Progress, TargetSource
from trainclock.workload.cost_model import ConvergencePoints, WorkloadCost, rcp_convergence
from trainclock.workload.spec_base import MemberSet, MemberSpec


class SpecCost(WorkloadCost):
    """A cost model over a member's spec (a dataclass field `spec` in the subclass) whose name, batch
    size and eval cadence are the spec's own `name`, `mlperf_benchmark`, `global_batch_size` and
    `eval_every_samples`; `members` is the benchmark's MemberSet (the measured members' evidence),
    `spec_progress` its run_progress."""

    spec: MemberSpec
    members: ClassVar[MemberSet]
    # the benchmark's run_progress (a staticmethod): the Progress its member's runs log, so that the
    # plan counts progress as the log does
    spec_progress: ClassVar[Callable[[Any], Progress]]

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def benchmark(self) -> str:
        return self.spec.mlperf_benchmark

    @property
    def progress(self) -> ProgressCodec:
        return self.spec_progress(self.spec).codec

    @property
    def reference_batch_size(self) -> int:
        return self.spec.global_batch_size

    @property
    def eval_every_samples(self) -> int:
        return self.spec.eval_every_samples

    @property
    def units_per_progress(self) -> float:
        """The loop's units (what the reference runs record) in one unit of this cost model's
        progress: an epoch's samples where the rules count epochs. Default 1."""
        return 1

    def convergence(self, mlperf_dir: Callable[[], Path]) -> ConvergencePoints | None:
        """The rules' reference points for a member that follows the rules; for a measured one, the
        median progress at which its reference runs met the target; None for an estimated target."""
        spec = self.spec
        if spec.target_source is TargetSource.MLPERF:
            return self.rules_convergence(mlperf_dir)
        if spec.target_source is not TargetSource.MEASURED:
            return None
        runs = self.target_evidence(spec.name).get("runs") or []
        if not runs:
            return None
        return evidence.convergence(spec.name, runs, spec.quality, spec.global_batch_size, self.units_per_progress)

    def target_evidence(self, name: str) -> dict:
        """The recorded evidence of member `name` (targets/<name>.json)."""
        return self.members.evidence(name)

    def rules_convergence(self, mlperf_dir: Callable[[], Path]) -> ConvergencePoints:
        """The rules' reference convergence points, in this cost model's progress units."""
        return rcp_convergence(mlperf_dir(), self.benchmark, self.mlperf_round)

    def measured_efficiency(self) -> tuple[float, str] | None:
        """The median MFU of trainclock's recorded runs (measured against the same matmul peak the
        planner measures for this-cpu): this member's verification runs, then its reference runs,
        then the reference runs of every measured member (efficiency depends on the model's size)."""
        return evidence.efficiency(self.name, {s.name: self.target_evidence(s.name) for s in self.members.measured()})

    def own_efficiency(self) -> tuple[float, str] | None:
        """The median MFU of this member's own reference runs alone, for a benchmark whose members'
        efficiencies do not carry over to each other."""
        if self.spec.target_source is not TargetSource.MEASURED:
            return None
        mfus = evidence.mfus(self.target_evidence(self.name).get("runs"))
        if not mfus:
            return None
        return statistics.median(mfus), f"median MFU of {len(mfus)} {self.name} reference runs"


class LayerStackCost(SpecCost):
    """The size of a model that is a stack of identical layers between embeddings and heads (a
    transformer), from its spec's `shape`: parameter_count() counts it all, and the same shape with
    n_layer 0 counts what a pipeline does not cut (embeddings, heads, final norms)."""

    @cached_property
    def parameter_count(self) -> int:
        return self.spec.shape.parameter_count()

    @property
    def layers(self) -> int:
        return self.spec.shape.n_layer

    @cached_property
    def other_parameters(self) -> int:
        return replace(self.spec.shape, n_layer=0).parameter_count()

    @cached_property
    def layer_parameters(self) -> float:
        return (self.parameter_count - self.other_parameters) / self.layers
