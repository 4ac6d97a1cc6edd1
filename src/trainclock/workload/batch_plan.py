"""The checks every workload's batch goes through against the user's settings and the parallel
layout: a sane global batch, equal whole micro-batches on every data-parallel rank, and enough
micro-batches to keep a pipeline busy."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, TypeVar

from trainclock.distributed.layout import Layout
from trainclock.distributed.pipeline import check_microbatches, pipeline_micro_batch
from trainclock.errors import UsageError

if TYPE_CHECKING:
    from trainclock.workload.base import RunSettings

MAX_GLOBAL_BATCH = 1 << 20
Spec = TypeVar("Spec")


def check_global_batch(global_batch_size: int, unit: str) -> None:
    if not 0 < global_batch_size <= MAX_GLOBAL_BATCH:
        raise UsageError(f"global batch size {global_batch_size} is out of range; use 1 to {MAX_GLOBAL_BATCH} {unit}")


def micro_batch(global_batch_size: int, micro_batch_size: int | None, default_micro: int, layout: Layout,
                unit: str = "samples") -> int:
    """The micro-batch size a run uses: the user's (checked) or the default, made small enough for
    a pipeline to have work for every stage; refuses a batch the data-parallel ranks cannot share."""
    micro = micro_batch_size or min(default_micro, global_batch_size)
    if micro <= 0 or global_batch_size % micro:
        raise UsageError(f"micro-batch size {micro} must be positive and divide the global batch size {global_batch_size}")
    per_rank, remainder = divmod(global_batch_size, layout.dp)
    if remainder or per_rank == 0 or per_rank % min(micro, per_rank):
        raise UsageError(f"global batch size {global_batch_size} cannot be split evenly over {layout.dp} "
                         f"data-parallel ranks in micro-batches of {min(micro, per_rank)}; pick a --gbs divisible by both")
    if layout.pp == 1:
        return micro
    if micro_batch_size is None:
        micro = pipeline_micro_batch(per_rank, layout.pp, layout.pp_schedule)
    problem = check_microbatches(layout.pp_schedule, per_rank // min(micro, per_rank), layout.pp)
    if problem:
        raise UsageError(f"{problem}: each data-parallel rank gets {per_rank} {unit} per step; pass a smaller "
                         "--micro-batch, a larger --gbs, or --pp-schedule gpipe")
    return micro


def with_batch_settings(spec: Spec, settings: "RunSettings", layout: Layout, units: str) -> Spec:
    """`spec` at the user's --gbs (checked; the spec's own with_batch applies its benchmark's rules,
    e.g. a learning rate that scales with the batch) and --micro-batch (checked against the layout),
    both counted in `units` (plural, as the messages print them)."""
    if settings.global_batch_size is not None:
        check_global_batch(settings.global_batch_size, units)
        spec = spec.with_batch(settings.global_batch_size)
    return replace(spec, micro_batch_size=micro_batch(spec.global_batch_size, settings.micro_batch_size,
                                                      spec.micro_batch_size, layout, units))
