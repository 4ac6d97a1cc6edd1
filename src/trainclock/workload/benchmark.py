"""A base for a benchmark's Workload: what every benchmark does the same way around its own
members, so that a benchmark writes only its shapes, data, model and checks. Its members come from
its MemberSet; resolve() is one skeleton with hooks for the benchmark's flags and checks; a model
without a tensor-parallel plan or pipeline cut refuses --tp/--pp here, once, before a run starts."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any, ClassVar

import torch

from trainclock.distributed.layout import Layout
from trainclock.errors import UsageError
from trainclock.workload.base import Member, RunSettings, TargetSource, TrainJob
from trainclock.workload.batch_plan import with_batch_settings
from trainclock.workload.spec_base import MemberSet, MemberSpec


class BenchmarkWorkload:
    key: ClassVar[str]  # the MLPerf benchmark key
    title: ClassVar[str]
    mlperf_round: ClassVar[str]
    specs: ClassVar[MemberSet]
    unit: ClassVar[str] = "samples"  # what the members' throughput counts
    batch_units: ClassVar[str] = "samples"  # what --gbs and --micro-batch count, as messages print it
    # why the model cannot be sharded by FSDP, where it cannot (it then trains with DDP): refuses --fsdp
    ddp_only: ClassVar[str | None] = None
    # whether the model has a tensor-parallel plan and a pipeline cut (distributed.parallelize)
    model_parallel: ClassVar[bool] = False
    # what a run of the member on the rules' data is told when it names no --data (None: it needs none)
    needs_data: ClassVar[str | None] = None
    # the member commands mean when the user names none (`trainclock data prepare`): one benchmark declares it
    default_member: ClassVar[str | None] = None
    # what `trainclock run <key>` needs beyond the key, for the README (data and start weights it cannot fetch)
    full_size_flags: ClassVar[str] = ""

    @property
    def full_size(self) -> str:
        """The member `trainclock run <key>` means: the one that follows the rules."""
        return next(s.name for s in self.specs.values() if s.target_source is TargetSource.MLPERF)

    def members(self) -> Sequence[Member]:
        return [Member(s.name, self.parameter_count(s), s.quality, s.target_source, self.describe(s),
                       unit=self.unit, target_note=s.target_note)
                for s in self.specs.values()]

    def member_names(self) -> list[str]:
        """The members' names, smallest first: what members() names, without counting parameters
        (which may build a model); the registry resolves names with it."""
        return [s.name for s in self.specs.values()]

    def parameter_count(self, spec: Any) -> int:
        return spec.parameter_count()

    def describe(self, spec: Any) -> str:
        """The member's shape in a few words, for `trainclock list`."""
        return ""

    def add_arguments(self, group: argparse._ArgumentGroup) -> None:
        return None

    def resolve(self, member: str, settings: RunSettings, layout: Layout, device: torch.device) -> Any:
        """The member with the workload's flags, refused where the layout cannot cut it, at the
        user's batch, then checked against its data and the device (the Workload protocol's resolve)."""
        spec = self.configure(self.specs.member(member), settings, layout, device)
        self.check_layout(spec, layout)
        spec = with_batch_settings(spec, settings, layout, self.batch_units)
        self.check_run(spec, settings, layout, device)
        return spec

    def configure(self, spec: Any, settings: RunSettings, layout: Layout, device: torch.device) -> MemberSpec:
        """The member with the workload's own flags (settings.extra) applied. Default: as it is."""
        return spec

    def check_layout(self, spec: Any, layout: Layout) -> None:
        """Refuses a layout the model cannot be cut into; a benchmark with a model-parallel plan
        checks its own cuts."""
        if not self.model_parallel and (layout.tp > 1 or layout.pp > 1):
            raise UsageError(f"{self.title} has no tensor-parallel plan or pipeline cut; run it data parallel "
                             "(drop --tp/--pp)")
        if self.ddp_only and layout.fsdp and layout.dp > 1:
            raise UsageError(f"{self.title} trains data parallel with DDP ({self.ddp_only}); drop --fsdp")

    def check_run(self, spec: Any, settings: RunSettings, layout: Layout, device: torch.device) -> None:
        """Refuses, before the run measures and imports for a minute, what would fail later: missing
        data, a member too large for the device. Default: the rules' member without --data (a dry
        run, on the meta device, reads none)."""
        rules_member = spec.target_source is TargetSource.MLPERF
        if self.needs_data and rules_member and settings.data is None and device.type != "meta":
            raise UsageError(self.needs_data)


def member_job(spec: MemberSpec, division: str, **fields: Any) -> TrainJob:
    """The job of a member's run: its name, MLPerf key, quality target and batch from the spec, the
    division the run falls in, and `fields`, the benchmark's own (a `benchmark` among them replaces
    the spec's mlperf_benchmark, for a spec that names its key otherwise)."""
    common = {"name": spec.name, "benchmark": getattr(spec, "mlperf_benchmark", None), "quality": spec.quality,
              "global_batch_size": spec.global_batch_size, "micro_batch_size": spec.micro_batch_size}
    return TrainJob(division=division, **{**common, **fields})
