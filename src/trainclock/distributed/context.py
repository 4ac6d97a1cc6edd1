"""What the training loop needs to know about parallelism: its data-parallel slice of each
global batch, how to average across ranks, and how to agree on stopping."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh

from trainclock.distributed import collectives
from trainclock.distributed.env import DistEnv, current
from trainclock.distributed.layout import Layout
from trainclock.errors import TrainclockError

T = TypeVar("T")


@dataclass(frozen=True)
class ParallelContext:
    env: DistEnv
    layout: Layout
    mesh: DeviceMesh | None = None

    @property
    def dp_rank(self) -> int:
        return self.mesh["dp"].get_local_rank() if self.mesh is not None else 0

    @property
    def dp_size(self) -> int:
        return self.layout.dp

    def dp_slice(self, global_batch: int) -> slice:
        """This rank's rows of every global batch: disjoint, in order, covering it exactly."""
        per_rank = global_batch // self.dp_size
        return slice(self.dp_rank * per_rank, (self.dp_rank + 1) * per_rank)

    def dp_sum(self, value: torch.Tensor) -> torch.Tensor:
        """Sum over the data-parallel ranks (tensor-parallel peers hold the same value), on the
        device `value` is on: no host read, so the loop can sum a step's loss without waiting."""
        if self.mesh is not None and self.dp_size > 1:
            return collectives.all_reduce(value, group=self.mesh["dp"].get_group())
        return value

    def dp_gather(self, items: list) -> list:
        """Every data-parallel rank's items, concatenated in rank order (predictions of different
        lengths per rank: pickled, so any objects will do)."""
        if self.mesh is None or self.dp_size == 1:
            return list(items)
        group = self.mesh["dp"].get_group()
        parts: list = [None] * self.dp_size
        dist.all_gather_object(parts, list(items), group=group)
        return [item for part in parts for item in part]

    def any(self, flag: bool) -> bool:
        """True on every rank if it is true on any: stop decisions must be collective."""
        if not self.env.distributed:
            return flag
        # made on the communication device: NCCL refuses a CPU tensor
        t = torch.tensor([int(flag)], device=collectives.comm_device())
        return bool(collectives.all_reduce(t, op=dist.ReduceOp.MAX).item())

    def from_main(self, value: T | None) -> T:
        """Rank 0's value (any picklable object), on every rank; the others pass None."""
        if not self.env.distributed:
            return value
        box = [value]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def grad_sync(self, model: torch.nn.Module, enabled: bool):
        """Skip the gradient all-reduce on all but the last micro-batch of a step."""
        if enabled:
            return contextlib.nullcontext()
        if hasattr(model, "no_sync"):  # DDP
            return model.no_sync()
        if hasattr(model, "set_requires_gradient_sync"):  # FSDP2
            model.set_requires_gradient_sync(False)
            return _restore_sync(model)
        return contextlib.nullcontext()

    def main_first(self, build: Callable[[], T]) -> T:
        """Rank 0 builds (e.g. a data cache) while the others wait, then they build from it.
        A failure on rank 0 is raised on every rank instead of leaving them waiting."""
        if not self.env.distributed:
            return build()
        result, error = None, None
        if self.env.is_main:
            try:
                result = build()
            except TrainclockError as e:
                error = e
        box = [str(error) if error else None]
        dist.broadcast_object_list(box, src=0)
        if box[0] is not None:
            raise error if error else TrainclockError(box[0])
        return result if self.env.is_main else build()

    def barrier(self) -> None:
        if self.env.distributed:
            dist.barrier()


@contextlib.contextmanager
def _restore_sync(model):
    try:
        yield
    finally:
        model.set_requires_gradient_sync(True)


def single_process() -> ParallelContext:
    return ParallelContext(current(), Layout())
