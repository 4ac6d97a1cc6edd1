"""Pipeline parallel, the generic part: the protocol a workload's pipelined model implements
(the loop asks it for a whole step instead of micro-batch forwards), torch.distributed.pipelining's
schedules, and how many micro-batches a schedule needs. The cut into stages is model-specific and
lives in the workload's parallelize/pipeline module."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import torch
from torch import nn


def schedule_class(name: str) -> type:
    """torch.distributed.pipelining's schedule of this name (distributed.layout.PP_SCHEDULES). Imported
    here, when a pipeline is cut: it imports torch._dynamo, and every command imports this module."""
    from torch.distributed.pipelining import Schedule1F1B, ScheduleGPipe, ScheduleInterleaved1F1B

    return {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B, "interleaved-1f1b": ScheduleInterleaved1F1B}[name]


class PipelineModel(nn.Module, ABC):
    """This rank's pipeline stages. Its parameters carry the whole model's names (so checkpoints
    resume on any layout); `checkpoint_aliases` names copies saved as another parameter."""

    @abstractmethod
    def step(self, batch: Any) -> torch.Tensor:
        """Forward and backward of this rank's rows of a global batch through all stages, in the
        schedule's micro-batches, gradients reduced; the mean loss, on every pipeline rank."""

    @abstractmethod
    def grad_square_sum(self) -> torch.Tensor:
        """The squared gradient norm of the whole model (every stage, each parameter once)."""

    @property
    def checkpoint_aliases(self) -> dict[str, str]:
        return {}


def check_microbatches(schedule: str, microbatches: int, pp: int) -> str | None:
    """Why `microbatches` per step cannot run on `pp` pipeline ranks under `schedule` (None: they can)."""
    if schedule == "1f1b" and microbatches < pp:
        return f"the 1F1B schedule needs at least pp = {pp} micro-batches per step, got {microbatches}"
    rounds = max(1, microbatches // pp)
    if schedule == "interleaved-1f1b" and microbatches % rounds:
        return (f"the interleaved 1F1B schedule runs micro-batches in rounds of about pp = {pp}: "
                f"{microbatches} per step is not a whole number of its {rounds} rounds")
    return None


def pipeline_micro_batch(per_rank: int, pp: int, schedule: str) -> int:
    """The largest micro-batch that gives each data-parallel rank at least pp micro-batches per
    step (fewer leave pipeline ranks idle) and suits the schedule; 1 if nothing larger does."""
    for microbatches in range(pp, per_rank + 1):
        if per_rank % microbatches == 0 and check_microbatches(schedule, microbatches, pp) is None:
            return per_rank // microbatches
    return 1
