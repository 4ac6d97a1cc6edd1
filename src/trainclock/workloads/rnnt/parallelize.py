"""What is RNN-T-specific in parallelising it: nothing to cut. The 49M-parameter network trains
data parallel (DDP) in the reference and the published entries; its greedy evaluation runs a
different number of steps per rank, which FSDP's per-forward all-gathers cannot do."""

from __future__ import annotations

from trainclock.distributed.layout import Layout
from trainclock.distributed.parallelize import ModelParallelism
from trainclock.errors import UsageError


def check_layout(layout: Layout) -> None:
    if layout.tp > 1 or layout.pp > 1:
        raise UsageError("RNN-T has no tensor-parallel plan or pipeline cut; run it data parallel (drop --tp/--pp)")
    if layout.fsdp and layout.dp > 1:
        raise UsageError("RNN-T trains data parallel with DDP (its greedy decoding cannot meet FSDP's all-gathers); "
                         "drop --fsdp")


PARALLELISM = ModelParallelism()
